// CTS: the driver registry and device specs; device information of every available driver.
#include <algorithm>
#include <string>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// ---------------------------------------------------------------------------------------------
// The built-in registry (not parameterized: the CPU driver is always there).

TEST(DriverRegistryTest, BuiltinListsCpu) {
  const hal::DriverRegistry& registry = drivers::builtin_registry();
  std::vector<std::string> names;
  for (const hal::DriverRef& driver : registry.drivers()) names.push_back(driver->name());
  EXPECT_TRUE(contains(names, "cpu"));
  auto cpu = registry.find("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ((*cpu)->name(), "cpu");
  CTS_EXPECT_OK((*cpu)->availability());
  EXPECT_TRUE(contains(registered_drivers(), "cpu"));
  // The same registry every time.
  EXPECT_EQ(&registry, &drivers::builtin_registry());
}

TEST(DriverRegistryTest, FindUnknownIsNotFound) {
  auto missing = drivers::builtin_registry().find("nosuch");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  // The message names the drivers that do exist.
  EXPECT_NE(missing.status().message().find("cpu"), std::string::npos)
      << missing.status().to_string();
}

TEST(DriverRegistryTest, CreateCpuDevices) {
  const hal::DriverRegistry& registry = drivers::builtin_registry();
  for (const char* spec : {"cpu", "cpu:0"}) {
    auto device = registry.create_device(spec);
    ASSERT_TRUE(device.ok()) << spec << ": " << device.status().to_string();
    const hal::DeviceInfo& info = (*device)->info();
    EXPECT_EQ(info.name, "cpu:0");
    EXPECT_EQ(info.driver, "cpu");
    EXPECT_EQ(info.ordinal, 0u);
    EXPECT_TRUE(contains(info.capabilities.executable_formats, "c"));
    EXPECT_GE(info.capabilities.compute_units, 1u);
  }
}

TEST(DriverRegistryTest, BadSpecs) {
  const hal::DriverRegistry& registry = drivers::builtin_registry();
  auto expect_code = [&](const char* spec, StatusCode code) {
    auto device = registry.create_device(spec);
    EXPECT_FALSE(device.ok()) << spec;
    EXPECT_EQ(device.status().code(), code) << "'" << spec << "': " << device.status().to_string();
  };
  expect_code("cpu:7", StatusCode::kOutOfRange);
  expect_code("cpu:4000000000", StatusCode::kOutOfRange);
  expect_code("nosuch", StatusCode::kNotFound);
  expect_code("nosuch:0", StatusCode::kNotFound);
  expect_code("cpu:x", StatusCode::kInvalidArgument);
  expect_code("", StatusCode::kInvalidArgument);
  expect_code("cpu:", StatusCode::kInvalidArgument);
  expect_code("cpu:-1", StatusCode::kInvalidArgument);
  expect_code("cpu:0:0", StatusCode::kInvalidArgument);
  // Either malformed or naming no driver / no device; never a crash or a device.
  for (const char* spec : {":0", "cpu:99999999999999999999999", "cpu: 0", "cpu:0x1"}) {
    auto device = registry.create_device(spec);
    EXPECT_FALSE(device.ok()) << spec;
    StatusCode code = device.status().code();
    EXPECT_TRUE(code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ||
                code == StatusCode::kOutOfRange)
        << "'" << spec << "': " << device.status().to_string();
  }
}

TEST(DriverRegistryTest, OwnRegistryRefusesDuplicates) {
  hal::DriverRegistry registry;
  EXPECT_TRUE(registry.drivers().empty());
  EXPECT_EQ(registry.create_device("cpu").status().code(), StatusCode::kNotFound);
  CTS_ASSERT_OK(registry.add(drivers::make_cpu_driver()));
  CTS_EXPECT_CODE(kAlreadyExists, registry.add(drivers::make_cpu_driver()));
  EXPECT_EQ(registry.drivers().size(), 1u);
  auto device = registry.create_device("cpu:0");
  ASSERT_TRUE(device.ok()) << device.status().to_string();
}

TEST(DriverRegistryTest, UnavailableDriversSayWhy) {
  for (const hal::DriverRef& driver : drivers::builtin_registry().drivers()) {
    Status availability = driver->availability();
    if (availability.ok()) continue;
    SCOPED_TRACE(driver->name());
    EXPECT_EQ(availability.code(), StatusCode::kUnavailable) << availability.to_string();
    EXPECT_FALSE(availability.message().empty());
    auto device = drivers::builtin_registry().create_device(driver->name());
    EXPECT_FALSE(device.ok());
    EXPECT_EQ(device.status().code(), StatusCode::kUnavailable) << device.status().to_string();
  }
}

// ---------------------------------------------------------------------------------------------
// Every available driver.

class DriverTest : public CtsTest {};
KILN_CTS_INSTANTIATE(DriverTest);

TEST_P(DriverTest, EnumerateAndDescribe) {
  hal::DriverRef driver = must(drivers::builtin_registry().find(GetParam()), "find");
  auto devices = driver->enumerate_devices();
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  ASSERT_FALSE(devices->empty());
  for (uint32_t i = 0; i < devices->size(); ++i) {
    const hal::DeviceInfo& info = (*devices)[i];
    EXPECT_EQ(info.driver, GetParam());
    EXPECT_EQ(info.ordinal, i);
    EXPECT_EQ(info.name, GetParam() + ":" + std::to_string(i));
    EXPECT_FALSE(info.capabilities.executable_formats.empty());
  }
  const hal::DeviceInfo& info = device().info();
  EXPECT_EQ(info.driver, GetParam());
  EXPECT_EQ(info.name, GetParam() + ":0");
  EXPECT_GE(info.capabilities.compute_units, 1u);
  // One past the last ordinal is OUT_OF_RANGE.
  auto past =
      drivers::builtin_registry().create_device(GetParam() + ":" + std::to_string(devices->size()));
  EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange) << past.status().to_string();
}

TEST_P(DriverTest, QueuesAndSemaphores) {
  auto queue = device().create_queue("named");
  ASSERT_TRUE(queue.ok()) << queue.status().to_string();
  EXPECT_EQ((*queue)->name(), "named");
  EXPECT_EQ((*queue)->device_tag(), device().tag());
  auto unnamed = device().create_queue();
  ASSERT_TRUE(unnamed.ok()) << unnamed.status().to_string();
  SemaphoreRef s = semaphore(3);
  EXPECT_EQ(value_of(s), 3u);
  auto cb = device().create_command_buffer();
  EXPECT_EQ(cb->device_tag(), device().tag());
}

TEST_P(DriverTest, DevicesAreIndependent) {
  // Two devices of one driver, used at once.
  hal::DeviceRef other = must(drivers::builtin_registry().create_device(GetParam()), "device");
  hal::QueueRef other_queue = must(other->create_queue(), "queue");
  BufferRef mine = make_buffer(64, 1);
  BufferRef theirs = must(other->allocator().allocate({}, 64), "allocate");
  uint8_t pattern = 2;
  SemaphoreRef a = semaphore(), b = other->create_semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{a, 1}}, mine, 0, 64, &pattern, 1));
  CTS_ASSERT_OK(other_queue->fill({{a, 1}}, {{b, 1}}, theirs, 0, 64, &pattern, 1));
  CTS_ASSERT_OK(wait(b, 1));
  EXPECT_EQ(read_bytes(mine), std::vector<uint8_t>(64, 2));
  std::vector<uint8_t> back(64);
  CTS_ASSERT_OK(theirs->read_data(0, back.data(), 64));
  EXPECT_EQ(back, std::vector<uint8_t>(64, 2));
}

}  // namespace
}  // namespace kiln::cts
