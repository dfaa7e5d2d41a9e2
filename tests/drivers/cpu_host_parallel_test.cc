// hal::Device::host_parallel on the cpu device: the workgroup pool runs a library function's
// parts, the caller helping (ral::ExecutionContext::host_parallel; conv2d's products use it).
// Every part runs exactly once and the call returns only after all have, also when several
// threads ask at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kiln/drivers/drivers.h"

namespace kiln {
namespace {

hal::DeviceRef cpu_device(uint32_t threads) {
  hal::DeviceOptions options;
  options.worker_threads = threads;
  options.cache_dir = "";
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("cpu", options);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? *device : nullptr;
}

TEST(CpuHostParallelTest, EveryPartRunsOnceBeforeTheCallReturns) {
  hal::DeviceRef device = cpu_device(3);
  ASSERT_TRUE(device);
  EXPECT_EQ(device->host_threads(), 3u);  // two workers and the caller
  for (const uint64_t parts : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000}}) {
    std::vector<std::atomic<int>> runs(parts);
    device->host_parallel(parts, [&](uint64_t i) { runs[i].fetch_add(1, std::memory_order_relaxed); });
    for (uint64_t i = 0; i < parts; ++i) EXPECT_EQ(runs[i].load(), 1) << "part " << i << " of " << parts;
  }
}

// One thread is the caller alone: the pool starts no worker, and every part runs on the caller.
TEST(CpuHostParallelTest, OneThreadIsTheCaller) {
  hal::DeviceRef device = cpu_device(1);
  ASSERT_TRUE(device);
  EXPECT_EQ(device->host_threads(), 1u);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int> runs(100, 0);  // plain ints: one thread writes them
  bool elsewhere = false;
  device->host_parallel(runs.size(), [&](uint64_t i) {
    ++runs[i];
    elsewhere = elsewhere || std::this_thread::get_id() != caller;
  });
  EXPECT_FALSE(elsewhere);
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i], 1) << "part " << i;
}

TEST(CpuHostParallelTest, CallersAtOnceShareThePool) {
  hal::DeviceRef device = cpu_device(2);
  ASSERT_TRUE(device);
  constexpr int kCallers = 4, kRounds = 50;
  constexpr uint64_t kParts = 64;
  std::vector<std::atomic<int>> runs(kCallers * kParts);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < kRounds; ++round) {
        device->host_parallel(kParts, [&](uint64_t i) { runs[c * kParts + i].fetch_add(1, std::memory_order_relaxed); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), kRounds) << i;
}

}  // namespace
}  // namespace kiln
