#include "drivers/opencl/cl_pending_signals.h"

#include "drivers/device_waits.h"
#include "drivers/opencl/cl_status_ring.h"

namespace kiln::opencl {

PendingSignals::~PendingSignals() {
  for (auto& [semaphore, list] : signals_) {
    for (const PendingSignal& s : list) api_.ReleaseEvent(s.event);
  }
}

void PendingSignals::add(const hal::Semaphore* semaphore, PendingSignal signal) {
  api_.RetainEvent(signal.event);
  std::lock_guard<std::mutex> lock(mutex_);
  signals_[semaphore].push_back(std::move(signal));
}

void PendingSignals::remove(const hal::Semaphore* semaphore, cl_event event) {
  std::vector<cl_event> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = signals_.find(semaphore);
    if (it == signals_.end()) return;
    std::vector<PendingSignal>& list = it->second;
    for (size_t i = 0; i < list.size();) {
      if (list[i].event == event) {
        released.push_back(list[i].event);
        list[i] = std::move(list.back());
        list.pop_back();
      } else {
        ++i;
      }
    }
    if (list.empty()) signals_.erase(it);
  }
  for (cl_event e : released) api_.ReleaseEvent(e);
}

std::optional<PendingSignal> PendingSignals::find(const hal::Semaphore* semaphore,
                                                  uint64_t value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = signals_.find(semaphore);
  if (it == signals_.end()) return std::nullopt;
  const PendingSignal* best = drivers::earliest_satisfying(it->second, value);
  if (!best) return std::nullopt;
  api_.RetainEvent(best->event);
  return *best;
}

}  // namespace kiln::opencl
