#include "base/futex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kiln/base/time.h"

namespace kiln {
namespace {

constexpr int64_t kMs = 1000000;

TEST(FutexTest, TimesOut) {
  std::atomic<uint32_t> word{0};
  int64_t start = now_ns();
  int64_t deadline = start + 30 * kMs;
  bool result = true;
  // Spurious wake-ups are allowed; loop until the call reports the deadline.
  while (result) {
    result = futex_wait(&word, 0, deadline);
    if (result) {
      ASSERT_LT(now_ns(), deadline + 5000 * kMs) << "never timed out";
    }
  }
  EXPECT_FALSE(result);
  EXPECT_GE(now_ns(), deadline);
}

TEST(FutexTest, PastDeadlineReturnsFalseAtOnce) {
  std::atomic<uint32_t> word{0};
  EXPECT_FALSE(futex_wait(&word, 0, now_ns() - 1));
  EXPECT_FALSE(futex_wait(&word, 0, 0));
  EXPECT_FALSE(futex_wait(&word, 0, Timeout::immediate().deadline_ns()));
}

TEST(FutexTest, ValueMismatchReturnsTrue) {
  std::atomic<uint32_t> word{1};
  // A wait that blocked would reach its deadline and return false.
  EXPECT_TRUE(futex_wait(&word, 0, now_ns() + 5000 * kMs));
  EXPECT_TRUE(futex_wait(&word, 0, Timeout::kInfiniteNs));
}

TEST(FutexTest, WokenByAnotherThread) {
  std::atomic<uint32_t> word{0};
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    word.store(1, std::memory_order_release);
    futex_wake(&word, 1);
  });
  int64_t deadline = now_ns() + 10000 * kMs;
  while (word.load(std::memory_order_acquire) == 0) {
    ASSERT_TRUE(futex_wait(&word, 0, deadline)) << "timed out instead of being woken";
  }
  waker.join();
}

TEST(FutexTest, WokenWithInfiniteDeadline) {
  std::atomic<uint32_t> word{0};
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    word.store(7, std::memory_order_release);
    futex_wake(&word, INT32_MAX);
  });
  while (word.load(std::memory_order_acquire) == 0) {
    EXPECT_TRUE(futex_wait(&word, 0, Timeout::kInfiniteNs));
  }
  EXPECT_EQ(word.load(), 7u);
  waker.join();
}

TEST(FutexTest, WakeAllWakesEveryWaiter) {
  std::atomic<uint32_t> word{0};
  std::atomic<int> done{0};
  std::thread waiters[4];
  for (auto& t : waiters) {
    t = std::thread([&] {
      while (word.load(std::memory_order_acquire) == 0) {
        futex_wait(&word, 0, now_ns() + 10000 * kMs);
      }
      done.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  word.store(1, std::memory_order_release);
  futex_wake(&word, INT32_MAX);
  for (auto& t : waiters) t.join();
  EXPECT_EQ(done.load(), 4);
}

TEST(FutexTest, WakeWithNoWaitersIsHarmless) {
  std::atomic<uint32_t> word{0};
  futex_wake(&word, 1);
  futex_wake(&word, INT32_MAX);
}

TEST(FutexTest, SpinWhileEqual) {
  std::atomic<uint32_t> word{3};
  EXPECT_TRUE(spin_while_equal(&word, 2));  // already different
  int64_t start = now_ns();
  EXPECT_FALSE(spin_while_equal(&word, 3));  // never changes: bounded spin
  EXPECT_LT(now_ns() - start, 1000 * kMs);
}

TEST(FutexTest, SpinSeesChange) {
  std::atomic<uint32_t> word{0};
  std::atomic<bool> started{false};
  std::thread changer([&] {
    while (!started.load(std::memory_order_acquire)) cpu_relax();
    word.store(1, std::memory_order_release);
  });
  started.store(true, std::memory_order_release);
  // The other thread may not run within one spin budget on a busy machine; keep spinning.
  int64_t deadline = now_ns() + 10000 * kMs;
  bool changed = false;
  while (!changed && now_ns() < deadline) changed = spin_while_equal(&word, 0);
  EXPECT_TRUE(changed);
  changer.join();
}

}  // namespace
}  // namespace kiln
