#include "kiln/base/time.h"

#include <time.h>

namespace kiln {

int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t Timeout::deadline_ns() const {
  if (kind_ == Kind::kDeadline) return ns_;
  // Relative: ns_ >= 0 (after_ns clamps), so only overflow past the top needs care.
  int64_t now = now_ns();
  if (ns_ >= kInfiniteNs - now) return kInfiniteNs;
  return now + ns_;
}

}  // namespace kiln
