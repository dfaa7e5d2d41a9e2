// A CPU queue: one worker thread runs the actions whose waits are met, in the order they became
// ready; dispatches spread their workgroups over the device's thread pool, or run them alone
// where that measured faster (thread_choice.h), and the thread that finishes the last workgroup
// signals. The worker parks on a futex when there is nothing to do. An action submitted with
// Placement::kCallerWhenReady whose waits are met runs on the submitting thread instead: no
// hand-off, no wake-up.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "drivers/cpu/thread_choice.h"
#include "drivers/cpu/thread_pool.h"
#include "kiln/hal/queue.h"

namespace kiln::cpu {

class CpuQueue final : public hal::Queue {
 public:
  // RESOURCE_EXHAUSTED when the system will not start the worker thread (a process or
  // address-space limit), naming the queue.
  // `on_caller`: honour Placement::kCallerWhenReady (else every action runs on the queue's threads).
  static Result<std::shared_ptr<CpuQueue>> create(std::string name, const void* device_tag,
                                                  std::shared_ptr<ThreadPool> pool, bool on_caller);
  CpuQueue(std::string name, const void* device_tag, std::shared_ptr<ThreadPool> pool,
           bool on_caller);  // create() starts it
  // Fails actions still waiting (CANCELLED), runs those already ready, then joins the worker.
  ~CpuQueue() override;

  // Keeps the worker thread on `core` from now on; false when the system refuses (a core
  // outside the process's cpuset), leaving the thread where it may run.
  bool pin_thread(int core);

 private:
  void issue(std::unique_ptr<hal::Action> action) override;
  void worker_main();
  void run(std::unique_ptr<hal::Action> action);
  // Runs a dispatch; `done` is called once, by whichever thread finishes it.
  // `context` is what the kernel receives as kiln_dispatch_state_t::context (null outside an
  // execute with one).
  void run_dispatch(const hal::DispatchCommand& dispatch, DispatchJob::DoneFn done,
                    hal::DispatchContext* context = nullptr);
  // Runs a command to completion on this thread (dispatches wait for their workgroups).
  Status run_blocking(const hal::Command& command, hal::DispatchContext* context = nullptr);

  std::shared_ptr<ThreadPool> pool_;
  // Shared with the callbacks that time dispatches, which may end after the queue.
  std::shared_ptr<ThreadChoice> thread_choice_ = std::make_shared<ThreadChoice>();
  const bool on_caller_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<hal::Action>> ready_;  // guarded by mutex_
  bool stop_ = false;                                // guarded by mutex_
  std::atomic<uint32_t> ready_word_{0};              // bumped on every issue
  std::atomic<bool> sleeping_{false};
  std::thread worker_;
};

}  // namespace kiln::cpu
