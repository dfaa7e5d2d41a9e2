// Host signal → host waiter wake-up, against a bare std::condition_variable hand-off.
//
// Both benchmarks ping-pong between two threads: each iteration is one round trip (two
// hand-offs), so the ratio of their times is the ratio of one hand-off.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bench_common.h"
#include "kiln/base/time.h"
#include "kiln/hal/semaphore.h"

namespace kiln::bench {
namespace {

void BM_CondvarPingPong(benchmark::State& state) {
  std::mutex mutex;
  std::condition_variable ping_cv, pong_cv;
  uint64_t ping = 0, pong = 0;
  bool stop = false;
  std::thread partner([&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (uint64_t seen = 0;;) {
      ping_cv.wait(lock, [&] { return ping > seen || stop; });
      if (stop) return;
      seen = ping;
      pong = seen;
      pong_cv.notify_one();
    }
  });
  for (auto _ : state) {
    std::unique_lock<std::mutex> lock(mutex);
    uint64_t n = ++ping;
    ping_cv.notify_one();
    pong_cv.wait(lock, [&] { return pong >= n; });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  ping_cv.notify_one();
  partner.join();
}
BENCHMARK(BM_CondvarPingPong)->UseRealTime();

void BM_SemaphorePingPong(benchmark::State& state) {
  auto ping = hal::Semaphore::create(0), pong = hal::Semaphore::create(0);
  std::thread partner([&] {
    for (uint64_t n = 1;; ++n) {
      if (!ping->wait(n, Timeout::infinite()).ok()) return;  // failed: benchmark is over
      check(pong->signal(n), "pong signal");
    }
  });
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    check(ping->signal(n), "ping signal");
    check(pong->wait(n, Timeout::infinite()), "pong wait");
  }
  ping->fail(cancelled_error("benchmark finished"));
  partner.join();
}
BENCHMARK(BM_SemaphorePingPong)->UseRealTime();

// Wake-up latency of a waiter that is already asleep (past any spinning): the signalling thread
// naps 200 µs first, then stamps the time and signals; the iteration time is stamp → wake.
void BM_CondvarWakeParked(benchmark::State& state) {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t value = 0;
  std::atomic<int64_t> stamp{0};
  for (auto _ : state) {
    uint64_t target = value + 1;
    std::thread signaller([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mutex);
      stamp.store(now_ns());
      value = target;
      cv.notify_one();
    });
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return value >= target; });
    }
    state.SetIterationTime(double(now_ns() - stamp.load()) / 1e9);
    signaller.join();
  }
}
BENCHMARK(BM_CondvarWakeParked)->UseManualTime()->Iterations(2000);

void BM_SemaphoreWakeParked(benchmark::State& state) {
  auto semaphore = hal::Semaphore::create(0);
  uint64_t value = 0;
  std::atomic<int64_t> stamp{0};
  for (auto _ : state) {
    uint64_t target = ++value;
    std::thread signaller([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      stamp.store(now_ns());
      check(semaphore->signal(target), "signal");
    });
    check(semaphore->wait(target, Timeout::infinite()), "wait");
    state.SetIterationTime(double(now_ns() - stamp.load()) / 1e9);
    signaller.join();
  }
}
BENCHMARK(BM_SemaphoreWakeParked)->UseManualTime()->Iterations(2000);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
