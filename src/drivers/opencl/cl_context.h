// What every object of one OpenCL device shares: the API table, the cl_context and device, a
// command queue for synchronous host mappings, the pending signals of its queues and the wait
// gate (device-side waits between its queues, docs/opencl.md). Held by
// shared_ptr from the device, its buffers, queues and executables, so that it lives as long as
// any of them.
#pragma once

#include <memory>

#include "drivers/opencl/cl_api.h"
#include "drivers/opencl/cl_platform.h"

namespace kiln::opencl {

class PendingSignals;
class WaitGate;

class ClContext {
 public:
  static Result<std::shared_ptr<ClContext>> create(const Api& api, ClDeviceRecord record);
  ~ClContext();
  ClContext(const ClContext&) = delete;
  ClContext& operator=(const ClContext&) = delete;

  const Api& api() const { return api_; }
  cl_context context() const { return context_; }
  cl_device_id device() const { return record_.device; }
  const ClDeviceRecord& record() const { return record_; }
  // In-order queue used only for blocking map/unmap of buffers.
  cl_command_queue host_queue() const { return host_queue_; }
  PendingSignals& pending_signals() const { return *pending_signals_; }
  WaitGate& wait_gate() const { return *wait_gate_; }

  ClContext(const Api& api, ClDeviceRecord record);

 private:
  const Api& api_;
  ClDeviceRecord record_;
  cl_context context_ = nullptr;
  cl_command_queue host_queue_ = nullptr;
  std::unique_ptr<PendingSignals> pending_signals_;
  std::unique_ptr<WaitGate> wait_gate_;
};

}  // namespace kiln::opencl
