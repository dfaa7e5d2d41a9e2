// EventOps for the CUDA pool tests, without a GPU: each create hands out a new fake handle
// (1, 2, 3, ...), each destroy checks that the handle is live; both are counted. `fail_at` makes
// the create of that number (counting from 0) fail.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>

#include "drivers/cuda/cu_event_pool.h"

namespace kiln::test {

struct CountingEvents {
  std::mutex mutex;
  uint64_t creates = 0;   // successful creates
  uint64_t destroys = 0;
  uint64_t bad_destroys = 0;  // of a handle not live (twice, or never made)
  int64_t fail_at = -1;
  uint64_t attempts = 0;
  std::set<uintptr_t> live;

  cuda::EventOps ops() {
    cuda::EventOps o;
    o.create = [](void* user, cuda::CUevent* event) -> Status {
      auto& self = *static_cast<CountingEvents*>(user);
      std::lock_guard<std::mutex> lock(self.mutex);
      if (static_cast<int64_t>(self.attempts++) == self.fail_at) {
        return internal_error("cuEventCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
      }
      uintptr_t handle = ++self.creates;
      self.live.insert(handle);
      *event = reinterpret_cast<cuda::CUevent>(handle);
      return Status();
    };
    o.destroy = [](void* user, cuda::CUevent event) {
      auto& self = *static_cast<CountingEvents*>(user);
      std::lock_guard<std::mutex> lock(self.mutex);
      if (self.live.erase(reinterpret_cast<uintptr_t>(event)) == 1) {
        ++self.destroys;
      } else {
        ++self.bad_destroys;
      }
    };
    o.user = this;
    return o;
  }

  uint64_t created() {
    std::lock_guard<std::mutex> lock(mutex);
    return creates;
  }
  uint64_t destroyed() {
    std::lock_guard<std::mutex> lock(mutex);
    return destroys;
  }
};

}  // namespace kiln::test
