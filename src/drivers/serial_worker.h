// SerialWorker: a thread of its own that runs tasks one at a time, in the order pushed; started
// by start() or with the first task. The queues of drivers run host calls on one (never on a native runtime's
// callback thread, where blocking would be undefined), and the CUDA queue its completions.
// A worker made with a spin keeps polling for the next task that long after the last one before
// it sleeps: waking a sleeping thread costs tens of microseconds (more in a virtual machine),
// which a stream of short actions would otherwise pay for every one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/base/status.h"
#include "kiln/hal/command.h"

namespace kiln::drivers {

class SerialWorker {
 public:
  SerialWorker() = default;
  explicit SerialWorker(int64_t spin_ns) : spin_ns_(spin_ns) {}
  ~SerialWorker() { stop(); }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Starts the thread now (else the first push() does): RESOURCE_EXHAUSTED when the system will
  // not start it. A queue starts the workers it cannot do without when it is created, so that a
  // thread limit fails its creation rather than a later action.
  Status start();
  // Thread-safe; cheap enough for a callback that must not block (a lock and a notify). Where no
  // thread can be started, the task runs on the caller's thread instead of being lost.
  void push(std::function<void()> task);
  // Runs every task pushed so far, then joins the thread. Idempotent; push() after it is a bug.
  void stop();

 private:
  void main();
  // Polls for up to spin_ns_, with the mutex released, until a task is pushed after the `seen`th
  // or the time is up.
  void spin_for_task(uint64_t seen);

  const int64_t spin_ns_ = 0;
  std::atomic<uint64_t> pushed_{0};          // tasks pushed so far, polled by the spin
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
  std::thread thread_;                       // started with the first task
};

// Runs a host call's function and completes its action with the result (hal::Queue::complete),
// unless the function returned kDeferred and so took over the signals. A function that throws
// fails the action instead of taking the thread down.
void run_host_call(hal::Action& action);

}  // namespace kiln::drivers
