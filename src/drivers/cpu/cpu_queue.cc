#include "drivers/cpu/cpu_queue.h"

#include <pthread.h>
#include <sched.h>

#include <system_error>

#include <cstring>
#include <string>

#include "base/futex.h"
#include "drivers/cpu/cpu_allocator.h"
#include "drivers/cpu/host_executable.h"
#include "drivers/serial_worker.h"
#include "kiln/base/overloaded.h"
#include "kiln/base/time.h"

namespace kiln::cpu {

namespace {

void fill_pattern(uint8_t* dst, size_t length, uint32_t pattern, size_t pattern_size) {
  if (length == 0) return;
  if (pattern_size == 1) {
    std::memset(dst, static_cast<int>(pattern & 0xff), length);
    return;
  }
  // Write the pattern once, then double the filled prefix.
  std::memcpy(dst, &pattern, pattern_size);
  size_t filled = pattern_size;
  while (filled < length) {
    size_t n = std::min(filled, length - filled);
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
}

// Parks the calling thread until a dispatch it started has finished. `state`: 0 running, 1 done,
// 2 running with the waiter parked (only then does finish() make a system call).
struct Completion {
  std::atomic<uint32_t> state{0};
  Status status;
  void finish(const Status& s) {
    status = s;
    if (state.exchange(1, std::memory_order_acq_rel) == 2) futex_wake(&state, 1);
  }
  Status wait() {
    if (state.load(std::memory_order_acquire) != 1 && !spin_while_equal(&state, 0)) {
      // Only this thread sets 2; failing to set it means finish() came first.
      uint32_t expected = 0;
      if (state.compare_exchange_strong(expected, 2, std::memory_order_acq_rel)) {
        while (state.load(std::memory_order_acquire) == 2) futex_wait(&state, 2, Timeout::kInfiniteNs);
      }
    }
    return status;
  }
};

}  // namespace

CpuQueue::CpuQueue(std::string name, const void* device_tag, std::shared_ptr<ThreadPool> pool, bool on_caller)
    : Queue(std::move(name), device_tag), pool_(std::move(pool)), on_caller_(on_caller) {}

Result<std::shared_ptr<CpuQueue>> CpuQueue::create(std::string name, const void* device_tag,
                                                   std::shared_ptr<ThreadPool> pool, bool on_caller) {
  auto queue = std::make_shared<CpuQueue>(std::move(name), device_tag, std::move(pool), on_caller);
  try {
    queue->worker_ = std::thread([q = queue.get()] { q->worker_main(); });
  } catch (const std::system_error& e) {
    return resource_exhausted_error("queue '" + queue->name() + "': cannot start its thread: " + e.what());
  }
  return queue;
}

bool CpuQueue::pin_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(worker_.native_handle(), sizeof set, &set) == 0;
}

CpuQueue::~CpuQueue() {
  abort_pending();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_word_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&ready_word_, 1);
  if (worker_.joinable()) worker_.join();
}

void CpuQueue::issue(std::unique_ptr<hal::Action> action) {
  // A host call comes here only from a submitter that knows it does not block (command.h).
  if (on_caller_ && action->placement == hal::Placement::kCallerWhenReady) {
    if (std::holds_alternative<hal::HostCallCommand>(action->command)) drivers::run_host_call(*action);
    else complete(*action, run_blocking(action->command));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(std::move(action));
  }
  ready_word_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) futex_wake(&ready_word_, 1);
}

void CpuQueue::worker_main() {
  std::vector<std::unique_ptr<hal::Action>> batch;
  for (;;) {
    const uint32_t seen = ready_word_.load(std::memory_order_seq_cst);
    bool stop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      batch.swap(ready_);
      stop = stop_;
    }
    for (auto& action : batch) run(std::move(action));
    if (!batch.empty()) {
      batch.clear();
      continue;
    }
    if (stop) return;
    if (spin_while_equal(&ready_word_, seen)) continue;
    sleeping_.store(true, std::memory_order_seq_cst);
    if (ready_word_.load(std::memory_order_seq_cst) == seen) {
      futex_wait(&ready_word_, seen, Timeout::kInfiniteNs);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

void CpuQueue::run(std::unique_ptr<hal::Action> action) {
  hal::Command& command = action->command;
  if (std::holds_alternative<hal::DispatchCommand>(command)) {
    // The action lives until the last workgroup finishes, on whichever thread that is.
    std::shared_ptr<hal::Action> shared(std::move(action));
    run_dispatch(std::get<hal::DispatchCommand>(shared->command),
                 [shared](const Status& status) { complete(*shared, status); });
    return;
  }
  if (std::holds_alternative<hal::HostCallCommand>(command)) {
    drivers::run_host_call(*action);
    return;
  }
  complete(*action, run_blocking(command));
}

void CpuQueue::run_dispatch(const hal::DispatchCommand& d, DispatchJob::DoneFn done,
                            hal::DispatchContext* context) {
  const uint64_t total = uint64_t{d.workgroups[0]} * d.workgroups[1] * d.workgroups[2];
  if (total == 0) {
    done(Status());  // nothing to run; the signals still fire
    return;
  }
  // Every executable of a CPU-family device is a HostExecutable (checked by validation: the
  // executable belongs to this device).
  auto executable = std::static_pointer_cast<const HostExecutable>(d.executable);
  std::vector<void*> bindings;
  std::vector<size_t> lengths;
  bindings.reserve(d.bindings.size());
  lengths.reserve(d.bindings.size());
  for (const hal::BufferBinding& b : d.bindings) {
    bindings.push_back(host_address(*b.buffer, b.offset));
    lengths.push_back(b.length);
  }
  // A single workgroup is not worth a hand-off to the pool (nor an allocation: it ends here).
  // More are shared with the pool, this thread working on the job too instead of waiting for it
  // (spinning while the pool runs it would take a core from the pool where threads outnumber
  // cores), or run here alone where that measured faster (thread_choice.h).
  ThreadChoice::Way way = ThreadChoice::Way::kAlone;
  if (total > 1) {
    const ThreadChoice::Key key{executable.get(), d.export_ordinal, total};
    const int64_t start = now_ns();
    const ThreadChoice::Plan plan = thread_choice_->next(key, start);
    way = plan.way;
    if (plan.timed) {
      done = [choice = thread_choice_, key, way, start, done = std::move(done)](const Status& s) {
        const int64_t end = now_ns();
        choice->record(key, way, end - start, end);
        done(s);
      };
    }
  }
  if (way == ThreadChoice::Way::kAlone) {
    DispatchJob job(std::move(executable), d.export_ordinal, d.workgroups, std::move(bindings), std::move(lengths),
                    d.constants, context, std::move(done));
    job.run(0, total);
    return;
  }
  pool_->submit_and_help(std::make_shared<DispatchJob>(std::move(executable), d.export_ordinal, d.workgroups,
                                                       std::move(bindings), std::move(lengths), d.constants,
                                                       context, std::move(done)));
}

Status CpuQueue::run_blocking(const hal::Command& command, hal::DispatchContext* context) {
  return std::visit(
      Overloaded{
          [](const hal::CopyCommand& c) {
            if (c.length) {
              std::memmove(host_address(*c.target, c.target_offset),
                           host_address(*c.source, c.source_offset), c.length);
            }
            return Status();
          },
          [](const hal::FillCommand& c) {
            fill_pattern(host_address(*c.target, c.offset), c.length, c.pattern, c.pattern_size);
            return Status();
          },
          [](const hal::UpdateCommand& c) {
            if (!c.data.empty()) {
              std::memcpy(host_address(*c.target, c.offset), c.data.data(), c.data.size());
            }
            return Status();
          },
          [](const hal::ReadCommand& c) {
            if (c.length) std::memcpy(c.host, host_address(*c.source, c.offset), c.length);
            return Status();
          },
          [](const hal::WriteCommand& c) {
            if (c.length) std::memcpy(host_address(*c.target, c.offset), c.host, c.length);
            return Status();
          },
          [this, context](const hal::DispatchCommand& c) {
            Completion completion;
            run_dispatch(c, [&completion](const Status& s) { completion.finish(s); }, context);
            return completion.wait();
          },
          [](const hal::BarrierCommand&) { return Status(); },
          [this](const hal::ExecuteCommand& c) {
            for (const hal::Command& inner : c.command_buffer->commands()) {
              KILN_RETURN_IF_ERROR(run_blocking(inner, c.context.get()));
            }
            return Status();
          },
          [](const hal::HostCallCommand&) {
            return internal_error("host_call cannot run inside a command buffer");
          },
      },
      command);
}

}  // namespace kiln::cpu
