#include "drivers/opencl/cl_context.h"

#include "drivers/opencl/cl_pending_signals.h"
#include "drivers/opencl/cl_wait_gate.h"

namespace kiln::opencl {

ClContext::ClContext(const Api& api, ClDeviceRecord record)
    : api_(api), record_(std::move(record)) {}

Result<std::shared_ptr<ClContext>> ClContext::create(const Api& api, ClDeviceRecord record) {
  auto ctx = std::make_shared<ClContext>(api, std::move(record));
  cl_int err = CL_SUCCESS;
  cl_device_id device = ctx->record_.device;
  ctx->context_ = api.CreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  if (!ctx->context_ || err != CL_SUCCESS) {
    ctx->context_ = nullptr;
    return cl_error("clCreateContext", err, ctx->record_.info.name);
  }
  ctx->host_queue_ = api.CreateCommandQueue(ctx->context_, device, 0, &err);
  if (!ctx->host_queue_ || err != CL_SUCCESS) {
    ctx->host_queue_ = nullptr;
    return cl_error("clCreateCommandQueue", err, ctx->record_.info.name);
  }
  ctx->pending_signals_ = std::make_unique<PendingSignals>(api);
  ctx->wait_gate_ = std::make_unique<WaitGate>(*ctx);
  return ctx;
}

ClContext::~ClContext() {
  wait_gate_.reset();
  pending_signals_.reset();
  if (host_queue_) {
    api_.Finish(host_queue_);
    api_.ReleaseCommandQueue(host_queue_);
  }
  if (context_) api_.ReleaseContext(context_);
}

}  // namespace kiln::opencl
