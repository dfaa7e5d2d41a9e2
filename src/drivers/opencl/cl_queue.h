// An OpenCL queue: one in-order cl_command_queue per HAL queue.
//
// Device work (copy, fill, update, read, write, dispatch, execute, barrier) becomes OpenCL
// commands. An action whose waits are all reached is enqueued at once; any other action is held
// in the HAL's DeferredQueue until its waits are met, then enqueued from the thread that met
// them, so a failed wait drops it before any of its commands reach OpenCL. The completion event of every action carries a
// callback (clSetEventCallback) that signals or fails the action's semaphores, so no host thread
// blocks per pending action. Host calls run on a worker thread of the queue (never on the
// OpenCL runtime's callback thread, where blocking would be undefined).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "drivers/opencl/cl_context.h"
#include "kiln/hal/queue.h"

namespace kiln::opencl {

struct InFlight;

class ClQueue final : public hal::Queue {
 public:
  static Result<std::shared_ptr<ClQueue>> create(std::string name, const void* device_tag,
                                                 std::shared_ptr<ClContext> context);
  ClQueue(std::string name, const void* device_tag, std::shared_ptr<ClContext> context)
      : Queue(std::move(name), device_tag), context_(std::move(context)) {}
  // Fails actions still waiting (CANCELLED), finishes those enqueued and the host calls already
  // ready, then releases the OpenCL queue.
  ~ClQueue() override;

 private:
  friend struct InFlight;
  void enqueue(std::unique_ptr<hal::Action> action) override;
  void issue(std::unique_ptr<hal::Action> action) override;

  // Enqueues an action whose waits are all met: its commands, then the completion callback.
  void submit_device(std::unique_ptr<hal::Action> action);
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
  void finished();

  void run_host_call(std::unique_ptr<hal::Action> action);
  void host_worker_main();

  std::shared_ptr<ClContext> context_;
  cl_command_queue queue_ = nullptr;
  cl_mem status_ = nullptr;  // kStatusWords words written by failing kernels

  std::mutex issue_mutex_;  // one action's commands are enqueued together; guards next_tag_
  uint32_t next_tag_ = 0;

  std::mutex inflight_mutex_;
  std::condition_variable inflight_idle_;
  size_t inflight_ = 0;  // guarded by inflight_mutex_

  std::mutex host_mutex_;
  std::condition_variable host_ready_cv_;
  std::deque<std::unique_ptr<hal::Action>> host_ready_;  // guarded by host_mutex_
  bool host_stop_ = false;                                // guarded by host_mutex_
  std::thread host_worker_;                               // started with the first host call
};

}  // namespace kiln::opencl
