#include "base/futex.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "kiln/base/time.h"

namespace kiln {

namespace {

// std::atomic<uint32_t> is a plain 32-bit word with the same address (checked below), which is
// what the kernel compares against.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint32_t* word_address(const std::atomic<uint32_t>* word) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(word));
}

constexpr int kSpinIterations = 2000;
// Every this many steps a spinner yields its core: where threads outnumber cores, the thread it
// waits for may be runnable on this very core, and would otherwise start only when the spin
// gives up (a run + await of a tiny routine on 2 cores took 3 us or, in about half the
// processes, 35 us before). With nothing else runnable, sched_yield returns at once.
constexpr uint32_t kYieldEvery = 128;

}  // namespace

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t deadline_ns) {
  struct timespec ts;
  struct timespec* timeout = nullptr;
  if (deadline_ns != Timeout::kInfiniteNs) {
    if (deadline_ns <= now_ns()) return false;
    ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000);
    ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000);
    timeout = &ts;
  }
  // FUTEX_WAIT_BITSET takes an absolute timeout on CLOCK_MONOTONIC (FUTEX_CLOCK_REALTIME unset).
  long rc = syscall(SYS_futex, word_address(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
                    expected, timeout, nullptr, FUTEX_BITSET_MATCH_ANY);
  if (rc == -1 && errno == ETIMEDOUT) return false;
  // Woken, EAGAIN (the word already differed), EINTR: all ordinary returns.
  return true;
}

void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, word_address(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, nullptr, nullptr,
          0);
}

void spin_pause(uint32_t step) {
  if (step % kYieldEvery == 0) {
    sched_yield();
  } else {
    cpu_relax();
  }
}

bool spin_while_equal(const std::atomic<uint32_t>* word, uint32_t expected) {
  for (uint32_t i = 1; i <= kSpinIterations; ++i) {
    if (word->load(std::memory_order_acquire) != expected) return true;
    spin_pause(i);
  }
  return word->load(std::memory_order_acquire) != expected;
}

}  // namespace kiln
