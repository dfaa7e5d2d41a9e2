#include "drivers/cuda/cu_context.h"

#include <algorithm>
#include <functional>
#include <string>

#include "drivers/cuda/cu_wait_gate.h"
#include "kiln/base/log.h"

namespace kiln::cuda {

namespace {

// Events made up front, and per growth of the pool: a queue uses a few per action in flight.
constexpr size_t kInitialEvents = 64;
constexpr size_t kEventBatch = 32;
// CUDA refuses zero-byte allocations; an empty buffer still gets a small one so that every
// buffer has an address (no command ever touches its bytes).
constexpr size_t kMinimumAllocation = 16;
// Timepoints: one per wait handed to the device, while it resolves on the host.
constexpr size_t kInitialTimepoints = 64;
constexpr size_t kTimepointBatch = 32;

}  // namespace

CuContext::CuContext(const Api& api, CuDeviceRecord record) : api_(api), record_(std::move(record)) {}

Result<std::shared_ptr<CuContext>> CuContext::create(const Api& api, CuDeviceRecord record) {
  auto ctx = std::make_shared<CuContext>(api, std::move(record));
  const std::string& name = ctx->record_.info.name;
  ctx->target_.api = &api;
  CUcontext context = nullptr;
  CUresult result = api.DevicePrimaryCtxRetain(&context, ctx->record_.device);
  if (result != CUDA_SUCCESS) return cu_error("cuDevicePrimaryCtxRetain", result, name);
  ctx->target_.context = context;
  KILN_ASSIGN_OR_RETURN(ctx->events_, EventPool::create(cuda_event_ops(&ctx->target_), kInitialEvents, kEventBatch));
  KILN_ASSIGN_OR_RETURN(ctx->staging_, StagingPool::create(cuda_staging_ops(&ctx->target_), StagingPoolOptions()));
  ctx->timepoints_ = std::make_unique<TimepointPool>(kInitialTimepoints, kTimepointBatch);
  CuContext* raw = ctx.get();  // the slots go before the context (~CuContext)
  ctx->slots_ = std::make_unique<StatusSlots>(
      ctx->target_, DeviceMemoryOps{[raw](size_t bytes) { return raw->allocate_device(bytes, "status slots"); },
                                    [raw](CUdeviceptr p) { raw->free_device(p); },
                                    [raw](CUdeviceptr p, size_t bytes) { return raw->zero_device(p, bytes); }});
  ctx->pending_signals_ = std::make_unique<PendingSignals>();
  ctx->wait_gate_ = std::make_unique<WaitGate>(*ctx);
  // Non-blocking: the mapping stream does not synchronize with the legacy default stream of other
  // users of the primary context.
  KILN_RETURN_IF_ERROR(call_in_context(ctx->target_, "cuStreamCreate", name, [&](const Api& a) {
    return a.StreamCreate(&ctx->map_stream_, CU_STREAM_NON_BLOCKING);
  }));
  if (ctx->record_.memory_pools) {
    KILN_RETURN_IF_ERROR(call_in_context(ctx->target_, "cuStreamCreate", name, [&](const Api& a) {
      return a.StreamCreate(&ctx->alloc_stream_, CU_STREAM_NON_BLOCKING);
    }));
    // A pool of kiln's own: the device's default one is every library's (PyTorch's caching
    // allocator trims it, a release threshold set on it is theirs too).
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location = {CU_MEM_LOCATION_TYPE_DEVICE, ctx->record_.device};
    Status made = call_in_context(ctx->target_, "cuMemPoolCreate", name,
                                  [&](const Api& a) { return a.MemPoolCreate(&ctx->pool_, &props); });
    ctx->own_pool_ = made.ok();
    if (!made.ok()) {
      KILN_LOG(kInfo, made.to_string() + " (kiln allocates from the device's default memory pool)");
      KILN_RETURN_IF_ERROR(call_in_context(ctx->target_, "cuDeviceGetDefaultMemPool", name, [&](const Api& a) {
        return a.DeviceGetDefaultMemPool(&ctx->pool_, ctx->record_.device);
      }));
    }
    // A pool gives freed memory back to the driver at each synchronization, so that the next
    // allocation maps it again; keep a quarter of the device's memory instead.
    uint64_t keep = ctx->record_.info.capabilities.total_memory / 4;
    Status kept = call_in_context(ctx->target_, "cuMemPoolSetAttribute", name, [&](const Api& a) {
      return a.MemPoolSetAttribute(ctx->pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    });
    if (!kept.ok()) KILN_LOG(kInfo, kept.to_string() + " (freed device memory goes back to the driver)");
  }
  return ctx;
}

Result<CUdeviceptr> CuContext::allocate_device(size_t bytes, const std::string& what) const {
  bytes = std::max<size_t>(bytes, kMinimumAllocation);
  const std::string where = "allocating " + std::to_string(bytes) + " bytes for " + what + " on " + record_.info.name;
  CUdeviceptr pointer = 0;
  if (!alloc_stream_) {
    KILN_RETURN_IF_ERROR(call_in_context(target_, "cuMemAlloc_v2", where, [&](const Api& a) {
      return a.MemAlloc(&pointer, bytes);
    }));
    return pointer;
  }
  std::lock_guard<std::mutex> lock(alloc_mutex_);
  KILN_RETURN_IF_ERROR(call_in_context(target_, "cuMemAllocFromPoolAsync", where, [&](const Api& a) {
    CUresult result = a.MemAllocFromPoolAsync(&pointer, bytes, pool_, alloc_stream_);
    if (result != CUDA_ERROR_OUT_OF_MEMORY) return result;
    // Out of memory: the pool may hold freed blocks of other sizes (kept up to the release
    // threshold). Once the frees queued before are done, give them back and try once more.
    result = a.StreamSynchronize(alloc_stream_);
    if (result == CUDA_SUCCESS) result = a.MemPoolTrimTo(pool_, 0);
    return result == CUDA_SUCCESS ? a.MemAllocFromPoolAsync(&pointer, bytes, pool_, alloc_stream_) : result;
  }));
  // Usable on every stream once the allocation has happened on its own.
  Status made = call_in_context(target_, "cuStreamSynchronize", where, [&](const Api& a) {
    return a.StreamSynchronize(alloc_stream_);
  });
  if (!made.ok()) {
    free_device(pointer);
    return made;
  }
  return pointer;
}

void CuContext::free_device(CUdeviceptr pointer) const {
  Status freed = call_in_context(target_, alloc_stream_ ? "cuMemFreeAsync" : "cuMemFree_v2", "freeing device memory",
                                 [&](const Api& a) {
                                   return alloc_stream_ ? a.MemFreeAsync(pointer, alloc_stream_) : a.MemFree(pointer);
                                 });
  if (!freed.ok() && lost().ok()) KILN_LOG(kWarn, freed.to_string());  // a lost device fails every call
}

void CuContext::free_device_after(CUdeviceptr pointer, CUstream stream) const {
  if (!alloc_stream_) return free_device(pointer);
  Status freed = call_in_context(target_, "cuMemFreeAsync", "freeing device memory",
                                 [&](const Api& a) { return a.MemFreeAsync(pointer, stream); });
  if (!freed.ok() && lost().ok()) KILN_LOG(kWarn, freed.to_string());  // a lost device fails every call
}

Status CuContext::zero_device(CUdeviceptr pointer, size_t bytes) const {
  if (!alloc_stream_) {
    return map_copy("cuMemsetD8Async", [&](const Api& a) { return a.MemsetD8Async(pointer, 0, bytes, map_stream_); });
  }
  std::lock_guard<std::mutex> lock(alloc_mutex_);
  return call_in_context(target_, "cuMemsetD8Async", "zeroing " + std::to_string(bytes) + " bytes of device memory",
                         [&](const Api& a) {
    CUresult result = a.MemsetD8Async(pointer, 0, bytes, alloc_stream_);
    return result == CUDA_SUCCESS ? a.StreamSynchronize(alloc_stream_) : result;
  });
}

Status CuContext::synchronize_all(const std::string& why) const {
  return call_in_context(target_, "cuCtxSynchronize", why, [](const Api& a) { return a.CtxSynchronize(); });
}

CuContext::~CuContext() {
  wait_gate_.reset();
  pending_signals_.reset();
  slots_.reset();
  if (timepoints_ && !timepoints_->shutdown().ok()) return;  // still registered: as for events below
  if (staging_ && !staging_->shutdown().ok()) return;  // blocks still out: as for events below
  if (events_) {
    Status closed = events_->shutdown();
    if (!closed.ok()) return;  // events still out: leave the context retained rather than break them
  }
  for (CUstream stream : {map_stream_, alloc_stream_}) {
    if (!stream) continue;
    call_in_context(target_, "cuStreamDestroy_v2", "", [&](const Api& a) { return a.StreamDestroy(stream); }).ignore();
  }
  // Its memory is freed (every holder of a buffer holds the context); CUDA releases the pool
  // once the frees still queued complete.
  if (own_pool_) {
    call_in_context(target_, "cuMemPoolDestroy", "", [&](const Api& a) { return a.MemPoolDestroy(pool_); }).ignore();
  }
  if (target_.context) api_.DevicePrimaryCtxRelease(record_.device);
}

// A copy on the mapping stream, and the wait for it.
Status CuContext::lost() const {
  if (!is_lost_.load(std::memory_order_acquire)) return Status();  // every action asks, twice
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return lost_;
}

Status CuContext::mark_lost(const Status& fault) {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  if (lost_.ok()) {
    lost_ = Status(fault.code() == StatusCode::kOk ? StatusCode::kInternal : fault.code(),
                   record_.info.name + " is lost: " + fault.message() +
                       " (a fault on the device is sticky: nothing more runs on it in this process)");
    is_lost_.store(true, std::memory_order_release);
  }
  return lost_;
}

Status CuContext::map_copy(const char* name, const std::function<CUresult(const Api&)>& copy) const {
  std::lock_guard<std::mutex> lock(map_mutex_);
  return call_in_context(target_, name, "map", [&](const Api& a) {
    CUresult result = copy(a);
    return result == CUDA_SUCCESS ? a.StreamSynchronize(map_stream_) : result;
  });
}

Status CuContext::copy_to_host(void* target, CUdeviceptr source, size_t bytes) const {
  return map_copy("cuMemcpyDtoHAsync_v2", [&](const Api& a) { return a.MemcpyDtoHAsync(target, source, bytes, map_stream_); });
}

Status CuContext::copy_to_device(CUdeviceptr target, const void* source, size_t bytes) const {
  return map_copy("cuMemcpyHtoDAsync_v2", [&](const Api& a) { return a.MemcpyHtoDAsync(target, source, bytes, map_stream_); });
}

}  // namespace kiln::cuda
