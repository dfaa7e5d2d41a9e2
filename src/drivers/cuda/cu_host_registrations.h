// Host memory registered with CUDA (cuMemHostRegister), counted. CUDA refuses to register a page
// twice, but kiln may import the same memory into several buffers (two views of one array, a
// buffer and its slice): an import inside a range already registered shares that registration,
// and the range is unregistered when its last buffer goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "drivers/cuda/cu_api.h"

namespace kiln::cuda {

class HostRegistrations {
 public:
  // The device address of [host, host + size) when a registered range holds all of it, which
  // then has one more user; nullopt otherwise.
  std::optional<CUdeviceptr> share(const void* host, size_t size);
  // Records a range just registered, mapped at `device`, with one user.
  void add(const void* host, size_t size, CUdeviceptr device);
  // One user of the range that holds `host` is gone: the range's start when it was the last (the
  // caller unregisters it), else null.
  void* release(const void* host);

 private:
  struct Range {
    size_t size = 0;
    CUdeviceptr device = 0;
    size_t users = 0;
  };
  // The range holding [host, host + size), or end().
  std::map<uintptr_t, Range>::iterator find(uintptr_t host, size_t size);

  std::mutex mutex_;
  std::map<uintptr_t, Range> ranges_;  // by start
};

}  // namespace kiln::cuda
