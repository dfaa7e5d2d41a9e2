// Futex-backed parking on a 32-bit word, with a short bounded spin before sleeping.
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln {

// Sleeps while `*word == expected`, until woken or until the monotonic `deadline_ns`
// (Timeout::kInfiniteNs for never). Returns false only if the deadline passed.
// Spurious returns are allowed; callers re-check their condition.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t deadline_ns);
// Wakes up to `count` threads sleeping on `word` (INT32_MAX: all).
void futex_wake(std::atomic<uint32_t>* word, int count);

// Step `step` (counting from 1) of a spin-wait: a CPU pause, and now and then a yield of the
// core instead, so that a thread this one waits for can run where threads outnumber cores.
void spin_pause(uint32_t step);

// Spins (with spin_pause) up to a small, fixed budget while `*word == expected`.
// Returns true if the word changed. Keeps hand-offs between busy threads off the kernel.
bool spin_while_equal(const std::atomic<uint32_t>* word, uint32_t expected);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace kiln
