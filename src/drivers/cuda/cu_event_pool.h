// EventPool: CUDA events made once and reused, so that recording a signal or a wait on a stream
// never creates or destroys an event on the hot path (cuEventCreate and cuEventDestroy take
// driver locks and can synchronize).
//
// A caller may rely on:
//  - every event is made by EventOps::create (the production ops: cuEventCreate with
//    CU_EVENT_DISABLE_TIMING, which makes record, query and wait the cheapest) and destroyed by
//    EventOps::destroy only in shutdown() or the destructor, never on release;
//  - create() makes `initial_count` events up front; acquire() on an empty pool makes
//    `batch_size` more at once, all or none (a failed batch destroys what it made and returns
//    the error); after warm-up, acquire and release allocate nothing;
//  - an EventRef is a counted reference: copies share the event, and the last one to go
//    returns it to the pool. The event may still be pending on a stream when it returns; it is
//    only ever re-recorded, which CUDA allows;
//  - every member is thread-safe, and EventRefs may be copied and dropped on any thread;
//  - shutdown() is FAILED_PRECONDITION, changing nothing, while any EventRef is alive; once it
//    succeeds, every event is destroyed and acquire() is FAILED_PRECONDITION. The pool must
//    outlive its EventRefs: the destructor shuts down, and with events still out it logs an
//    error, asserts in debug builds, and leaves those events to their holders (undefined
//    behaviour once they are dropped), because destroying an event a stream still uses is worse.
//
// Not hal::Pool (src/hal/pool.h): that one ends an object's life on release and allocates one
// object at a time, while a pooled event must stay made while it waits in the pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/cu_context_scope.h"

namespace kiln::cuda {

// How the pool makes and destroys events: function pointers and their argument, so that tests
// count calls without a GPU. `create` returns a status naming the failed call.
struct EventOps {
  Status (*create)(void* user, CUevent* event) = nullptr;
  void (*destroy)(void* user, CUevent event) = nullptr;
  void* user = nullptr;
};

// The ops the driver uses: cuEventCreate(CU_EVENT_DISABLE_TIMING) and cuEventDestroy with
// `target->context` pushed as the calling thread's current context for the call. `target` must
// outlive every pool using the ops.
EventOps cuda_event_ops(const ContextTarget* target);

class EventPool;

namespace detail {
struct EventSlot {
  CUevent event = nullptr;
  std::atomic<uint32_t> references{0};
  EventPool* pool = nullptr;
};
}  // namespace detail

// A counted reference to a pooled event (empty when default-constructed or moved from).
class EventRef {
 public:
  EventRef() = default;
  EventRef(const EventRef& other);
  EventRef(EventRef&& other) noexcept : slot_(other.slot_) { other.slot_ = nullptr; }
  EventRef& operator=(EventRef other) noexcept {
    std::swap(slot_, other.slot_);
    return *this;
  }
  ~EventRef() { reset(); }

  CUevent get() const { return slot_ ? slot_->event : nullptr; }
  explicit operator bool() const { return slot_ != nullptr; }
  // Drops this reference; the last one returns the event to its pool.
  void reset();

 private:
  friend class EventPool;
  explicit EventRef(detail::EventSlot* slot) : slot_(slot) {}
  detail::EventSlot* slot_ = nullptr;
};

class EventPool {
 public:
  // Makes `initial_count` events now (the error of the first that fails, after destroying the
  // others); `batch_size` (at least 1) is how many an empty pool makes at once.
  static Result<std::unique_ptr<EventPool>> create(EventOps ops, size_t initial_count,
                                                   size_t batch_size);
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool();

  // An event from the pool, growing it by a batch when empty.
  Result<EventRef> acquire();
  // See the header comment.
  Status shutdown();

  size_t created() const;      // events made so far (and not destroyed by shutdown)
  size_t available() const;    // events in the pool, not referenced
  size_t outstanding() const;  // events referenced by EventRefs

 private:
  friend class EventRef;
  EventPool(EventOps ops, size_t batch_size);
  Status grow_locked(size_t count);  // mutex_ held
  void recycle(detail::EventSlot* slot);

  const EventOps ops_;
  const size_t batch_size_;
  mutable std::mutex mutex_;
  // Slots live in chunks that never move; free_ has room for every slot, so release never
  // allocates.
  std::vector<std::unique_ptr<detail::EventSlot[]>> chunks_;  // guarded by mutex_
  std::vector<detail::EventSlot*> free_;                      // guarded by mutex_
  size_t created_ = 0;                                        // guarded by mutex_
  bool shut_down_ = false;                                    // guarded by mutex_
};

}  // namespace kiln::cuda
