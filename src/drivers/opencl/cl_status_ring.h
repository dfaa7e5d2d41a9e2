// A queue's status ring (cl_kernel_abi.h): the device words where the kernels of each action
// record its first failure, one slot per action tag (tag % kStatusSlots), never cleared.
//
// A wait handed to the device may read the slot of an action of this queue from a gate on
// another queue (cl_wait_gate.h). Such a reader first reserves the slot (which fails once a later
// action has taken it), then records the gate's event; an action does not take a slot that is
// reserved (its queue skips to the next tag), and waits on the device for the recorded readers
// of the slot it takes. So a slot is never reused under a pending reader, and nothing blocks.
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
      : context_(std::move(context)), mem_(mem), slots_(kStatusSlots) {}
  ~StatusRing();
  StatusRing(const StatusRing&) = delete;
  StatusRing& operator=(const StatusRing&) = delete;

  cl_mem mem() const { return mem_; }
  static size_t slot_offset(uint32_t tag) {
    return size_t{tag % kStatusSlots} * kStatusWords * sizeof(uint32_t);
  }
  // Reserves the slot of `tag` for a reader; false when a later tag has taken the slot.
  bool reserve(uint32_t tag);
  // Ends a reservation: with the reader's event (retained), or without (no reader after all).
  void add_reader(uint32_t tag, cl_event event);
  void release(uint32_t tag);
  // Takes the slot of `tag` for a new action, appending the slot's readers to `events` (the
  // caller releases them); false, taking nothing, while the slot is reserved.
  bool take(uint32_t tag, std::vector<cl_event>& events);

 private:
  std::shared_ptr<ClContext> context_;
  cl_mem mem_;
  std::mutex mutex_;
  struct Slot {
    uint32_t owner = 0;              // the tag that took it last
    uint32_t reserved = 0;           // readers between reserve() and add_reader() / release()
    std::vector<cl_event> readers;   // gates that read it for `owner`
  };
  std::vector<Slot> slots_;  // guarded by mutex_
};

}  // namespace kiln::opencl
