// Queue: where a device runs actions (a stream). Every operation takes a wait list and a signal
// list of (semaphore, value) pairs.
//
// A caller may rely on:
//  - the call validates its arguments and returns at once without blocking on device work (unless
//    the caller asked for Placement::kCallerWhenReady and the queue runs the action inline);
//    invalid arguments are INVALID_ARGUMENT (or the code named below) and nothing is submitted;
//  - nothing starts before its waits are met; signals fire after it has completed;
//  - order follows the semaphores, not the order of submission: actions with no semaphore between
//    them may run in any order or concurrently, and an action whose waits are unmet never holds
//    back a later ready one;
//  - a failed wait or a failed action fails every semaphore of its signal list with that status;
//  - the queue keeps what an action uses (buffers, executables, command buffers, semaphores)
//    alive until it completes, so the caller may drop its references right after the call.
#pragma once

#include <memory>
#include <string>

#include "kiln/hal/command_buffer.h"

namespace kiln::hal {

class DeferredQueue;  // internal (src/hal/deferred_queue.h); drivers reach it through defer()

class Queue {
 public:
  Queue(std::string name, const void* device_tag);
  virtual ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  const std::string& name() const { return name_; }
  const void* device_tag() const { return device_tag_; }

  Status copy(const SemaphoreList& waits, const SemaphoreList& signals, const BufferRef& source,
              size_t source_offset, const BufferRef& target, size_t target_offset, size_t length,
              Placement placement = Placement::kQueued);
  // Repeats a 1, 2 or 4 byte pattern over [offset, offset + length).
  Status fill(const SemaphoreList& waits, const SemaphoreList& signals, const BufferRef& target,
              size_t offset, size_t length, const void* pattern, size_t pattern_size,
              Placement placement = Placement::kQueued);
  // Copies `length` host bytes from `source` now, and writes them to the buffer when it runs.
  Status update(const SemaphoreList& waits, const SemaphoreList& signals, const void* source,
                const BufferRef& target, size_t offset, size_t length,
                Placement placement = Placement::kQueued);
  // Buffer → host memory, which must stay valid until the signals fire.
  Status read(const SemaphoreList& waits, const SemaphoreList& signals, const BufferRef& source,
              size_t offset, void* target, size_t length, Placement placement = Placement::kQueued);
  // Host memory → buffer; the host bytes are read when it runs.
  Status write(const SemaphoreList& waits, const SemaphoreList& signals, const void* source,
               const BufferRef& target, size_t offset, size_t length,
               Placement placement = Placement::kQueued);
  Status dispatch(const SemaphoreList& waits, const SemaphoreList& signals,
                  DispatchCommand dispatch, Placement placement = Placement::kQueued);
  // FAILED_PRECONDITION for a command buffer that is not finalized. `context` is what its
  // kernels receive as their runtime context (hal::DispatchContext), if anything.
  Status execute(const SemaphoreList& waits, const SemaphoreList& signals,
                 std::shared_ptr<const CommandBuffer> command_buffer,
                 std::shared_ptr<DispatchContext> context = nullptr,
                 Placement placement = Placement::kQueued);
  // kCallerWhenReady for a function that returns soon (it may defer its signals: command.h).
  Status host_call(const SemaphoreList& waits, const SemaphoreList& signals, HostCallFn fn,
                   Placement placement = Placement::kQueued);
  // A host call that queues device work: `on_stream` where the queue has a device stream of its
  // own, `fn` (as host_call) elsewhere (command.h).
  Status stream_call(const SemaphoreList& waits, const SemaphoreList& signals, HostCallFn fn,
                     StreamCallFn on_stream);
  // Signals once the waits are met; does nothing else.
  Status barrier(const SemaphoreList& waits, const SemaphoreList& signals);

  // Validates and submits any command.
  Status submit(Command command, const SemaphoreList& waits, const SemaphoreList& signals,
                Placement placement = Placement::kQueued);

  // Signals (status OK) or fails (error) an action's signal list; how drivers finish an action.
  // A signal that cannot be applied (value not above the current one) fails that semaphore.
  static void complete(const Action& action, const Status& status);
  static void complete(const SemaphoreList& signals, const Status& status);

 protected:
  // Takes a validated action. The default is defer(); a driver with native waits may override it.
  virtual void enqueue(std::unique_ptr<Action> action) { defer(std::move(action)); }
  // Holds the action in the deferred queue until its waits are met, then calls issue().
  void defer(std::unique_ptr<Action> action);
  // Runs an action whose waits are met; must eventually call complete() (once). The action's
  // placement is kCallerWhenReady only when issue() runs on the submitting thread.
  virtual void issue(std::unique_ptr<Action> action) = 0;
  // Drivers call this first in their destructor: fails pending actions with CANCELLED and waits
  // for in-flight hand-overs, so issue() is not called on a half-destroyed queue.
  void abort_pending();

 private:
  std::unique_ptr<DeferredQueue> deferred_;
  std::string name_;
  const void* device_tag_;
};

using QueueRef = std::shared_ptr<Queue>;

}  // namespace kiln::hal
