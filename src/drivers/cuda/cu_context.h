// What every object of one CUDA device shares: the API table, the device's primary context
// (retained while this object lives), its event, timepoint and staging pools, the status slots
// and pending signals of its queues, the wait gate (device-side waits between its queues), and a
// stream for the synchronous copies of buffer mapping. Held by shared_ptr from the device, its buffers, queues and executables, so
// that it lives as long as any of them.
//
// CUDA's current context is per thread, and kiln calls CUDA from its callers' threads, its
// queues' threads and completion threads: every call into CUDA for this device runs inside a
// ContextScope (cu_context_scope.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "drivers/cuda/cu_context_scope.h"
#include "drivers/cuda/cu_event_pool.h"
#include "drivers/cuda/cu_host_registrations.h"
#include "drivers/cuda/cu_pending_signals.h"
#include "drivers/cuda/cu_platform.h"
#include "drivers/cuda/cu_staging_pool.h"
#include "drivers/cuda/cu_status_slots.h"
#include "drivers/cuda/cu_timepoint_pool.h"

namespace kiln::cuda {

class WaitGate;

class CuContext {
 public:
  // Retains the device's primary context, makes the event pool and the mapping stream.
  static Result<std::shared_ptr<CuContext>> create(const Api& api, CuDeviceRecord record);
  CuContext(const Api& api, CuDeviceRecord record);
  ~CuContext();
  CuContext(const CuContext&) = delete;
  CuContext& operator=(const CuContext&) = delete;

  const Api& api() const { return api_; }
  CUcontext context() const { return target_.context; }
  // What ContextScope and call_in_context push.
  const ContextTarget& target() const { return target_; }
  const CuDeviceRecord& record() const { return record_; }
  // The compute capability as NVRTC numbers it: 90 for 9.0.
  int arch() const { return record_.compute_major * 10 + record_.compute_minor; }
  EventPool& events() const { return *events_; }
  // Pinned host blocks that reads and writes go through.
  StagingPool& staging() const { return *staging_; }
  TimepointPool& timepoints() const { return *timepoints_; }
  StatusSlots& slots() const { return *slots_; }
  PendingSignals& pending_signals() const { return *pending_signals_; }
  WaitGate& wait_gate() const { return *wait_gate_; }
  // Host memory its allocator imported by registering it.
  HostRegistrations& host_registrations() const { return *host_registrations_; }

  // The device-lost state. A fault in a kernel (an illegal address, a trap, ...) is sticky: every
  // later CUDA call in the context returns it, so nothing of this context can run again in this
  // process. The first queue that sees it records it here; from then on every action in flight
  // and every later submission on any queue of the context fails with it.
  Status lost() const;
  // Records `fault` as the device-lost state unless one is recorded already; returns the one in
  // force ("cuda:0 is lost: cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700) ...").
  Status mark_lost(const Status& fault);

  // Device memory for buffers and status slots, at least `bytes` (and at least a few bytes: every
  // allocation has an address). On a device with memory pools it is allocated in stream order on
  // the context's allocation stream (cuMemAllocFromPoolAsync, then a wait for that stream alone)
  // and freed with cuMemFreeAsync, so that neither waits for the whole device as cuMemAlloc and
  // cuMemFree do (the Programming Guide's implicit synchronization). The pool is kiln's own
  // (memory_pool()), not the device's default one that other libraries in the process share; it
  // keeps up to a quarter of the device's memory between a free and the next allocation, and an
  // allocation that finds the device out of memory trims it and tries once more. Elsewhere
  // cuMemAlloc / cuMemFree. RESOURCE_EXHAUSTED naming `what` and the device when there is no room.
  Result<CUdeviceptr> allocate_device(size_t bytes, const std::string& what) const;
  // Frees what allocate_device gave, once nothing on any stream uses it (the caller knows).
  void free_device(CUdeviceptr pointer) const;
  // Frees what allocate_device gave once the work queued on `stream` so far is over, which is
  // the last to use it (cuMemFreeAsync; without memory pools as free_device, which waits).
  void free_device_after(CUdeviceptr pointer, CUstream stream) const;
  // Sets `bytes` of what allocate_device gave to zero before it returns, in stream order after the
  // allocation: on the allocation stream (the mapping stream without memory pools). Not with
  // cuMemsetD8, which runs on the legacy default stream, ordered with none of kiln's non-blocking
  // streams and, for device memory, asynchronous to the host.
  Status zero_device(CUdeviceptr pointer, size_t bytes) const;
  // Waits for every stream of the context, other libraries' included (cuCtxSynchronize): before
  // memory whose address left kiln goes back to the pool, where the next allocation may take it
  // while a consumer's queued work still reads it.
  Status synchronize_all(const std::string& why) const;

  // kiln's memory pool on this device (null without memory pools; the device's default pool
  // where a pool of kiln's own could not be made). Stream-ordered temporaries come from it too.
  CUmemoryPool memory_pool() const { return pool_; }

  // Synchronous copies for mapping: queued on the mapping stream, which they wait for. They are
  // ordered against no queue: the caller orders mapping against queue work (hal::Buffer::map).
  Status copy_to_host(void* target, CUdeviceptr source, size_t bytes) const;
  Status copy_to_device(CUdeviceptr target, const void* source, size_t bytes) const;

 private:
  Status map_copy(const char* name, const std::function<CUresult(const Api&)>& copy) const;

  const Api& api_;
  CuDeviceRecord record_;
  ContextTarget target_;  // the retained primary context (null until retained)
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<StagingPool> staging_;
  std::unique_ptr<TimepointPool> timepoints_;
  std::unique_ptr<StatusSlots> slots_;
  std::unique_ptr<PendingSignals> pending_signals_;  // holds slots and events: goes first
  std::unique_ptr<WaitGate> wait_gate_;
  std::unique_ptr<HostRegistrations> host_registrations_ = std::make_unique<HostRegistrations>();
  mutable std::mutex map_mutex_;  // one mapping copy at a time on the stream
  mutable std::mutex lost_mutex_;
  Status lost_;  // guarded by lost_mutex_
  std::atomic<bool> is_lost_{false};  // set once lost_ is: lost() takes no lock before
  CUstream map_stream_ = nullptr;
  CUstream alloc_stream_ = nullptr;  // with memory pools only
  CUmemoryPool pool_ = nullptr;      // with memory pools only
  bool own_pool_ = false;            // pool_ is kiln's (cuMemPoolCreate), destroyed with the context
  mutable std::mutex alloc_mutex_;   // one allocation at a time on the stream
};

}  // namespace kiln::cuda
