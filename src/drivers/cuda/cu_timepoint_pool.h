// TimepointPool: recycled records that bridge a HAL semaphore to CUDA. Each record is a
// hal::Timepoint registered with one semaphore at one value, of one of three kinds:
//  - host wait: a callback the pool runs when the semaphore reaches the value (or fails);
//  - device signal: a pooled event recorded on a stream after work that will signal the
//    semaphore to the value; it stays registered, keeping the event, until the value is reached,
//    so that a device wait for any value up to it can use the event meanwhile;
//  - device wait: a pooled event a stream waits on (cuStreamWaitEvent) for the value; it keeps
//    the event until the value is reached on the host.
//
// A caller may rely on:
//  - the add_* calls register the record with hal::Semaphore::add_timepoint, holding a reference
//    to the semaphore until the record returns to the pool; a value already reached (or a failed
//    semaphore) fires the record inline, before add_* returns;
//  - when a record fires, the pool runs the host-wait callback (with the semaphore's failure, if
//    any), drops the record's event reference and the semaphore, and returns the record to the
//    pool: exactly once per add_*, on the thread that signals or fails the semaphore;
//  - cancel(handle) unregisters a record that has not fired and returns it to the pool, without
//    running its callback; it is false, changing nothing, when the record fired, is firing, or
//    was cancelled already. A handle stays safe to cancel after its record was reused: handles
//    carry the record's generation;
//  - records are made in batches (`initial_count` up front, `batch_size` more when none is free)
//    and never freed before the pool; after warm-up, add_*, firing and cancel allocate nothing;
//  - every member is thread-safe;
//  - shutdown() is FAILED_PRECONDITION, changing nothing, while records are registered, and after
//    it add_* is FAILED_PRECONDITION. The owner (the device) calls it before destroying the pool
//    and reports its status; the destructor of a pool with records out logs an error and asserts
//    in debug builds, since a semaphore would later call into freed memory.
//
// Not hal::Pool (src/hal/pool.h): records are made in batches, counted for shutdown(), and keep
// their generation across reuse, which cancel() depends on.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "drivers/cuda/cu_event_pool.h"
#include "kiln/hal/semaphore.h"

namespace kiln::cuda {

enum class TimepointKind : uint8_t { kHostWait, kDeviceSignal, kDeviceWait };

// A host-wait callback: `status` is OK when the value was reached, else the semaphore's failure.
// It runs outside every lock of the pool and the semaphore and may add timepoints.
using HostWaitFn = void (*)(void* user, const Status& status);

class TimepointPool;

// One pooled record. Its fields are set by the pool and stable while it is registered; readers
// outside the pool (a queue looking for a device signal's event) only read them then.
struct CuTimepoint {
  hal::Timepoint base;  // registered with `semaphore` at base.value
  TimepointKind kind = TimepointKind::kHostWait;
  std::shared_ptr<hal::Semaphore> semaphore;
  EventRef event;  // device kinds
  HostWaitFn host_fn = nullptr;
  void* host_user = nullptr;
  TimepointPool* pool = nullptr;
  uint64_t generation = 0;  // bumped, under the pool's lock, each time the record returns

  uint64_t value() const { return base.value; }
};

// What add_* returns, for cancel(): the record and the generation it had when added.
struct TimepointHandle {
  CuTimepoint* record = nullptr;
  uint64_t generation = 0;
};

class TimepointPool {
 public:
  // `batch_size` below 1 counts as 1.
  TimepointPool(size_t initial_count, size_t batch_size);
  TimepointPool(const TimepointPool&) = delete;
  TimepointPool& operator=(const TimepointPool&) = delete;
  ~TimepointPool();

  // INVALID_ARGUMENT for a null semaphore or callback, or an empty event.
  Result<TimepointHandle> add_host_wait(std::shared_ptr<hal::Semaphore> semaphore, uint64_t value,
                                        HostWaitFn fn, void* user);
  Result<TimepointHandle> add_device_signal(std::shared_ptr<hal::Semaphore> semaphore,
                                            uint64_t value, EventRef event);
  Result<TimepointHandle> add_device_wait(std::shared_ptr<hal::Semaphore> semaphore,
                                          uint64_t value, EventRef event);
  bool cancel(TimepointHandle handle);
  // See the header comment.
  Status shutdown();

  size_t capacity() const;     // records made so far
  size_t available() const;    // records in the pool
  size_t outstanding() const;  // records registered (or firing)

 private:
  Result<TimepointHandle> add(TimepointKind kind, std::shared_ptr<hal::Semaphore> semaphore,
                              uint64_t value, EventRef event, HostWaitFn fn, void* user);
  static void fired(hal::Timepoint* base, const Status& status);
  CuTimepoint* take();
  // Returns `record` to the pool with mutex_ held; its semaphore and event move to the caller,
  // which drops them after unlocking (dropping them may destroy the semaphore or take the event
  // pool's lock).
  void give_back_locked(CuTimepoint* record, std::shared_ptr<hal::Semaphore>& semaphore,
                        EventRef& event);

  const size_t batch_size_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<CuTimepoint[]>> chunks_;  // guarded by mutex_; never move
  std::vector<CuTimepoint*> free_;                      // guarded by mutex_; room for all
  size_t capacity_ = 0;                                 // guarded by mutex_
  bool shut_down_ = false;                              // guarded by mutex_
};

}  // namespace kiln::cuda
