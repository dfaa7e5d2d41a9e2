// An OpenCL queue: one in-order cl_command_queue per HAL queue.
//
// Device work (copy, fill, update, read, write, dispatch, execute, barrier) becomes OpenCL
// commands. An action is enqueued at once when each of its waits is reached, or is signalled by
// an action already enqueued on a queue of the same device (PendingSignals): such a wait is
// handed to the device as an event in the first command's wait list, behind a wait gate when
// the signaller has kernels (cl_wait_gate.h). Any other action is held in the HAL's
// DeferredQueue until its waits are met, then enqueued from the thread that met them, so a
// failed wait drops it before any of its commands reach OpenCL. The completion event of every
// action carries a callback (clSetEventCallback) that signals or fails the action's semaphores,
// once its handed waits are also resolved on the host, so no host thread blocks per pending
// action and a timeline never runs backwards. Host calls run on a worker thread of the queue
// (never on the OpenCL runtime's callback thread, where blocking would be undefined).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "drivers/opencl/cl_context.h"
#include "drivers/opencl/cl_pending_signals.h"
#include "drivers/opencl/cl_status_ring.h"
#include "drivers/serial_worker.h"
#include "kiln/hal/queue.h"

namespace kiln::opencl {

struct InFlight;

class ClQueue final : public hal::Queue {
 public:
  // `device_waits` as in hal::DeviceOptions; unset: KILN_OPENCL_DEVICE_WAITS (0 or 1, a bad
  // value is INVALID_ARGUMENT), else on for all but CPU devices.
  static Result<std::shared_ptr<ClQueue>> create(std::string name, const void* device_tag,
                                                 std::shared_ptr<ClContext> context,
                                                 std::optional<bool> device_waits = std::nullopt);
  ClQueue(std::string name, const void* device_tag, std::shared_ptr<ClContext> context)
      : Queue(std::move(name), device_tag), context_(std::move(context)) {}
  // Fails actions still waiting (CANCELLED), finishes those enqueued and the host calls already
  // ready, then releases the OpenCL queue.
  ~ClQueue() override;

  // The OpenCL objects behind this queue, for code that adds commands of its own (the tests hold
  // a queue behind a user event with them). Commands enqueued here order with the queue's own.
  cl_command_queue native_queue() const { return queue_; }
  const ClContext& context() const { return *context_; }

 private:
  friend struct InFlight;
  void enqueue(std::unique_ptr<hal::Action> action) override;
  void issue(std::unique_ptr<hal::Action> action) override;

  // Enqueues an action whose waits are all met or in `handed` (one per wait not yet reached,
  // with its signaller's event retained): its commands, then the completion callback.
  struct HandedWait {
    hal::SemaphoreValue wait;
    PendingSignal signaller;
  };
  void submit_device(std::unique_ptr<hal::Action> action, std::vector<HandedWait> handed = {});
  // Enqueues one command; `waits` is consumed (released and cleared) by the first command that
  // is really enqueued; `*last` becomes the newest event. `index` numbers commands of the action.
  Status enqueue_command(const hal::Command& command, uint32_t index, InFlight& flight,
                         std::vector<cl_event>& waits, cl_event* last);
  Status enqueue_dispatch(const hal::DispatchCommand& d, uint32_t index, InFlight& flight,
                          std::vector<cl_event>& waits, cl_event* last);
  Status enqueue_copy(const hal::CopyCommand& c, std::vector<cl_event>& waits, cl_event* last);
  // Moves the newest event into *last and releases the consumed wait list.
  void advance(cl_event event, std::vector<cl_event>& waits, cl_event* last);
  static void on_complete(cl_event event, cl_int exec_status, void* user);
  // Takes the flight's signals (completed by `event`) out of PendingSignals, if it published them.
  void unpublish(const InFlight& flight, cl_event event);
  // A handed wait resolved on the host (reached, or failed).
  static void on_wait_resolved(hal::Timepoint* point, const Status& status);
  // The device part of an action is over, with `status`.
  static void device_done(InFlight* flight, Status status);
  // One of the things an action's completion waits for happened; the last completes it.
  static void resolve(InFlight* flight);
  void finished();

  void run_host_call(std::unique_ptr<hal::Action> action);

  std::shared_ptr<ClContext> context_;
  cl_command_queue queue_ = nullptr;
  std::shared_ptr<StatusRing> ring_;  // status slots written by failing kernels
  bool device_waits_ = false;  // hand waits to the device (KILN_OPENCL_DEVICE_WAITS)

  std::mutex issue_mutex_;  // one action's commands are enqueued together; guards next_tag_
  uint32_t next_tag_ = 0;

  std::mutex inflight_mutex_;
  std::condition_variable inflight_idle_;
  size_t inflight_ = 0;  // guarded by inflight_mutex_

  drivers::SerialWorker host_calls_;  // runs host calls, started with the first
};

}  // namespace kiln::opencl
