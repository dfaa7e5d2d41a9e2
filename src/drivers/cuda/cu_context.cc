#include "drivers/cuda/cu_context.h"

namespace kiln::cuda {

namespace {

// Events made up front, and per growth of the pool: a queue uses a few per action in flight.
constexpr size_t kInitialEvents = 64;
constexpr size_t kEventBatch = 32;

}  // namespace

Result<std::shared_ptr<CuContext>> CuContext::create(const Api& api, CuDeviceRecord record) {
  auto ctx = std::make_shared<CuContext>(api, std::move(record));
  const std::string& name = ctx->record_.info.name;
  CUresult result = api.DevicePrimaryCtxRetain(&ctx->context_, ctx->record_.device);
  if (result != CUDA_SUCCESS) {
    ctx->context_ = nullptr;
    return cu_error("cuDevicePrimaryCtxRetain", result, name);
  }
  ctx->event_target_.api = &api;
  ctx->event_target_.context = ctx->context_;
  KILN_ASSIGN_OR_RETURN(ctx->events_, EventPool::create(cuda_event_ops(&ctx->event_target_), kInitialEvents, kEventBatch));
  ScopedContext scope(api, ctx->context_);
  KILN_RETURN_IF_ERROR(scope.status(name));
  // Non-blocking: the mapping stream does not synchronize with the legacy default stream of other
  // users of the primary context.
  result = api.StreamCreate(&ctx->map_stream_, CU_STREAM_NON_BLOCKING);
  if (result != CUDA_SUCCESS) {
    ctx->map_stream_ = nullptr;
    return cu_error("cuStreamCreate", result, name);
  }
  return ctx;
}

CuContext::~CuContext() {
  if (events_) {
    Status closed = events_->shutdown();
    if (!closed.ok()) return;  // events still out: leave the context retained rather than break them
  }
  if (map_stream_) {
    ScopedContext scope(api_, context_);
    api_.StreamDestroy(map_stream_);
  }
  if (context_) api_.DevicePrimaryCtxRelease(record_.device);
}

Status CuContext::copy_to_host(void* target, CUdeviceptr source, size_t bytes) const {
  ScopedContext scope(api_, context_);
  KILN_RETURN_IF_ERROR(scope.status("map"));
  std::lock_guard<std::mutex> lock(map_mutex_);
  CUresult result = api_.MemcpyDtoHAsync(target, source, bytes, map_stream_);
  if (result != CUDA_SUCCESS) return cu_error("cuMemcpyDtoHAsync_v2", result, "map");
  result = api_.StreamSynchronize(map_stream_);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuStreamSynchronize", result, "map");
}

Status CuContext::copy_to_device(CUdeviceptr target, const void* source, size_t bytes) const {
  ScopedContext scope(api_, context_);
  KILN_RETURN_IF_ERROR(scope.status("unmap"));
  std::lock_guard<std::mutex> lock(map_mutex_);
  CUresult result = api_.MemcpyHtoDAsync(target, source, bytes, map_stream_);
  if (result != CUDA_SUCCESS) return cu_error("cuMemcpyHtoDAsync_v2", result, "unmap");
  result = api_.StreamSynchronize(map_stream_);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuStreamSynchronize", result, "unmap");
}

}  // namespace kiln::cuda
