#include "kiln/base/time.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(TimeTest, NowIsMonotonic) {
  int64_t a = now_ns();
  int64_t b = now_ns();
  EXPECT_GT(a, 0);
  EXPECT_LE(a, b);
}

TEST(TimeoutTest, Immediate) {
  Timeout t = Timeout::immediate();
  EXPECT_TRUE(t.is_immediate());
  EXPECT_FALSE(t.is_infinite());
  int64_t deadline = t.deadline_ns();
  EXPECT_LE(deadline, now_ns());
  // A zero or negative relative timeout is immediate too.
  EXPECT_TRUE(Timeout::after_ns(0).is_immediate());
  EXPECT_TRUE(Timeout::after_ns(-5).is_immediate());
  EXPECT_TRUE(Timeout::after_ms(-5).is_immediate());
  // (Resolve the deadline before reading the clock again: argument order is unspecified.)
  deadline = Timeout::after_ns(0).deadline_ns();
  EXPECT_LE(deadline, now_ns());
  deadline = Timeout::after_ns(-5).deadline_ns();
  EXPECT_LE(deadline, now_ns());
}

TEST(TimeoutTest, Infinite) {
  Timeout t = Timeout::infinite();
  EXPECT_TRUE(t.is_infinite());
  EXPECT_FALSE(t.is_immediate());
  EXPECT_EQ(t.deadline_ns(), Timeout::kInfiniteNs);
}

TEST(TimeoutTest, Relative) {
  int64_t before = now_ns();
  Timeout t = Timeout::after_ms(10);
  EXPECT_FALSE(t.is_immediate());
  EXPECT_FALSE(t.is_infinite());
  int64_t deadline = t.deadline_ns();
  int64_t after = now_ns();
  EXPECT_GE(deadline, before + 10000000);
  EXPECT_LE(deadline, after + 10000000);
  EXPECT_GE(Timeout::after_ns(1).deadline_ns(), before + 1);
}

TEST(TimeoutTest, RelativeSaturates) {
  EXPECT_EQ(Timeout::after_ns(Timeout::kInfiniteNs).deadline_ns(), Timeout::kInfiniteNs);
  EXPECT_EQ(Timeout::after_ns(Timeout::kInfiniteNs - 1).deadline_ns(), Timeout::kInfiniteNs);
  EXPECT_EQ(Timeout::after_ms(Timeout::kInfiniteNs / 2).deadline_ns(), Timeout::kInfiniteNs);
  EXPECT_EQ(Timeout::after_ms(Timeout::kInfiniteNs).deadline_ns(), Timeout::kInfiniteNs);
}

TEST(TimeoutTest, Absolute) {
  int64_t when = now_ns() + 123456789;
  Timeout t = Timeout::at_ns(when);
  EXPECT_EQ(t.deadline_ns(), when);
  EXPECT_FALSE(t.is_immediate());
  EXPECT_FALSE(t.is_infinite());
  EXPECT_TRUE(Timeout::at_ns(0).is_immediate());
  EXPECT_TRUE(Timeout::at_ns(-1).is_immediate());
  EXPECT_TRUE(Timeout::at_ns(Timeout::kInfiniteNs).is_infinite());
}

}  // namespace
}  // namespace kiln
