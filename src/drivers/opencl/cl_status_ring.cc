#include "drivers/opencl/cl_status_ring.h"

namespace kiln::opencl {

Result<std::shared_ptr<StatusRing>> StatusRing::create(std::shared_ptr<ClContext> context,
                                                       cl_command_queue queue,
                                                       const std::string& name) {
  const Api& api = context->api();
  const size_t bytes = size_t{kStatusSlots} * kStatusWords * sizeof(uint32_t);
  cl_int err = CL_SUCCESS;
  cl_mem mem = api.CreateBuffer(context->context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (!mem || err != CL_SUCCESS) {
    return cl_error("clCreateBuffer", err, "status ring of queue '" + name + "'");
  }
  auto ring = std::make_shared<StatusRing>(std::move(context), mem);
  const uint32_t zero = 0;
  err = api.EnqueueFillBuffer(queue, mem, &zero, sizeof zero, 0, bytes, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_error("clEnqueueFillBuffer", err, "status ring");
  return ring;
}

StatusRing::~StatusRing() {
  const Api& api = context_->api();
  for (auto& slot : readers_) {
    for (cl_event e : slot) api.ReleaseEvent(e);
  }
  api.ReleaseMemObject(mem_);
}

void StatusRing::add_reader(uint32_t tag, cl_event event) {
  context_->api().RetainEvent(event);
  std::lock_guard<std::mutex> lock(mutex_);
  readers_[tag % kStatusSlots].push_back(event);
}

void StatusRing::take_readers(uint32_t tag, std::vector<cl_event>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<cl_event>& slot = readers_[tag % kStatusSlots];
  events.insert(events.end(), slot.begin(), slot.end());
  slot.clear();
}

}  // namespace kiln::opencl
