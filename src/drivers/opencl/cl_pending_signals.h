// The signals of actions enqueued on the OpenCL queues of one context that have not completed
// on the host yet. A later action's wait for one of them can be handed to the device (the
// action's first command waits on the signaller's completion event) instead of waiting on the
// host for the semaphore.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "drivers/opencl/cl_api.h"

namespace kiln::hal {
class Semaphore;
}

namespace kiln::opencl {

class StatusRing;

// An enqueued action that will signal a semaphore.
struct PendingSignal {
  uint64_t value = 0;
  cl_event event = nullptr;  // the action's last command: complete when the action is
  std::shared_ptr<StatusRing> ring;  // the status ring of its queue
  uint32_t tag = 0;                  // its tag there
  bool can_fail = false;             // it has kernels, which may fail on the device
};

class PendingSignals {
 public:
  explicit PendingSignals(const Api& api) : api_(api) {}
  ~PendingSignals();
  PendingSignals(const PendingSignals&) = delete;
  PendingSignals& operator=(const PendingSignals&) = delete;

  // Records that `signal.event` completes an action that signals `semaphore` to `signal.value`;
  // retains the event until remove().
  void add(const hal::Semaphore* semaphore, PendingSignal signal);
  // Forgets the signals of `semaphore` completed by `event` (the action completed on the host).
  void remove(const hal::Semaphore* semaphore, cl_event event);
  // The pending signal of `semaphore` with the smallest value at or above `value` (the earliest
  // that satisfies a wait for it), its event retained for the caller; nullopt if there is none.
  std::optional<PendingSignal> find(const hal::Semaphore* semaphore, uint64_t value);

 private:
  const Api& api_;
  std::mutex mutex_;
  std::unordered_map<const hal::Semaphore*, std::vector<PendingSignal>> signals_;  // guarded by mutex_
};

}  // namespace kiln::opencl
