// What every object of one CUDA device shares: the API table, the device's primary context
// (retained while this object lives), its event pool, and a stream for the synchronous copies
// of buffer mapping. Held by shared_ptr from the device, its buffers, queues and executables, so
// that it lives as long as any of them.
//
// CUDA's current context is per thread, and kiln calls CUDA from its callers' threads, its
// queues' threads and completion threads: every call into CUDA for this device runs inside a
// ScopedContext.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>

#include "drivers/cuda/cu_event_pool.h"
#include "drivers/cuda/cu_platform.h"

namespace kiln::cuda {

// Makes a context current on the calling thread for its lifetime (cuCtxPushCurrent), and
// restores the previous one after (cuCtxPopCurrent).
class ScopedContext {
 public:
  ScopedContext(const Api& api, CUcontext context) : api_(api), pushed_(api.CtxPushCurrent(context)) {}
  ~ScopedContext() {
    CUcontext popped = nullptr;
    if (pushed_ == CUDA_SUCCESS) api_.CtxPopCurrent(&popped);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  // OK, or the push's failure naming `where`.
  Status status(std::string_view where) const {
    return pushed_ == CUDA_SUCCESS ? Status() : cu_error("cuCtxPushCurrent_v2", pushed_, where);
  }

 private:
  const Api& api_;
  CUresult pushed_;
};

class CuContext {
 public:
  // Retains the device's primary context, makes the event pool and the mapping stream.
  static Result<std::shared_ptr<CuContext>> create(const Api& api, CuDeviceRecord record);
  CuContext(const Api& api, CuDeviceRecord record) : api_(api), record_(std::move(record)) {}
  ~CuContext();
  CuContext(const CuContext&) = delete;
  CuContext& operator=(const CuContext&) = delete;

  const Api& api() const { return api_; }
  CUcontext context() const { return context_; }
  const CuDeviceRecord& record() const { return record_; }
  // The compute capability as NVRTC numbers it: 90 for 9.0.
  int arch() const { return record_.compute_major * 10 + record_.compute_minor; }
  EventPool& events() const { return *events_; }

  // Synchronous copies for mapping: queued on the mapping stream, which they wait for. They are
  // ordered against no queue: the caller orders mapping against queue work (hal::Buffer::map).
  Status copy_to_host(void* target, CUdeviceptr source, size_t bytes) const;
  Status copy_to_device(CUdeviceptr target, const void* source, size_t bytes) const;

 private:
  const Api& api_;
  CuDeviceRecord record_;
  CUcontext context_ = nullptr;
  ContextEvents event_target_;  // what the event pool's operations push
  std::unique_ptr<EventPool> events_;
  mutable std::mutex map_mutex_;  // one mapping copy at a time on the stream
  CUstream map_stream_ = nullptr;
};

}  // namespace kiln::cuda
