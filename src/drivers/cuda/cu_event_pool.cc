#include "drivers/cuda/cu_event_pool.h"

#include <atomic>
#include <cassert>
#include <string>

#include "kiln/base/log.h"

namespace kiln::cuda {

// --- The driver's ops --------------------------------------------------------------------------

namespace {

// BLOCKING_SYNC: a queue's completion thread that waits on an event in cuEventSynchronize sleeps
// instead of spinning a core for as long as the work runs (it spins briefly itself first).
Status create_event(void* user, CUevent* event) {
  return call_in_context(
      *static_cast<const ContextTarget*>(user), "cuEventCreate", "event pool",
      [&](const Api& api) { return api.EventCreate(event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC); });
}

void destroy_event(void* user, CUevent event) {
  // Nothing can be done about a failure here: the event is gone from the pool either way.
  Status destroyed =
      call_in_context(*static_cast<const ContextTarget*>(user), "cuEventDestroy_v2", "event pool",
                      [&](const Api& api) { return api.EventDestroy(event); });
  // After a fault every destroy fails alike (the context is lost): say it once per process.
  static std::atomic<bool> warned{false};
  if (!destroyed.ok() && !warned.exchange(true)) {
    KILN_LOG(kWarn, destroyed.message() + " (further failures to destroy events are not reported)");
  }
}

}  // namespace

EventOps cuda_event_ops(const ContextTarget* target) {
  EventOps ops;
  ops.create = create_event;
  ops.destroy = destroy_event;
  ops.user = const_cast<ContextTarget*>(target);
  return ops;
}

// --- EventRef ----------------------------------------------------------------------------------

EventRef::EventRef(const EventRef& other) : slot_(other.slot_) {
  // Relaxed: the copier already holds a reference, so the count cannot reach zero meanwhile.
  if (slot_) slot_->references.fetch_add(1, std::memory_order_relaxed);
}

void EventRef::reset() {
  detail::EventSlot* slot = slot_;
  slot_ = nullptr;
  // Acquire-release: every holder's use of the event happens before the pool hands it out again.
  if (slot && slot->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    slot->pool->recycle(slot);
  }
}

// --- EventPool ---------------------------------------------------------------------------------

EventPool::EventPool(EventOps ops, size_t batch_size)
    : ops_(ops), batch_size_(batch_size == 0 ? 1 : batch_size) {}

Result<std::unique_ptr<EventPool>> EventPool::create(EventOps ops, size_t initial_count,
                                                     size_t batch_size) {
  if (!ops.create || !ops.destroy) return invalid_argument_error("event pool: ops without create or destroy");
  std::unique_ptr<EventPool> pool(new EventPool(ops, batch_size));
  if (initial_count > 0) {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    KILN_RETURN_IF_ERROR(pool->grow_locked(initial_count));
  }
  return pool;
}

EventPool::~EventPool() {
  Status status = shutdown();
  if (!status.ok()) {
    KILN_LOG(kError, status.message());
    assert(false && "EventPool destroyed with events still referenced");
  }
}

Status EventPool::grow_locked(size_t count) {
  auto chunk = std::make_unique<detail::EventSlot[]>(count);
  for (size_t i = 0; i < count; ++i) {
    Status made = ops_.create(ops_.user, &chunk[i].event);
    if (!made.ok()) {
      for (size_t j = 0; j < i; ++j) ops_.destroy(ops_.user, chunk[j].event);
      return made;
    }
    chunk[i].pool = this;
  }
  free_.reserve(created_ + count);
  for (size_t i = 0; i < count; ++i) free_.push_back(&chunk[i]);
  chunks_.push_back(std::move(chunk));
  created_ += count;
  return Status();
}

Result<EventRef> EventPool::acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return failed_precondition_error("event pool: acquire after shutdown");
  if (free_.empty()) KILN_RETURN_IF_ERROR(grow_locked(batch_size_));
  detail::EventSlot* slot = free_.back();
  free_.pop_back();
  slot->references.store(1, std::memory_order_relaxed);
  return EventRef(slot);
}

void EventPool::recycle(detail::EventSlot* slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(slot);  // never reallocates: reserved for every slot
}

Status EventPool::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Status();
  if (free_.size() != created_) {
    return failed_precondition_error("event pool: " + std::to_string(created_ - free_.size()) +
                                     " of " + std::to_string(created_) +
                                     " events are still referenced");
  }
  for (detail::EventSlot* slot : free_) ops_.destroy(ops_.user, slot->event);
  free_.clear();
  chunks_.clear();
  created_ = 0;
  shut_down_ = true;
  return Status();
}

size_t EventPool::created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return created_;
}

size_t EventPool::available() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

size_t EventPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return created_ - free_.size();
}

}  // namespace kiln::cuda
