// OpenCL queue semantics that depend on how waits become OpenCL events. A wait on a signal of an
// action already enqueued on the device is handed to the device (docs/opencl.md, "Waits"):
//  - a signaller's kernel that fails stops the waiting kernels (the wait gate), and the failure
//    reaches the waiting action's signals unchanged, as on the host;
//  - the host failing such a semaphore fails the waiting action's signals at once, while the
//    commands the device already ordered after the signaller may still run;
//  - signals on one timeline still arrive in order.
// Every test skips, naming why, without OpenCL.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstring>
#include <vector>

#include "common/driver_availability.h"
#include "common/wait_limit.h"
#include "drivers/opencl/cl_queue.h"
#include "kiln/drivers/drivers.h"

namespace kiln {
namespace {

using test::kWaitMs;

// Holds a queue's OpenCL command queue behind a user event: everything enqueued on it after
// hold() stays on the device, neither run nor finished, until release(). This is what keeps a
// signaller "in flight" for as long as a test needs, whatever the machine's speed or load.
class DeviceHold {
 public:
  Status hold(hal::Queue& queue) {
    auto* cl = dynamic_cast<opencl::ClQueue*>(&queue);
    if (cl == nullptr) return invalid_argument_error("not an OpenCL queue: " + queue.name());
    api_ = &cl->context().api();
    opencl::cl_int err = opencl::CL_SUCCESS;
    event_ = api_->CreateUserEvent(cl->context().context(), &err);
    if (err != opencl::CL_SUCCESS) return opencl::cl_error("clCreateUserEvent", err);
    err = api_->EnqueueMarkerWithWaitList(cl->native_queue(), 1, &event_, nullptr);
    if (err != opencl::CL_SUCCESS) return opencl::cl_error("clEnqueueMarkerWithWaitList", err);
    return Status();
  }
  void release() {
    if (event_ == nullptr) return;
    api_->SetUserEventStatus(event_, opencl::CL_COMPLETE);
    api_->ReleaseEvent(event_);
    event_ = nullptr;
  }
  ~DeviceHold() { release(); }

 private:
  const opencl::Api* api_ = nullptr;
  opencl::cl_event event_ = nullptr;
};

// Queues hand waits to the device whatever the default of the device type.
Result<hal::DeviceRef> opencl_device() {
  hal::DeviceOptions options;
  options.cache_dir = "";
  options.device_waits = true;
  return drivers::builtin_registry().create_device("opencl", options);
}

TEST(OpenCLQueueTest, MalformedDeviceWaitsSettingFailsQueueCreation) {
  Status available = test::driver_availability("opencl");
  if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  hal::DeviceOptions options;
  options.cache_dir = "";
  auto device = drivers::builtin_registry().create_device("opencl", options);
  ASSERT_TRUE(device.ok()) << device.status();
  setenv("KILN_OPENCL_DEVICE_WAITS", "2", 1);
  Result<hal::QueueRef> queue = (*device)->create_queue();
  unsetenv("KILN_OPENCL_DEVICE_WAITS");
  ASSERT_FALSE(queue.ok());
  EXPECT_EQ(queue.status().code(), StatusCode::kInvalidArgument) << queue.status();
  EXPECT_NE(queue.status().message().find("KILN_OPENCL_DEVICE_WAITS"), std::string::npos)
      << queue.status();
  EXPECT_TRUE((*device)->create_queue().ok());
}

TEST(OpenCLQueueTest, HostFailureOfAHandedWaitFailsTheSignalsAtOnce) {
  Status available = test::driver_availability("opencl");
  if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  auto device = opencl_device();
  ASSERT_TRUE(device.ok()) << device.status();
  hal::QueueRef first = *(*device)->create_queue(), second = *(*device)->create_queue();
  const size_t size = 4096;
  hal::BufferRef out = *(*device)->allocator().allocate({}, size);
  hal::BufferRef other = *(*device)->allocator().allocate({}, size);
  auto ready = (*device)->create_semaphore(0);
  const uint8_t zero = 0, ones = 0xFF, seven = 7;
  ASSERT_TRUE(second->fill({}, {{ready, 1}}, out, 0, size, &zero, 1).ok());
  ASSERT_TRUE(ready->wait(1, Timeout::after_ms(kWaitMs)).ok());

  // The held queue keeps the signalling action on the device while the host fails its semaphore.
  DeviceHold hold;
  ASSERT_TRUE(hold.hold(*first).ok());
  auto s = (*device)->create_semaphore(0), t = (*device)->create_semaphore(0);
  auto u = (*device)->create_semaphore(0);
  // Published: the fill is enqueued, so the wait below is handed to the device.
  ASSERT_TRUE(first->fill({}, {{s, 1}}, other, 0, size, &zero, 1).ok());
  ASSERT_TRUE(second->fill({{s, 1}}, {{t, 1}}, out, 0, size, &ones, 1).ok());
  s->fail(aborted_error("host gave up"));

  // The failure reaches the waiting action's signal at once, unchanged, although its fill is
  // still held behind the signaller on the device.
  Status dropped = t->wait(1, Timeout::after_ms(kWaitMs));
  EXPECT_EQ(dropped.code(), StatusCode::kAborted) << dropped;
  EXPECT_NE(dropped.message().find("host gave up"), std::string::npos) << dropped;
  hold.release();
  // Later work of both queues still runs (the dropped commands do not poison the queue).
  ASSERT_TRUE(second->fill({}, {{u, 1}}, other, 0, size, &seven, 1).ok());
  ASSERT_TRUE(u->wait(1, Timeout::after_ms(kWaitMs)).ok());
  ASSERT_TRUE(first->barrier({}, {{u, 2}}).ok());
  ASSERT_TRUE(u->wait(2, Timeout::after_ms(kWaitMs)).ok());
  // The device had ordered the fill after the signaller, and ran it then (a host wait would have
  // dropped it): this is what shows that the wait was handed to the device.
  std::vector<uint8_t> bytes(size, 0xAA);
  ASSERT_TRUE(second->read({}, {{u, 3}}, out, 0, bytes.data(), size).ok());
  ASSERT_TRUE(u->wait(3, Timeout::after_ms(kWaitMs)).ok());
  for (size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0xFF) << "byte " << i;
  EXPECT_EQ(t->query().status().code(), StatusCode::kAborted);
}

// fail_if(value): fails the dispatch with code `value` when it is not 0. fill_ones: out[i] = ~0
// for each of the binding's words (one work item).
constexpr const char* kGateKernels = R"CL(
__kernel void fail_if(KILN_STATUS_PARAMS, KILN_CONSTANT_PARAM(0)) {
  KILN_ENTRY();
  if (KILN_CONSTANT(0) != 0) KILN_FAIL(KILN_CONSTANT(0));
}
__kernel void fill_ones(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  __global uint* out = KILN_BINDING(uint, 0);
  for (ulong i = 0; i < KILN_BINDING_LENGTH(0) / 4; ++i) out[i] = 0xFFFFFFFFu;
}
)CL";

// A signaller held on the device behind a user event (DeviceHold), and an action of another
// queue that waits for it: the wait is handed to the device.
struct HandedWaitFixture {
  hal::DeviceRef device;
  hal::QueueRef first, second;
  hal::ExecutableRef kernels;
  hal::BufferRef out;
  DeviceHold hold;  // on `first`, from set_up() until the test releases it
  static constexpr size_t kSize = 4096;

  Status set_up() {
    KILN_ASSIGN_OR_RETURN(device, opencl_device());
    KILN_ASSIGN_OR_RETURN(first, device->create_queue());
    KILN_ASSIGN_OR_RETURN(second, device->create_queue());
    KILN_ASSIGN_OR_RETURN(
        kernels, device->compile_executable(
                     {"opencl-c", kGateKernels, {{"fail_if", 0, 1}, {"fill_ones", 1, 0}}, "gate.cl"}));
    KILN_ASSIGN_OR_RETURN(out, device->allocator().allocate({}, kSize));
    auto zeroed = device->create_semaphore(0);
    const uint8_t zero = 0;
    KILN_RETURN_IF_ERROR(second->fill({}, {{zeroed, 1}}, out, 0, kSize, &zero, 1));
    KILN_RETURN_IF_ERROR(zeroed->wait(1, Timeout::after_ms(kWaitMs)));
    return hold.hold(*first);
  }
  hal::DispatchCommand fail_if(uint32_t code) const {
    hal::DispatchCommand d;
    d.executable = kernels;
    d.export_ordinal = 0;
    d.constants = {code};
    return d;
  }
  hal::DispatchCommand fill_ones() const {
    hal::DispatchCommand d;
    d.executable = kernels;
    d.export_ordinal = 1;
    d.bindings = {{out, 0, kSize}};
    return d;
  }
  Result<std::vector<uint8_t>> read_out() const {
    auto done = device->create_semaphore(0);
    std::vector<uint8_t> bytes(kSize, 0xAA);
    KILN_RETURN_IF_ERROR(second->read({}, {{done, 1}}, out, 0, bytes.data(), kSize));
    KILN_RETURN_IF_ERROR(done->wait(1, Timeout::after_ms(kWaitMs)));
    return bytes;
  }
};

TEST(OpenCLQueueTest, FailedKernelStopsTheKernelsThatWaitOnTheDevice) {
  Status available = test::driver_availability("opencl");
  if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  HandedWaitFixture f;
  ASSERT_TRUE(f.set_up().ok());
  auto s = f.device->create_semaphore(0), t = f.device->create_semaphore(0);
  ASSERT_TRUE(f.first->dispatch({}, {{s, 1}}, f.fail_if(7)).ok());
  ASSERT_TRUE(f.second->dispatch({{s, 1}}, {{t, 1}}, f.fill_ones()).ok());
  f.hold.release();
  Status failed = s->wait(1, Timeout::after_ms(kWaitMs));
  ASSERT_EQ(failed.code(), StatusCode::kInternal) << failed;
  EXPECT_NE(failed.message().find("fail_if"), std::string::npos) << failed;
  // The same status, not the gate's own.
  EXPECT_EQ(t->wait(1, Timeout::after_ms(kWaitMs)), failed);
  Result<std::vector<uint8_t>> bytes = f.read_out();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  for (size_t i = 0; i < bytes->size(); ++i) ASSERT_EQ((*bytes)[i], 0) << "byte " << i;
}

TEST(OpenCLQueueTest, HandedWaitsKeepOneTimelineInOrder) {
  Status available = test::driver_availability("opencl");
  if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  HandedWaitFixture f;
  ASSERT_TRUE(f.set_up().ok());
  // One timeline across both queues: 1 on the first, 2 and 4 on the second, 3 on the first.
  auto s = f.device->create_semaphore(0);
  ASSERT_TRUE(f.first->dispatch({}, {{s, 1}}, f.fail_if(0)).ok());
  ASSERT_TRUE(f.second->dispatch({{s, 1}}, {{s, 2}}, f.fail_if(0)).ok());
  ASSERT_TRUE(f.first->dispatch({{s, 2}}, {{s, 3}}, f.fail_if(0)).ok());
  ASSERT_TRUE(f.second->dispatch({{s, 3}}, {{s, 4}}, f.fill_ones()).ok());
  EXPECT_EQ(*s->query(), 0u) << "a signal arrived while its queue was held";
  f.hold.release();
  ASSERT_TRUE(s->wait(4, Timeout::after_ms(kWaitMs)).ok()) << s->query().status();
  Result<std::vector<uint8_t>> bytes = f.read_out();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  for (size_t i = 0; i < bytes->size(); ++i) ASSERT_EQ((*bytes)[i], 0xFF) << "byte " << i;
}

}  // namespace
}  // namespace kiln
