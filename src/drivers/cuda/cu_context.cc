#include "drivers/cuda/cu_context.h"

#include <functional>

#include "drivers/cuda/cu_wait_gate.h"

namespace kiln::cuda {

namespace {

// Events made up front, and per growth of the pool: a queue uses a few per action in flight.
constexpr size_t kInitialEvents = 64;
constexpr size_t kEventBatch = 32;
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
  ctx->slots_ = std::make_unique<StatusSlots>(ctx->target_);
  ctx->pending_signals_ = std::make_unique<PendingSignals>();
  ctx->wait_gate_ = std::make_unique<WaitGate>(*ctx);
  // Non-blocking: the mapping stream does not synchronize with the legacy default stream of other
  // users of the primary context.
  KILN_RETURN_IF_ERROR(call_in_context(ctx->target_, "cuStreamCreate", name, [&](const Api& a) {
    return a.StreamCreate(&ctx->map_stream_, CU_STREAM_NON_BLOCKING);
  }));
  return ctx;
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
  if (map_stream_) {
    call_in_context(target_, "cuStreamDestroy_v2", "", [&](const Api& a) { return a.StreamDestroy(map_stream_); }).ignore();
  }
  if (target_.context) api_.DevicePrimaryCtxRelease(record_.device);
}

// A copy on the mapping stream, and the wait for it.
Status CuContext::lost() const {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return lost_;
}

Status CuContext::mark_lost(const Status& fault) {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  if (lost_.ok()) {
    lost_ = Status(fault.code() == StatusCode::kOk ? StatusCode::kInternal : fault.code(),
                   record_.info.name + " is lost: " + fault.message() +
                       " (a fault on the device is sticky: nothing more runs on it in this process)");
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
