// Pool: a thread-safe free list of fixed-size objects, so that hot paths (timepoints of pending
// actions, device events) reuse memory instead of allocating per operation.
#pragma once

#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace kiln::hal {

template <typename T>
class Pool {
 public:
  explicit Pool(size_t max_cached = 1024) : max_cached_(max_cached) {}
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    for (void* p : free_) ::operator delete(p, std::align_val_t(alignof(T)));
  }

  template <typename... Args>
  T* acquire(Args&&... args) {
    void* memory = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        memory = free_.back();
        free_.pop_back();
      }
    }
    if (!memory) memory = ::operator new(sizeof(T), std::align_val_t(alignof(T)));
    return new (memory) T(std::forward<Args>(args)...);
  }

  void release(T* object) {
    object->~T();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.size() < max_cached_) {
        free_.push_back(object);
        return;
      }
    }
    ::operator delete(static_cast<void*>(object), std::align_val_t(alignof(T)));
  }

  size_t cached() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
  }

 private:
  size_t max_cached_;
  mutable std::mutex mutex_;
  std::vector<void*> free_;
};

}  // namespace kiln::hal
