#include "drivers/opencl/cl_events.h"

namespace kiln::opencl {

EventBridge::~EventBridge() {
  // Normally empty: every published event is retracted by its completion callback.
  for (auto& [semaphore, entries] : published_) {
    for (const Entry& e : entries) api_.ReleaseEvent(e.event);
  }
}

void EventBridge::publish(const hal::SemaphoreList& signals, cl_event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const hal::SemaphoreValue& s : signals) {
    api_.RetainEvent(event);
    published_[s.semaphore.get()].push_back({s.value, event});
  }
}

void EventBridge::retract(const hal::SemaphoreList& signals, cl_event event) {
  std::vector<cl_event> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const hal::SemaphoreValue& s : signals) {
      auto it = published_.find(s.semaphore.get());
      if (it == published_.end()) continue;
      std::vector<Entry>& entries = it->second;
      for (size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].event == event && entries[i].value == s.value) {
          released.push_back(event);
          entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
      if (entries.empty()) published_.erase(it);
    }
  }
  for (cl_event e : released) api_.ReleaseEvent(e);
}

EventBridge::Wait EventBridge::resolve(const hal::SemaphoreValue& wait,
                                       std::vector<cl_event>* events) {
  Result<uint64_t> value = wait.semaphore->query();
  if (!value.ok()) return Wait::kHost;  // failed: the deferred queue propagates the failure
  if (*value >= wait.value) return Wait::kMet;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = published_.find(wait.semaphore.get());
    if (it != published_.end()) {
      const Entry* best = nullptr;
      for (const Entry& e : it->second) {
        if (e.value >= wait.value && (!best || e.value < best->value)) best = &e;
      }
      if (best) {
        api_.RetainEvent(best->event);
        events->push_back(best->event);
        return Wait::kEvent;
      }
    }
  }
  // Retracted between the query and the lookup means reached (or failed) by now.
  value = wait.semaphore->query();
  return value.ok() && *value >= wait.value ? Wait::kMet : Wait::kHost;
}

}  // namespace kiln::opencl
