// Monotonic clock and timeouts for every blocking wait in kiln.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln {

// Nanoseconds on the monotonic clock (CLOCK_MONOTONIC).
int64_t now_ns();

// Seconds from `start_ns` (a now_ns() value) to now.
inline double seconds_since(int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) * 1e-9; }

// When a wait gives up. Relative timeouts are turned into a deadline when the wait starts.
class Timeout {
 public:
  static constexpr int64_t kInfiniteNs = std::numeric_limits<int64_t>::max();

  // Checks once and never blocks; DEADLINE_EXCEEDED if not already satisfied.
  static Timeout immediate() { return Timeout(Kind::kDeadline, 0); }
  static Timeout infinite() { return Timeout(Kind::kDeadline, kInfiniteNs); }
  // Gives up `ns` nanoseconds after the wait starts.
  static Timeout after_ns(int64_t ns) { return Timeout(Kind::kRelative, ns < 0 ? 0 : ns); }
  static Timeout after_ms(int64_t ms) {
    if (ms <= 0) return after_ns(0);
    return after_ns(ms > kInfiniteNs / 1000000 ? kInfiniteNs : ms * 1000000);  // saturates
  }
  // Gives up when now_ns() reaches `deadline_ns`.
  static Timeout at_ns(int64_t deadline_ns) { return Timeout(Kind::kDeadline, deadline_ns); }

  // The absolute deadline in now_ns() terms; kInfiniteNs for never.
  int64_t deadline_ns() const;
  bool is_immediate() const { return kind_ == Kind::kDeadline ? ns_ <= 0 : ns_ == 0; }
  bool is_infinite() const { return kind_ == Kind::kDeadline && ns_ == kInfiniteNs; }

 private:
  enum class Kind { kRelative, kDeadline };
  Timeout(Kind kind, int64_t ns) : kind_(kind), ns_(ns) {}
  Kind kind_;
  int64_t ns_;
};

}  // namespace kiln
