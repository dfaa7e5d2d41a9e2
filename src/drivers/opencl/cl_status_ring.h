// A queue's status ring (cl_kernel_abi.h): the device words where the kernels of each action
// record its first failure, one slot per action tag (tag % kStatusSlots), never cleared.
//
// A wait handed to the device may read the slot of an action of this queue from a gate on
// another queue (cl_wait_gate.h). Such readers are recorded per slot, and the next action to
// take the slot waits for them on the device, so a slot is never reused under a pending reader.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "drivers/opencl/cl_context.h"
#include "drivers/opencl/cl_kernel_abi.h"

namespace kiln::opencl {

class StatusRing {
 public:
  // Allocates the ring and zeroes it with a command on `queue` (tags start at 1, so zeroed slots
  // hold no failure).
  static Result<std::shared_ptr<StatusRing>> create(std::shared_ptr<ClContext> context,
                                                    cl_command_queue queue, const std::string& name);
  StatusRing(std::shared_ptr<ClContext> context, cl_mem mem)
      : context_(std::move(context)), mem_(mem), readers_(kStatusSlots) {}
  ~StatusRing();
  StatusRing(const StatusRing&) = delete;
  StatusRing& operator=(const StatusRing&) = delete;

  cl_mem mem() const { return mem_; }
  static size_t slot_offset(uint32_t tag) {
    return size_t{tag % kStatusSlots} * kStatusWords * sizeof(uint32_t);
  }
  // Records `event` (retained) as a reader of the slot of `tag`.
  void add_reader(uint32_t tag, cl_event event);
  // Appends the readers of the slot of `tag` to `events` (the caller releases them) and forgets
  // them: the action that now takes the slot waits for them.
  void take_readers(uint32_t tag, std::vector<cl_event>& events);

 private:
  std::shared_ptr<ClContext> context_;
  cl_mem mem_;
  std::mutex mutex_;
  std::vector<std::vector<cl_event>> readers_;  // per slot; guarded by mutex_
};

}  // namespace kiln::opencl
