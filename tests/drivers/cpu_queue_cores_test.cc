// Where the CPU device's queue threads run (drivers/cpu/queue_cores.h). Spread
// (DeviceOptions::spread_queues, else KILN_CPU_AFFINITY=spread): a device's only queue is left to
// the system; from the second queue on, the queue threads are pinned round-robin over the cores
// the creating thread may run on, in creation order. By default, or with none, every queue thread
// is left to the system; a malformed setting is an error naming the variable. Each queue reports
// its own thread's cores from a host call, which runs on that thread.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <optional>
#include <vector>

#include "common/scoped_env.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"
#include "kiln/hal/queue.h"

namespace kiln {
namespace {

using test::ScopedEnv;

std::vector<int> thread_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (CPU_ISSET(core, &set)) cores.push_back(core);
  }
  return cores;
}

// The cores `queue`'s thread may run on, asked on that thread.
std::vector<int> queue_cores(const hal::DeviceRef& device, const hal::QueueRef& queue) {
  std::vector<int> cores;
  auto done = device->create_semaphore();
  Status submitted = queue->host_call({}, {{done, 1}}, [&](const hal::SemaphoreList&) {
    cores = thread_cores();
    return Status();
  });
  EXPECT_TRUE(submitted.ok()) << submitted.to_string();
  Status waited = done->wait(1, Timeout::after_ms(10000));
  EXPECT_TRUE(waited.ok()) << waited.to_string();
  return cores;
}

std::vector<hal::QueueRef> make_queues(const hal::DeviceRef& device, int count) {
  std::vector<hal::QueueRef> queues;
  for (int i = 0; i < count; ++i) {
    Result<hal::QueueRef> queue = device->create_queue("q" + std::to_string(i));
    EXPECT_TRUE(queue.ok()) << queue.status().to_string();
    if (queue.ok()) queues.push_back(*queue);
  }
  return queues;
}

hal::DeviceRef make_device(const char* driver, std::optional<bool> spread = std::nullopt) {
  hal::DeviceOptions options;
  options.cache_dir = "";
  options.spread_queues = spread;
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device(driver, options);
  EXPECT_TRUE(device.ok()) << device.status().to_string();
  return device.ok() ? *device : nullptr;
}

TEST(CpuQueueCores, TheOnlyQueueIsLeftToTheSystemAndTwoOrMoreAreSpread) {
  const std::vector<int> all = thread_cores();
  if (all.size() < 2) GTEST_SKIP() << "this process may run on one core only";
  ScopedEnv spread("KILN_CPU_AFFINITY", "spread");
  for (const char* driver : {"cpu", "interp"}) {
    SCOPED_TRACE(driver);
    hal::DeviceRef device = make_device(driver);
    ASSERT_NE(device, nullptr);
    std::vector<hal::QueueRef> queues = make_queues(device, 1);
    ASSERT_EQ(queues.size(), 1u);
    EXPECT_EQ(queue_cores(device, queues[0]), all);
    // The second queue pins the first too; the third wraps around where there are two cores.
    for (hal::QueueRef& queue : make_queues(device, 2)) queues.push_back(queue);
    ASSERT_EQ(queues.size(), 3u);
    for (size_t i = 0; i < queues.size(); ++i) {
      EXPECT_EQ(queue_cores(device, queues[i]), std::vector<int>{all[i % all.size()]}) << "queue " << i;
    }
  }
}

TEST(CpuQueueCores, ByDefaultAndWithNoneEveryQueueIsLeftToTheSystem) {
  const std::vector<int> all = thread_cores();
  for (const char* setting : {"", "none"}) {
    SCOPED_TRACE(setting);
    ScopedEnv env("KILN_CPU_AFFINITY", setting);
    if (!*setting) unsetenv("KILN_CPU_AFFINITY");
    hal::DeviceRef device = make_device("cpu");
    ASSERT_NE(device, nullptr);
    for (const hal::QueueRef& queue : make_queues(device, 3)) EXPECT_EQ(queue_cores(device, queue), all);
  }
}

TEST(CpuQueueCores, TheDeviceOptionWinsOverTheSetting) {
  const std::vector<int> all = thread_cores();
  if (all.size() < 2) GTEST_SKIP() << "this process may run on one core only";
  {
    ScopedEnv none("KILN_CPU_AFFINITY", "none");
    hal::DeviceRef device = make_device("cpu", true);
    ASSERT_NE(device, nullptr);
    std::vector<hal::QueueRef> queues = make_queues(device, 2);
    ASSERT_EQ(queues.size(), 2u);
    EXPECT_EQ(queue_cores(device, queues[0]), std::vector<int>{all[0]});
    EXPECT_EQ(queue_cores(device, queues[1]), std::vector<int>{all[1]});
  }
  {
    // Told not to spread, a device leaves KILN_CPU_AFFINITY=spread aside.
    ScopedEnv spread("KILN_CPU_AFFINITY", "spread");
    hal::DeviceRef device = make_device("interp", false);
    ASSERT_NE(device, nullptr);
    for (const hal::QueueRef& queue : make_queues(device, 2)) EXPECT_EQ(queue_cores(device, queue), all);
  }
}

TEST(CpuQueueCores, AMalformedSettingIsAnErrorNamingIt) {
  ScopedEnv bad("KILN_CPU_AFFINITY", "everywhere");
  // The driver checks its settings when it makes a device; a device made before the setting went
  // bad refuses new queues instead.
  Result<hal::DeviceRef> refused = drivers::builtin_registry().create_device("cpu", {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("KILN_CPU_AFFINITY"), std::string::npos) << refused.status().to_string();
}

TEST(CpuQueueCores, ASettingGoneBadAfterTheDeviceRefusesNewQueues) {
  hal::DeviceRef device = make_device("cpu");
  ASSERT_NE(device, nullptr);
  ScopedEnv bad("KILN_CPU_AFFINITY", "everywhere");
  Result<hal::QueueRef> queue = device->create_queue("q");
  ASSERT_FALSE(queue.ok());
  EXPECT_EQ(queue.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(queue.status().to_string().find("KILN_CPU_AFFINITY='everywhere' is not one of spread, none"),
            std::string::npos)
      << queue.status().to_string();
}

}  // namespace
}  // namespace kiln
