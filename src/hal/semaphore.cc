#include "kiln/hal/semaphore.h"

#include <cstddef>
#include <string>

#include "base/futex.h"

namespace kiln::hal {

std::shared_ptr<Semaphore> Semaphore::create(uint64_t initial_value) {
  return std::shared_ptr<Semaphore>(new Semaphore(initial_value));
}

Semaphore::Semaphore(uint64_t initial_value) : value_(initial_value) {}

// Every registrant (queues, host waiters) holds a reference while its timepoint is pending, so a
// dying semaphore has none left to run.
Semaphore::~Semaphore() = default;

Result<uint64_t> Semaphore::query() const {
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }
  return value_.load(std::memory_order_acquire);
}

static void unlink(Timepoint*& head, Timepoint* tp) {
  if (tp->prev) tp->prev->next = tp->next; else head = tp->next;
  if (tp->next) tp->next->prev = tp->prev;
  tp->prev = tp->next = nullptr;
  tp->registered_with = nullptr;
}

Status Semaphore::signal(uint64_t value) {
  Timepoint* ready = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return failure_;
    uint64_t current = value_.load(std::memory_order_relaxed);
    if (value <= current) {
      return invalid_argument_error("semaphore signal to " + std::to_string(value) +
                                    " is not above its current value " +
                                    std::to_string(current));
    }
    value_.store(value, std::memory_order_release);
    for (Timepoint* tp = head_; tp;) {
      Timepoint* next = tp->next;
      if (tp->value <= value) {
        unlink(head_, tp);
        tp->next = ready;
        ready = tp;
      }
      tp = next;
    }
  }
  run_timepoints(ready, Status());
  return Status();
}

void Semaphore::fail(Status status) {
  if (status.ok()) status = internal_error("semaphore failed with an OK status");
  Timepoint* ready = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    failure_ = status;
    failed_.store(true, std::memory_order_release);
    while (head_) {
      Timepoint* tp = head_;
      unlink(head_, tp);
      tp->next = ready;
      ready = tp;
    }
  }
  run_timepoints(ready, status);
}

void Semaphore::run_timepoints(Timepoint* list, const Status& status) {
  while (list) {
    Timepoint* next = list->next;  // the callback may free the timepoint
    list->next = nullptr;
    list->fn(list, status);
    list = next;
  }
}

void Semaphore::add_timepoint(Timepoint* tp) {
  Status failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) {
      failure = failure_;
    } else if (value_.load(std::memory_order_relaxed) < tp->value) {
      tp->prev = nullptr;
      tp->next = head_;
      if (head_) head_->prev = tp;
      head_ = tp;
      tp->registered_with = this;
      return;
    }
  }
  tp->fn(tp, failure);
}

bool Semaphore::cancel_timepoint(Timepoint* tp) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tp->registered_with != this) return false;
  unlink(head_, tp);
  return true;
}

// --- Host waits -------------------------------------------------------------------------------

namespace {

// One host wait over several semaphores; each registered timepoint reports into it.
struct HostWaiter {
  std::atomic<uint32_t> word{0};  // becomes 1 when the wait is decided
  std::atomic<int> remaining{0};  // timepoints still needed (1 in ANY mode)
  std::atomic<bool> failure_claimed{false};
  Status failure;  // written by the one thread that claims it, before word is set
};

struct WaitNode {
  Timepoint tp;
  HostWaiter* waiter = nullptr;
  Semaphore* semaphore = nullptr;
  std::atomic<bool> done{false};  // the callback no longer touches this node
};

void wait_node_reached(Timepoint* tp, const Status& status) {
  auto* node = reinterpret_cast<WaitNode*>(reinterpret_cast<char*>(tp) - offsetof(WaitNode, tp));
  HostWaiter* waiter = node->waiter;
  bool decided = false;
  if (!status.ok()) {
    if (!waiter->failure_claimed.exchange(true, std::memory_order_acq_rel)) {
      waiter->failure = status;
      decided = true;
    }
  } else if (waiter->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    decided = true;
  }
  std::atomic<uint32_t>* word = &waiter->word;
  if (decided) word->store(1, std::memory_order_release);
  // After `done` the waiter may return and reuse its stack; the wake below only passes the
  // address to the kernel, which is harmless for reused (or unmapped) memory. Waking last keeps
  // the woken waiter from spinning on `done` while this thread is preempted.
  node->done.store(true, std::memory_order_release);
  if (decided) futex_wake(word, 1);
}

// How long a waiter spins before parking: long enough for a hand-off between two running
// threads, short enough not to matter when it has to sleep.
constexpr int64_t kSpinNs = 20000;

// Checks the list once. Returns OK when satisfied, the failure when one decides it, and
// DEADLINE_EXCEEDED (as "not yet") otherwise.
Status check_once(WaitMode mode, Semaphore* const* semaphores, const uint64_t* values, size_t n) {
  size_t reached = 0;
  Status failure;
  for (size_t i = 0; i < n; ++i) {
    Result<uint64_t> current = semaphores[i]->query();
    if (!current.ok()) {
      if (failure.ok()) failure = current.status();
      continue;
    }
    if (*current >= values[i]) {
      if (mode == WaitMode::kAny) return Status();
      ++reached;
    }
  }
  if (!failure.ok()) return failure;
  if (reached == n) return Status();
  return deadline_exceeded_error("");
}

Status wait_impl(WaitMode mode, Semaphore* const* semaphores, const uint64_t* values, size_t n,
                 Timeout timeout) {
  if (n == 0) return Status();
  Status status = check_once(mode, semaphores, values, n);
  if (status.code() != StatusCode::kDeadlineExceeded) return status;
  const int64_t deadline = timeout.deadline_ns();
  const auto timed_out = [&] {
    return deadline_exceeded_error("semaphore wait timed out with " + std::to_string(n) +
                                   " semaphore(s) not reached");
  };
  if (timeout.is_immediate()) return timed_out();

  const int64_t spin_end = now_ns() + kSpinNs;
  uint32_t step = 0;
  do {
    for (int i = 0; i < 64; ++i) spin_pause(++step);
    status = check_once(mode, semaphores, values, n);
    if (status.code() != StatusCode::kDeadlineExceeded) return status;
  } while (now_ns() < spin_end && now_ns() < deadline);

  HostWaiter waiter;
  constexpr size_t kInline = 8;
  WaitNode inline_nodes[kInline];
  std::unique_ptr<WaitNode[]> heap_nodes;
  WaitNode* nodes = inline_nodes;
  if (n > kInline) {
    heap_nodes.reset(new WaitNode[n]);
    nodes = heap_nodes.get();
  }
  waiter.remaining.store(mode == WaitMode::kAny ? 1 : static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    nodes[i].waiter = &waiter;
    nodes[i].semaphore = semaphores[i];
    nodes[i].tp.fn = &wait_node_reached;
    nodes[i].tp.value = values[i];
  }
  size_t registered = 0;
  for (; registered < n && waiter.word.load(std::memory_order_acquire) == 0; ++registered) {
    semaphores[registered]->add_timepoint(&nodes[registered].tp);
  }
  bool expired = false;
  while (waiter.word.load(std::memory_order_acquire) == 0) {
    if (!futex_wait(&waiter.word, 0, deadline)) {
      expired = true;
      break;
    }
  }
  // Unregister what has not fired; wait out callbacks that are running right now.
  for (size_t i = 0; i < registered; ++i) {
    if (!nodes[i].semaphore->cancel_timepoint(&nodes[i].tp)) {
      while (!nodes[i].done.load(std::memory_order_acquire)) cpu_relax();
    }
  }
  if (waiter.word.load(std::memory_order_acquire) != 0) {
    if (waiter.failure_claimed.load(std::memory_order_acquire)) return waiter.failure;
    return Status();
  }
  (void)expired;
  return timed_out();
}

}  // namespace

Status Semaphore::wait(uint64_t value, Timeout timeout) {
  Semaphore* self = this;
  return wait_impl(WaitMode::kAll, &self, &value, 1, timeout);
}

Status wait_semaphores(WaitMode mode, std::span<const SemaphoreValue> list, Timeout timeout) {
  constexpr size_t kInline = 8;
  Semaphore* inline_semaphores[kInline];
  uint64_t inline_values[kInline];
  std::vector<Semaphore*> heap_semaphores;
  std::vector<uint64_t> heap_values;
  Semaphore** semaphores = inline_semaphores;
  uint64_t* values = inline_values;
  if (list.size() > kInline) {
    heap_semaphores.resize(list.size());
    heap_values.resize(list.size());
    semaphores = heap_semaphores.data();
    values = heap_values.data();
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].semaphore) {
      return invalid_argument_error("wait list entry " + std::to_string(i) + " has no semaphore");
    }
    semaphores[i] = list[i].semaphore.get();
    values[i] = list[i].value;
  }
  return wait_impl(mode, semaphores, values, list.size(), timeout);
}

Status signal_semaphores(std::span<const SemaphoreValue> list) {
  for (const SemaphoreValue& entry : list) {
    KILN_RETURN_IF_ERROR(entry.semaphore->signal(entry.value));
  }
  return Status();
}

void fail_semaphores(std::span<const SemaphoreValue> list, const Status& status) {
  for (const SemaphoreValue& entry : list) entry.semaphore->fail(status);
}

}  // namespace kiln::hal
