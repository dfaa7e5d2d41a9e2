// OpenCL queue semantics that depend on how waits become OpenCL events: a wait on a signal that
// is already enqueued on the device (a published event) must still drop the waiting action when
// the host fails the semaphore first (docs/hal.md), without holding back other work of the
// queue. Every test skips, naming why, without OpenCL.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kiln/drivers/drivers.h"

namespace kiln {
namespace {

constexpr int64_t kWaitMs = 60000;

Status opencl_availability() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find("opencl");
  if (!driver.ok()) return driver.status();
  return (*driver)->availability();
}

TEST(OpenCLQueueTest, FailedWaitOnAnEnqueuedSignalDropsTheAction) {
  Status available = opencl_availability();
  if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  hal::DeviceOptions options;
  options.cache_dir = "";
  auto device = drivers::builtin_registry().create_device("opencl", options);
  ASSERT_TRUE(device.ok()) << device.status();
  hal::QueueRef first = *(*device)->create_queue(), second = *(*device)->create_queue();
  // A long fill keeps the signalling action in flight while the host fails its semaphore.
  const size_t slow_size = size_t{256} << 20, size = 4096;
  hal::BufferRef slow = *(*device)->allocator().allocate({}, slow_size);
  hal::BufferRef out = *(*device)->allocator().allocate({}, size);
  hal::BufferRef other = *(*device)->allocator().allocate({}, size);
  auto ready = (*device)->create_semaphore(0);
  const uint8_t zero = 0, ones = 0xFF, seven = 7;
  ASSERT_TRUE(second->fill({}, {{ready, 1}}, out, 0, size, &zero, 1).ok());
  ASSERT_TRUE(ready->wait(1, Timeout::after_ms(kWaitMs)).ok());

  auto started = (*device)->create_semaphore(0), s = (*device)->create_semaphore(0);
  auto t = (*device)->create_semaphore(0), u = (*device)->create_semaphore(0);
  const uint32_t pattern = 0x01020304;
  ASSERT_TRUE(first->fill({}, {{started, 1}}, slow, 0, slow_size, &pattern, 4).ok());
  // Published: the fill is enqueued, so the wait below becomes a device wait.
  ASSERT_TRUE(first->fill({}, {{s, 1}}, other, 0, size, &zero, 1).ok());
  ASSERT_TRUE(second->fill({{s, 1}}, {{t, 1}}, out, 0, size, &ones, 1).ok());
  ASSERT_EQ(*started->query(), 0u) << "the 256 MiB fill finished before the failure";
  s->fail(aborted_error("host gave up"));

  // The failure reaches the waiting action's signal at once, unchanged.
  Status dropped = t->wait(1, Timeout::after_ms(kWaitMs));
  EXPECT_EQ(dropped.code(), StatusCode::kAborted) << dropped;
  EXPECT_NE(dropped.message().find("host gave up"), std::string::npos) << dropped;
  // Later work of both queues still runs (the dropped commands do not poison the queue).
  ASSERT_TRUE(second->fill({}, {{u, 1}}, other, 0, size, &seven, 1).ok());
  ASSERT_TRUE(u->wait(1, Timeout::after_ms(kWaitMs)).ok());
  ASSERT_TRUE(first->barrier({}, {{u, 2}}).ok());
  ASSERT_TRUE(u->wait(2, Timeout::after_ms(kWaitMs)).ok());
  ASSERT_TRUE(started->wait(1, Timeout::after_ms(kWaitMs)).ok());
  // The dropped fill wrote nothing: read back on the in-order queue it was submitted to.
  std::vector<uint8_t> bytes(size, 0xAA);
  ASSERT_TRUE(second->read({}, {{u, 3}}, out, 0, bytes.data(), size).ok());
  ASSERT_TRUE(u->wait(3, Timeout::after_ms(kWaitMs)).ok());
  for (size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  EXPECT_EQ(t->query().status().code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace kiln
