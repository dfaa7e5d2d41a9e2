#include "drivers/cuda/cu_timepoint_pool.h"

#include <cassert>
#include <string>
#include <utility>

#include "kiln/base/log.h"

namespace kiln::cuda {

TimepointPool::TimepointPool(size_t initial_count, size_t batch_size)
    : batch_size_(batch_size == 0 ? 1 : batch_size) {
  if (initial_count == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto chunk = std::make_unique<CuTimepoint[]>(initial_count);
  free_.reserve(initial_count);
  for (size_t i = 0; i < initial_count; ++i) free_.push_back(&chunk[i]);
  chunks_.push_back(std::move(chunk));
  capacity_ = initial_count;
}

TimepointPool::~TimepointPool() {
  Status status = shutdown();
  if (!status.ok()) {
    KILN_LOG(kError, status.message());
    assert(false && "TimepointPool destroyed with timepoints still registered");
  }
}

CuTimepoint* TimepointPool::take() {
  // mutex_ held by the caller.
  if (free_.empty()) {
    auto chunk = std::make_unique<CuTimepoint[]>(batch_size_);
    free_.reserve(capacity_ + batch_size_);
    for (size_t i = 0; i < batch_size_; ++i) free_.push_back(&chunk[i]);
    chunks_.push_back(std::move(chunk));
    capacity_ += batch_size_;
  }
  CuTimepoint* record = free_.back();
  free_.pop_back();
  return record;
}

void TimepointPool::give_back_locked(CuTimepoint* record, std::shared_ptr<hal::Semaphore>& semaphore,
                                     EventRef& event) {
  semaphore = std::move(record->semaphore);
  event = std::move(record->event);
  record->host_fn = nullptr;
  record->host_user = nullptr;
  ++record->generation;  // stale handles no longer match
  free_.push_back(record);  // never reallocates: reserved for every record
}

Result<TimepointHandle> TimepointPool::add(TimepointKind kind,
                                           std::shared_ptr<hal::Semaphore> semaphore,
                                           uint64_t value, EventRef event, HostWaitFn fn,
                                           void* user) {
  if (!semaphore) return invalid_argument_error("timepoint pool: null semaphore");
  CuTimepoint* record = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return failed_precondition_error("timepoint pool: add after shutdown");
    record = take();
  }
  // The record is ours alone until add_timepoint publishes it.
  record->kind = kind;
  record->semaphore = semaphore;  // the semaphore lives while the record is registered
  record->event = std::move(event);
  record->host_fn = fn;
  record->host_user = user;
  record->pool = this;
  record->base.fn = &TimepointPool::fired;
  record->base.value = value;
  record->base.user = record;
  TimepointHandle handle;
  handle.record = record;
  handle.generation = record->generation;
  // May fire inline and return the record before this returns; `semaphore` (our own reference)
  // keeps the semaphore alive through the call even then.
  semaphore->add_timepoint(&record->base);
  return handle;
}

Result<TimepointHandle> TimepointPool::add_host_wait(std::shared_ptr<hal::Semaphore> semaphore,
                                                     uint64_t value, HostWaitFn fn, void* user) {
  if (!fn) return invalid_argument_error("timepoint pool: host wait without a callback");
  return add(TimepointKind::kHostWait, std::move(semaphore), value, EventRef(), fn, user);
}

Result<TimepointHandle> TimepointPool::add_device_signal(std::shared_ptr<hal::Semaphore> semaphore,
                                                         uint64_t value, EventRef event) {
  if (!event) return invalid_argument_error("timepoint pool: device signal without an event");
  return add(TimepointKind::kDeviceSignal, std::move(semaphore), value, std::move(event), nullptr,
             nullptr);
}

Result<TimepointHandle> TimepointPool::add_device_wait(std::shared_ptr<hal::Semaphore> semaphore,
                                                       uint64_t value, EventRef event) {
  if (!event) return invalid_argument_error("timepoint pool: device wait without an event");
  return add(TimepointKind::kDeviceWait, std::move(semaphore), value, std::move(event), nullptr,
             nullptr);
}

void TimepointPool::fired(hal::Timepoint* base, const Status& status) {
  auto* record = static_cast<CuTimepoint*>(base->user);
  if (record->kind == TimepointKind::kHostWait) record->host_fn(record->host_user, status);
  // Device kinds only held their event until the value was reached: a stream that waits on it
  // was already told to; a later wait for the value needs nothing from the device.
  TimepointPool* pool = record->pool;
  std::shared_ptr<hal::Semaphore> semaphore;
  EventRef event;
  {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    pool->give_back_locked(record, semaphore, event);
  }
}

bool TimepointPool::cancel(TimepointHandle handle) {
  if (!handle.record) return false;
  std::shared_ptr<hal::Semaphore> semaphore;
  EventRef event;
  {
    // Held across the check and the unregistration: a record cannot fire, return and be reused
    // (on the same semaphore, by another caller) between them, because returning takes the lock.
    std::lock_guard<std::mutex> lock(mutex_);
    CuTimepoint* record = handle.record;
    if (record->generation != handle.generation) return false;
    if (!record->semaphore->cancel_timepoint(&record->base)) return false;  // fired or firing
    give_back_locked(record, semaphore, event);
  }
  return true;
}

Status TimepointPool::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() != capacity_) {
    return failed_precondition_error("timepoint pool: " + std::to_string(capacity_ - free_.size()) +
                                     " timepoints are still registered with semaphores");
  }
  shut_down_ = true;
  return Status();
}

size_t TimepointPool::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_;
}

size_t TimepointPool::available() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

size_t TimepointPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_ - free_.size();
}

}  // namespace kiln::cuda
