#include "hal/deferred_queue.h"

#include <cstddef>
#include <string>

namespace kiln::hal {

// One waiting action. References: one per registered timepoint, one for membership in the
// pending list (dropped by whoever decides the action's fate), one held by submit() while it
// registers timepoints.
struct DeferredQueue::Pending {
  struct Wait {
    Timepoint tp;
    Pending* owner = nullptr;
    Semaphore* semaphore = nullptr;
  };
  static constexpr size_t kInlineWaits = 4;

  DeferredQueue* queue = nullptr;
  std::unique_ptr<Action> action;
  std::atomic<int> refs{0};
  std::atomic<int> remaining{0};
  std::atomic<bool> finished{false};  // released, failed or aborted
  bool listed = false;                // guarded by queue->mutex_
  Pending* prev = nullptr;
  Pending* next = nullptr;
  size_t wait_count = 0;
  Wait inline_waits[kInlineWaits];
  std::unique_ptr<Wait[]> heap_waits;

  Wait* waits() { return heap_waits ? heap_waits.get() : inline_waits; }
};

struct PendingAccess {
  static void on_timepoint(Timepoint* tp, const Status& status) {
    auto* wait = reinterpret_cast<DeferredQueue::Pending::Wait*>(
        reinterpret_cast<char*>(tp) - offsetof(DeferredQueue::Pending::Wait, tp));
    DeferredQueue::Pending* pending = wait->owner;
    pending->queue->on_wait_resolved(pending, status);
  }
};

DeferredQueue::DeferredQueue(ReadyFn ready)
    : ready_(std::move(ready)), pool_(std::make_unique<Pool<Pending>>(256)) {}

DeferredQueue::~DeferredQueue() {
  abort_all(cancelled_error("queue destroyed while the action was waiting"));
}

size_t DeferredQueue::pending_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_;
}

void DeferredQueue::unref(Pending* pending) {
  if (pending->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    pending->action.reset();
    pending->heap_waits.reset();
    pool_->release(pending);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--live_ == 0) idle_.notify_all();
  }
}

void DeferredQueue::submit(std::unique_ptr<Action> action) {
  // The common cases need no timepoints: every wait met, or one already failed.
  bool all_met = true;
  for (const SemaphoreValue& wait : action->waits) {
    Result<uint64_t> current = wait.semaphore->query();
    if (!current.ok()) {
      fail_semaphores(action->signals, current.status());
      return;
    }
    if (*current < wait.value) all_met = false;
  }
  if (all_met) {
    ready_(std::move(action));
    return;
  }

  // Otherwise every wait gets a timepoint; those met meanwhile fire inline, which is cheap.
  const size_t n = action->waits.size();
  Pending* pending = pool_->acquire();
  pending->queue = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++live_;
  }
  pending->wait_count = n;
  if (n > Pending::kInlineWaits) pending->heap_waits.reset(new Pending::Wait[n]);
  Pending::Wait* waits = pending->waits();
  for (size_t i = 0; i < n; ++i) {
    waits[i].owner = pending;
    waits[i].semaphore = action->waits[i].semaphore.get();
    waits[i].tp = Timepoint{};
    waits[i].tp.fn = &PendingAccess::on_timepoint;
    waits[i].tp.value = action->waits[i].value;
  }
  pending->remaining.store(static_cast<int>(n), std::memory_order_relaxed);
  pending->refs.store(static_cast<int>(n) + 2, std::memory_order_relaxed);
  pending->action = std::move(action);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      // Only reachable by submitting to a queue being destroyed; fail rather than lose it.
      fail_semaphores(pending->action->signals, cancelled_error("queue is shutting down"));
      pending->action.reset();
      pending->heap_waits.reset();
      pool_->release(pending);
      --live_;
      return;
    }
    pending->listed = true;
    pending->prev = nullptr;
    pending->next = head_;
    if (head_) head_->prev = pending;
    head_ = pending;
    ++pending_;
  }
  for (size_t i = 0; i < n; ++i) {
    if (pending->finished.load(std::memory_order_acquire)) {
      unref(pending);  // decided already: this timepoint is never registered
      continue;
    }
    waits[i].semaphore->add_timepoint(&waits[i].tp);
    // A failure may have decided the action while this timepoint was not yet registered, in
    // which case nobody else will cancel it.
    if (pending->finished.load(std::memory_order_acquire) &&
        waits[i].semaphore->cancel_timepoint(&waits[i].tp)) {
      unref(pending);
    }
  }
  unref(pending);  // submit()'s own reference
}

bool DeferredQueue::take(Pending* pending) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending->listed) return false;
  pending->listed = false;
  if (pending->prev) pending->prev->next = pending->next; else head_ = pending->next;
  if (pending->next) pending->next->prev = pending->prev;
  --pending_;
  ++releasing_;
  pending->finished.store(true, std::memory_order_release);
  return true;
}

void DeferredQueue::on_wait_resolved(Pending* pending, const Status& status) {
  if (status.ok() && pending->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    unref(pending);
    return;
  }
  if (!take(pending)) {  // already failed or aborted by someone else
    unref(pending);
    return;
  }
  if (status.ok()) {
    // Not on the submitting thread any more: this thread signalled a semaphore and must not take
    // on the work of the actions it releases.
    pending->action->placement = Placement::kQueued;
    ready_(std::move(pending->action));
  } else {
    fail_semaphores(pending->action->signals, status);
    Pending::Wait* waits = pending->waits();
    for (size_t i = 0; i < pending->wait_count; ++i) {
      if (waits[i].semaphore->cancel_timepoint(&waits[i].tp)) unref(pending);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--releasing_ == 0) idle_.notify_all();
  }
  unref(pending);  // the pending list's reference
  unref(pending);  // this timepoint's reference
}

void DeferredQueue::abort_all(const Status& status) {
  Pending* stolen = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    closed_ = true;
    for (Pending* p = head_; p; p = p->next) {
      p->listed = false;
      p->finished.store(true, std::memory_order_release);
    }
    stolen = head_;
    head_ = nullptr;
    pending_ = 0;
    idle_.wait(lock, [&] { return releasing_ == 0; });
  }
  while (stolen) {
    Pending* p = stolen;
    stolen = p->next;
    Pending::Wait* waits = p->waits();
    for (size_t i = 0; i < p->wait_count; ++i) {
      if (waits[i].semaphore->cancel_timepoint(&waits[i].tp)) unref(p);
    }
    fail_semaphores(p->action->signals, status);
    unref(p);  // the pending list's reference
  }
  // Callbacks that fired concurrently may still hold references; wait them out so that nothing
  // touches this queue after it is gone.
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return live_ == 0; });
}

}  // namespace kiln::hal
