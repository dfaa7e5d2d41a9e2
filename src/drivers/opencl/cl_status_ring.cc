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
  for (Slot& slot : slots_) {
    for (cl_event e : slot.readers) api.ReleaseEvent(e);
  }
  api.ReleaseMemObject(mem_);
}

bool StatusRing::reserve(uint32_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[tag % kStatusSlots];
  if (slot.owner != tag) return false;
  ++slot.reserved;
  return true;
}

void StatusRing::add_reader(uint32_t tag, cl_event event) {
  context_->api().RetainEvent(event);
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[tag % kStatusSlots];
  slot.readers.push_back(event);
  --slot.reserved;
}

void StatusRing::release(uint32_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  --slots_[tag % kStatusSlots].reserved;
}

bool StatusRing::take(uint32_t tag, std::vector<cl_event>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[tag % kStatusSlots];
  if (slot.reserved > 0) return false;
  events.insert(events.end(), slot.readers.begin(), slot.readers.end());
  slot.readers.clear();
  slot.owner = tag;
  return true;
}

}  // namespace kiln::opencl
