// What the queues that hand waits to the device (OpenCL, CUDA) share: finding the pending signal
// a wait can use, and the first failure of an action's handed waits, which resolve on the host.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "kiln/hal/semaphore.h"

namespace kiln::drivers {

// The signal of `list` with the smallest value at or above `value` (the earliest that satisfies
// a wait for it), or null. `Signal` has a `value`.
template <typename Signal>
const Signal* earliest_satisfying(const std::vector<Signal>& list, uint64_t value) {
  const Signal* best = nullptr;
  for (const Signal& s : list) {
    if (s.value >= value && (!best || s.value < best->value)) best = &s;
  }
  return best;
}

// The handed waits of one action, as they resolve on the host. Thread-safe.
class HandedWaitFailure {
 public:
  // A handed wait failed with `status`: the first failure fails `signals` at once, as a failed
  // wait does on the host (the device part, stopped by a gate or harmless, still finishes
  // before the action ends).
  void fail(const Status& status, const hal::SemaphoreList& signals) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_.ok()) return;
      failure_ = status;
    }
    hal::fail_semaphores(signals, status);
  }
  // What the action completes with: the first failed wait, else `device_status`.
  Status outcome(const Status& device_status) {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_.ok() ? device_status : failure_;
  }

 private:
  std::mutex mutex_;
  Status failure_;  // guarded by mutex_
};

}  // namespace kiln::drivers
