// Chains of short OpenCL actions that wait on each other through one timeline semaphore, as a
// runtime stream does, with the other core kept busy. Completion callbacks run on the OpenCL
// runtime's threads, in any order; an action must still never signal the timeline before the
// action it waited on did ("signal to 1 is not above its current value 6").
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "kiln/drivers/drivers.h"
#include "opencl_test_device.h"

namespace kiln {
namespace {

TEST(OpenCLStressTest, ChainedActionsSignalTheirTimelineInOrder) {
  hal::DeviceRef device = open_opencl();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    volatile uint64_t x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
  });
  hal::QueueRef a = *device->create_queue(), b = *device->create_queue();
  hal::BufferRef buffer = *device->allocator().allocate({}, 256);
  const uint8_t pattern = 1;
  for (int round = 0; round < 20; ++round) {
    auto timeline = device->create_semaphore(0);
    const uint64_t kActions = 100;
    Status submitted;
    for (uint64_t k = 1; k <= kActions && submitted.ok(); ++k) {
      // Alternate queues and kinds (each kind without dispatches is waited on through events).
      hal::QueueRef& q = (k % 3 == 0) ? b : a;
      hal::SemaphoreList waits;
      if (k > 1) waits.push_back({timeline, k - 1});
      if (k % 2 == 0) {
        submitted = q->fill(waits, {{timeline, k}}, buffer, (k % 8) * 16, 16, &pattern, 1);
      } else {
        submitted = q->copy(waits, {{timeline, k}}, buffer, 0, buffer, 128 + (k % 8) * 16, 16);
      }
    }
    ASSERT_TRUE(submitted.ok()) << submitted;
    Status waited = timeline->wait(kActions, Timeout::after_ms(60000));
    ASSERT_TRUE(waited.ok()) << "round " << round << ": " << waited;
  }
  stop = true;
  spinner.join();
}

}  // namespace
}  // namespace kiln
