// The signals of actions on the CUDA queues of one context that have not completed on the host
// yet, with the event recorded after each action's work: a later action's wait for one of them
// is handed to the device (cuStreamWaitEvent on that event) instead of waiting on the host for
// the semaphore.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "drivers/cuda/cu_event_pool.h"
#include "drivers/cuda/cu_status_slots.h"

namespace kiln::hal {
class Semaphore;
}

namespace kiln::cuda {

// An action on a stream that will signal a semaphore.
struct PendingSignal {
  uint64_t value = 0;
  EventRef event;  // recorded after the action's work: complete when it is
  // The action's status slot when it has kernels, which may fail on the device (then a waiter
  // needs the wait gate); null otherwise.
  std::shared_ptr<const StatusSlot> slot;
};

class PendingSignals {
 public:
  // Records that `signal.event` completes an action that signals `semaphore` to `signal.value`.
  void add(const hal::Semaphore* semaphore, PendingSignal signal);
  // Forgets the signals of `semaphore` completed by `event` (the action completed on the host).
  void remove(const hal::Semaphore* semaphore, CUevent event);
  // The pending signal of `semaphore` with the smallest value at or above `value` (the earliest
  // that satisfies a wait for it), as a copy holding its own references; nullopt if none.
  std::optional<PendingSignal> find(const hal::Semaphore* semaphore, uint64_t value);

 private:
  std::mutex mutex_;
  std::unordered_map<const hal::Semaphore*, std::vector<PendingSignal>> signals_;  // guarded by mutex_
};

}  // namespace kiln::cuda
