#include "drivers/opencl/cl_context.h"

namespace kiln::opencl {

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
  return ctx;
}

ClContext::~ClContext() {
  if (host_queue_) {
    api_.Finish(host_queue_);
    api_.ReleaseCommandQueue(host_queue_);
  }
  if (context_) api_.ReleaseContext(context_);
}

}  // namespace kiln::opencl
