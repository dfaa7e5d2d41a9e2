// DeferredQueue: holds queue actions until every (semaphore, value) they wait on is reached,
// then hands each to the driver. Written once, device-independently; every driver reuses it.
//
// A caller may rely on:
//  - an action whose waits are met is handed over at once, on the submitting thread, with its
//    placement as submitted;
//  - otherwise it is handed over on the thread whose signal met its last wait, with placement
//    kQueued (a signalling thread never runs the work it releases); actions are
//    independent, so one that waits never holds back another (no head-of-line blocking);
//  - when a wait fails, the action is dropped and every semaphore of its signal list fails with
//    that same status, immediately (not when its other waits are met);
//  - abort_all() fails every pending action's signals and returns only when no hand-over is in
//    flight, so the driver may be torn down afterwards.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <condition_variable>

#include "hal/pool.h"
#include "kiln/hal/command.h"

namespace kiln::hal {

class DeferredQueue {
 public:
  using ReadyFn = std::function<void(std::unique_ptr<Action>)>;
  explicit DeferredQueue(ReadyFn ready);
  DeferredQueue(const DeferredQueue&) = delete;
  DeferredQueue& operator=(const DeferredQueue&) = delete;
  ~DeferredQueue();  // abort_all(CANCELLED)

  void submit(std::unique_ptr<Action> action);
  void abort_all(const Status& status);
  // Actions still waiting.
  size_t pending_count() const;

  struct Pending;  // one waiting action and its timepoints (deferred_queue.cc)

 private:
  friend struct PendingAccess;
  void on_wait_resolved(Pending* pending, const Status& status);
  // Removes a still-listed action from the pending list; false if already decided.
  bool take(Pending* pending);
  void unref(Pending* pending);

  ReadyFn ready_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  Pending* head_ = nullptr;  // pending list, guarded by mutex_
  size_t pending_ = 0;
  size_t releasing_ = 0;     // hand-overs in flight
  size_t live_ = 0;          // Pending objects not yet returned to the pool
  bool closed_ = false;
  std::unique_ptr<Pool<Pending>> pool_;
};

}  // namespace kiln::hal
