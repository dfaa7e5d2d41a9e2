#include "drivers/cpu/thread_pool.h"

#include <algorithm>
#include <system_error>

#include <sys/syscall.h>
#include <unistd.h>

#include "base/futex.h"
#include "drivers/kernel_failure.h"
#include "kiln/base/time.h"

namespace kiln::cpu {

DispatchJob::DispatchJob(std::shared_ptr<const HostExecutable> executable, uint32_t ordinal,
                         std::array<uint32_t, 3> workgroups, std::vector<void*> bindings,
                         std::vector<size_t> binding_lengths, std::vector<uint32_t> constants,
                         hal::DispatchContext* context, DoneFn done)
    : executable_(std::move(executable)),
      ordinal_(ordinal),
      bindings_(std::move(bindings)),
      binding_lengths_(std::move(binding_lengths)),
      constants_(std::move(constants)),
      context_(context),
      total_(uint64_t{workgroups[0]} * workgroups[1] * workgroups[2]),
      done_(std::move(done)) {
  state_.abi_version = KILN_KERNEL_ABI_VERSION;
  for (int i = 0; i < 3; ++i) state_.workgroup_count[i] = workgroups[i];
  state_.binding_count = static_cast<uint32_t>(bindings_.size());
  state_.constant_count = static_cast<uint32_t>(constants_.size());
  state_.bindings = bindings_.data();
  state_.binding_lengths = binding_lengths_.data();
  state_.constants = constants_.data();
  state_.context = context ? context->abi() : nullptr;
}

DispatchJob::DispatchJob(uint64_t parts, const std::function<void(uint64_t)>* part, DoneFn done)
    : part_(part), context_(nullptr), total_(parts), done_(std::move(done)) {}

bool DispatchJob::claim(uint64_t chunk, uint64_t* begin, uint64_t* end) {
  uint64_t first = next_.fetch_add(chunk, std::memory_order_relaxed);
  if (first >= total_) return false;
  *begin = first;
  *end = std::min(total_, first + chunk);
  return true;
}

void DispatchJob::run(uint64_t begin, uint64_t end) {
  if (part_) {
    for (uint64_t i = begin; i < end; ++i) (*part_)(i);
    const uint64_t count = end - begin;
    if (finished_.fetch_add(count, std::memory_order_acq_rel) + count == total_) done_(Status());
    return;
  }
  const uint64_t cx = state_.workgroup_count[0], cy = state_.workgroup_count[1];
  for (uint64_t i = begin; i < end; ++i) {
    // After a failure the remaining workgroups are skipped but still counted as finished.
    if (failed_.load(std::memory_order_relaxed)) break;
    kiln_workgroup_id_t id;
    id.x = static_cast<uint32_t>(i % cx);
    id.y = static_cast<uint32_t>((i / cx) % cy);
    id.z = static_cast<uint32_t>(i / (cx * cy));
    int64_t value = 0;
    int rc = executable_->run_workgroup(ordinal_, &state_, &id, &value);
    if (rc != 0 && !failed_.exchange(true, std::memory_order_acq_rel)) {
      error_code_ = rc;
      error_value_ = value;
      error_workgroup_ = id;
    }
  }
  const uint64_t count = end - begin;
  if (finished_.fetch_add(count, std::memory_order_acq_rel) + count != total_) return;
  Status status;
  if (failed_.load(std::memory_order_acquire)) {
    // A failed runtime call kept a status that says more than the kernel's return code.
    if (context_) status = context_->failure();
    // A failed check says which statement read what (drivers/kernel_failure.h).
    if (status.ok()) {
      if (std::optional<Status> check = drivers::check_failure(executable_->exports()[ordinal_], error_code_, error_value_)) {
        status = *check;
      }
    }
    if (status.ok()) {
      status = internal_error("kernel '" + executable_->exports()[ordinal_].name + "' returned " +
                              std::to_string(error_code_) + " in workgroup (" + std::to_string(error_workgroup_.x) +
                              ", " + std::to_string(error_workgroup_.y) + ", " +
                              std::to_string(error_workgroup_.z) + ")");
    }
  }
  done_(status);
}

Result<std::shared_ptr<ThreadPool>> ThreadPool::create(uint32_t threads) {
  const uint32_t workers = std::max<uint32_t>(threads, 1) - 1;
  auto pool = std::make_shared<ThreadPool>();
  pool->threads_.reserve(workers);
  pool->placements_ = std::make_unique<Placement[]>(workers);
  for (uint32_t i = 0; i < workers; ++i) {
    try {
      pool->threads_.emplace_back([p = pool.get(), i] { p->worker_main(i); });
    } catch (const std::system_error& e) {
      // Returning drops the pool, whose destructor stops and joins the workers already started.
      return resource_exhausted_error("could start only " + std::to_string(i) + " of " + std::to_string(workers) +
                                      " worker threads (" + std::to_string(workers + 1) +
                                      " threads, the caller among them): " + e.what());
    }
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_word_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&work_word_, INT32_MAX);
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::submit(std::shared_ptr<DispatchJob> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  work_word_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(&work_word_, INT32_MAX);
}

void ThreadPool::worker_main(size_t index) {
  Placement& placement = placements_[index];
  if (::sched_getaffinity(0, sizeof placement.cores, &placement.cores) == 0) {
    placement.tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_release);
  }
  for (;;) {
    const uint32_t seen = work_word_.load(std::memory_order_seq_cst);
    std::shared_ptr<DispatchJob> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!jobs_.empty()) {
        job = jobs_.front();
      } else if (stop_) {
        return;
      }
    }
    if (!job) {
      if (!spin_while_equal(&work_word_, seen)) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (work_word_.load(std::memory_order_seq_cst) == seen) {
          futex_wait(&work_word_, seen, Timeout::kInfiniteNs);
        }
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      continue;
    }
    if (placement.moved.exchange(false, std::memory_order_acq_rel)) {
      ::sched_setaffinity(0, sizeof placement.cores, &placement.cores);  // its own cores again
    }
    drain(job);
  }
}

void ThreadPool::submit_and_help(const std::shared_ptr<DispatchJob>& job) {
  submit(job);
  if (threads_.empty()) {  // nobody to share with, nobody to move
    drain(job);
    return;
  }
  const int64_t start = now_ns();
  const uint64_t ran = drain(job);
  // A job of several workgroups that this thread ran alone for 200 us: its workers had no core
  // (a woken worker with a core of its own starts within microseconds).
  constexpr int64_t kLoneNs = 200000;
  if (ran == job->total() && job->total() > 1 && now_ns() - start >= kLoneNs) move_workers_off_this_core();
}

void ThreadPool::move_workers_off_this_core() {
  const int core = ::sched_getcpu();
  if (core < 0) return;
  for (size_t i = 0; i < threads_.size(); ++i) {
    Placement& placement = placements_[i];
    const pid_t tid = placement.tid.load(std::memory_order_acquire);
    if (tid == 0 || !CPU_ISSET(core, &placement.cores)) continue;
    cpu_set_t others = placement.cores;
    CPU_CLR(core, &others);
    if (CPU_COUNT(&others) == 0) continue;
    placement.moved.store(true, std::memory_order_release);
    ::sched_setaffinity(tid, sizeof others, &others);
  }
}

void ThreadPool::run_parts(uint64_t parts, const std::function<void(uint64_t)>& part) {
  if (parts <= 1) {  // nothing to share: no thread to wake
    if (parts == 1) part(0);
    return;
  }
  // The word outlives this call: the thread that runs the last part wakes it after storing.
  auto ended = std::make_shared<std::atomic<uint32_t>>(0);
  submit_and_help(std::make_shared<DispatchJob>(parts, &part, [ended](const Status&) {
    ended->store(1, std::memory_order_release);
    futex_wake(ended.get(), 1);
  }));
  while (ended->load(std::memory_order_acquire) == 0) {
    if (!spin_while_equal(ended.get(), 0)) futex_wait(ended.get(), 0, Timeout::kInfiniteNs);
  }
}

uint64_t ThreadPool::drain(const std::shared_ptr<DispatchJob>& job) {
  // Chunks of about 1/32 of a thread's share keep the shared counter cool, and small enough
  // that the last chunk finishing late costs little.
  const uint64_t chunk = std::max<uint64_t>(1, job->total() / (thread_count() * 32));
  uint64_t begin, end, ran = 0;
  while (job->claim(chunk, &begin, &end)) {
    job->run(begin, end);
    ran += end - begin;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find(jobs_.begin(), jobs_.end(), job);
  if (it != jobs_.end()) jobs_.erase(it);
  return ran;
}

}  // namespace kiln::cpu
