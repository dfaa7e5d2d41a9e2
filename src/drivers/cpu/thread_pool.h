// The CPU driver's workgroup scheduler: a pool of worker threads that share the workgroups of
// each dispatch, and a job that runs one kernel over its 3-D workgroup grid.
#pragma once

#include <sched.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/cpu/host_executable.h"
#include "kiln/base/status.h"
#include "kiln/hal/command.h"
#include "kiln/kernel_abi.h"

namespace kiln::cpu {

// One dispatch: the kernel, its arguments, and which workgroups are taken and finished.
class DispatchJob {
 public:
  using DoneFn = std::function<void(const Status&)>;
  DispatchJob(std::shared_ptr<const HostExecutable> executable, uint32_t ordinal,
              std::array<uint32_t, 3> workgroups,
              std::vector<void*> bindings, std::vector<size_t> binding_lengths,
              std::vector<uint32_t> constants, hal::DispatchContext* context, DoneFn done);
  // A job of `parts` calls part(0) ... part(parts - 1) (ThreadPool::run_parts), which cannot fail.
  DispatchJob(uint64_t parts, const std::function<void(uint64_t)>* part, DoneFn done);

  uint64_t total() const { return total_; }
  // Claims the next chunk of workgroups; false when none are left.
  bool claim(uint64_t chunk, uint64_t* begin, uint64_t* end);
  // Runs workgroups [begin, end); the thread that finishes the last one calls done.
  void run(uint64_t begin, uint64_t end);

 private:
  const std::function<void(uint64_t)>* part_ = nullptr;  // a host function's job: the caller's
  std::shared_ptr<const HostExecutable> executable_;
  uint32_t ordinal_;
  std::vector<void*> bindings_;
  std::vector<size_t> binding_lengths_;
  std::vector<uint32_t> constants_;
  hal::DispatchContext* context_;  // kept alive by the action that runs the dispatch
  kiln_dispatch_state_t state_{};
  uint64_t total_;
  DoneFn done_;
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> finished_{0};
  std::atomic<bool> failed_{false};
  int error_code_ = 0;  // written once, by the thread that sets failed_
  int64_t error_value_ = 0;  // a failed check's value (HostExecutable::run_workgroup)
  kiln_workgroup_id_t error_workgroup_{};
};

class ThreadPool {
 public:
  // A pool for max(threads, 1) threads at work on a job: threads - 1 workers, and the caller of
  // submit_and_help (a queue's thread, host_parallel's caller) as the last, so that a job runs
  // on as many threads as it was given cores (with a worker a thread, the caller made one more:
  // three threads on two cores ran a part of four at 2/3 of a core, the light ResNet-50 at batch 1
  // took 1.1x the time). RESOURCE_EXHAUSTED, naming how many could be started, when the system
  // refuses a thread (a process or address-space limit); those started are joined.
  static Result<std::shared_ptr<ThreadPool>> create(uint32_t threads);
  ThreadPool() = default;  // no workers yet: create() starts them
  ~ThreadPool();  // finishes queued jobs, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads that run a job: the workers and the caller that helps.
  uint32_t thread_count() const { return static_cast<uint32_t>(threads_.size()) + 1; }
  // Submits `job` and runs its workgroups on the calling thread too, until none is left to
  // start; returns then (others may still be running the last ones; the job's done callback
  // fires on whichever thread finishes last). For a thread that would otherwise wait for the
  // job: on a machine with as many busy threads as cores, a waiter that spins takes a core
  // from the workers.
  void submit_and_help(const std::shared_ptr<DispatchJob>& job);
  // Runs part(0) ... part(parts - 1) on the pool, the calling thread helping, and returns when
  // every one has run (hal::Device::host_parallel).
  void run_parts(uint64_t parts, const std::function<void(uint64_t)>& part);
  // Moves each worker off the core the calling thread runs on (its allowed cores less that one,
  // where that leaves any) until the worker next starts on a job, which gives it back the cores
  // it had. submit_and_help calls it when the caller ran a job of several workgroups alone for
  // 200 us or more: a woken worker that the system placed on the caller's busy core, while
  // another idled, waited there for the whole job (`perf sched` on 2-core VMs: a process's first
  // 1024^3 bf16 products took 2 ms instead of 1 in runs of up to 20: 3 and 9 of the first 30 on
  // average over 10 processes, in two rounds; moved so, 0.6 and 0.5).
  void move_workers_off_this_core();

 private:
  // Queues `job` for the workers and wakes those asleep; returns at once. Private: the caller
  // must help (submit_and_help), since a pool of one thread has no worker.
  void submit(std::shared_ptr<DispatchJob> job);
  void worker_main(size_t index);
  // Claims and runs chunks of `job` until none is left, then takes it off the queue; returns how
  // many workgroups this thread ran.
  uint64_t drain(const std::shared_ptr<DispatchJob>& job);
  // Where worker i may run: its thread id and its own cores (set before the id is published),
  // and whether move_workers_off_this_core narrowed them.
  struct Placement {
    std::atomic<pid_t> tid{0};
    cpu_set_t cores{};
    std::atomic<bool> moved{false};
  };
  std::mutex mutex_;
  std::deque<std::shared_ptr<DispatchJob>> jobs_;  // guarded by mutex_
  bool stop_ = false;                               // guarded by mutex_
  std::atomic<uint32_t> work_word_{0};              // bumped on every submit
  std::atomic<uint32_t> sleepers_{0};
  std::unique_ptr<Placement[]> placements_;  // one per worker, made before they start
  std::vector<std::thread> threads_;
};

}  // namespace kiln::cpu
