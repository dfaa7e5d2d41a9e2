#include "drivers/cuda/cu_pending_signals.h"

#include <algorithm>

#include "drivers/device_waits.h"

namespace kiln::cuda {

void PendingSignals::add(const hal::Semaphore* semaphore, PendingSignal signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  signals_[semaphore].push_back(std::move(signal));
}

void PendingSignals::remove(const hal::Semaphore* semaphore, CUevent event) {
  std::vector<PendingSignal> gone;  // released outside the lock (returning an event takes the pool's)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = signals_.find(semaphore);
    if (it == signals_.end()) return;
    auto& list = it->second;
    auto end = std::stable_partition(list.begin(), list.end(),
                                     [&](const PendingSignal& s) { return s.event.get() != event; });
    std::move(end, list.end(), std::back_inserter(gone));
    list.erase(end, list.end());
    if (list.empty()) signals_.erase(it);
  }
}

std::optional<PendingSignal> PendingSignals::find(const hal::Semaphore* semaphore, uint64_t value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = signals_.find(semaphore);
  if (it == signals_.end()) return std::nullopt;
  const PendingSignal* best = drivers::earliest_satisfying(it->second, value);
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace kiln::cuda
