// Semaphore: a monotonic 64-bit timeline with a sticky first failure, the one synchronization
// primitive of the HAL.
//
// A caller may rely on:
//  - the value only grows; signal(v) with v not above the current value is INVALID_ARGUMENT;
//  - fail(status) records the first failure only; from then on query() and every wait return it
//    (also waits for values already reached), and signal() returns it;
//  - any number of host waiters, from any threads, before or after the signal;
//  - timepoints (callbacks at a value) run exactly once, outside any lock of the semaphore,
//    on the thread that signals or fails it, or inline when already satisfied.
// Drivers bridge their native events (futex, cl_event, CUevent) to a semaphore through timepoints.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/time.h"

namespace kiln::hal {

class Semaphore;

// A callback registered at a timeline value. The memory belongs to whoever registers it and must
// stay valid until the callback has run or cancel_timepoint() returned true.
struct Timepoint {
  // `status` is OK when the value was reached, else the semaphore's failure.
  using Fn = void (*)(Timepoint* self, const Status& status);
  Fn fn = nullptr;
  uint64_t value = 0;
  void* user = nullptr;
  // Intrusive list links, owned by the semaphore while registered.
  Timepoint* prev = nullptr;
  Timepoint* next = nullptr;
  const Semaphore* registered_with = nullptr;
};

struct SemaphoreValue {
  std::shared_ptr<Semaphore> semaphore;
  uint64_t value = 0;
};
using SemaphoreList = std::vector<SemaphoreValue>;

enum class WaitMode { kAll, kAny };

class Semaphore {
 public:
  static std::shared_ptr<Semaphore> create(uint64_t initial_value = 0);
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore();

  // The current value, or the failure.
  Result<uint64_t> query() const;
  // Advances the timeline and runs the timepoints now satisfied.
  Status signal(uint64_t value);
  // Fails the timeline (first failure wins) and runs every pending timepoint with the failure.
  // An OK status is turned into an INTERNAL one: failing always fails.
  void fail(Status status);
  // Blocks until the value reaches `value`, the semaphore fails, or the timeout passes
  // (DEADLINE_EXCEEDED; an immediate timeout never blocks).
  Status wait(uint64_t value, Timeout timeout);

  // Runs `tp->fn` when the value reaches `tp->value` or on failure; inline if already so.
  void add_timepoint(Timepoint* tp);
  // Unregisters a pending timepoint. True if it was removed before running; false if it has run
  // or is running (the callback then owns the rest of the hand-off).
  bool cancel_timepoint(Timepoint* tp);

 private:
  explicit Semaphore(uint64_t initial_value);
  void run_timepoints(Timepoint* list, const Status& status);

  mutable std::mutex mutex_;
  std::atomic<uint64_t> value_;
  std::atomic<bool> failed_{false};
  Status failure_;  // guarded by mutex_; set once
  Timepoint* head_ = nullptr;  // pending timepoints, guarded by mutex_
};

// Waits on several (semaphore, value) pairs: all of them, or any one. A failure of a semaphore
// that is still awaited ends the wait with that failure. An empty list is satisfied at once.
Status wait_semaphores(WaitMode mode, std::span<const SemaphoreValue> list, Timeout timeout);

// Signals each pair; stops at and returns the first error.
Status signal_semaphores(std::span<const SemaphoreValue> list);
// Fails each semaphore of the list with `status`.
void fail_semaphores(std::span<const SemaphoreValue> list, const Status& status);

}  // namespace kiln::hal
