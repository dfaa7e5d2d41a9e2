#include "drivers/opencl/cl_queue.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "drivers/device_waits.h"
#include "drivers/kernel_failure.h"
#include "drivers/opencl/cl_allocator.h"
#include "drivers/opencl/cl_executable.h"
#include "drivers/opencl/cl_kernel_abi.h"
#include "drivers/opencl/cl_wait_gate.h"
#include "kiln/base/settings.h"
#include "kiln/base/env.h"
#include "kiln/base/log.h"
#include "kiln/base/overloaded.h"

namespace kiln::opencl {

// One enqueued action. It completes when its device work is over (the completion callback) and
// each wait handed to the device has resolved on the host (a timepoint), whichever is last.
struct InFlight {
  ClQueue* queue = nullptr;
  std::unique_ptr<hal::Action> action;
  uint32_t tag = 0;
  bool check_status = false;  // has kernels: read the status slot back
  Status enqueue_error;       // a command that could not be enqueued
  uint32_t words[kStatusWords] = {};
  std::vector<hal::Timepoint> wait_points;  // one per handed wait
  std::atomic<size_t> unresolved{1};        // wait points not yet run, and the device part
  Status device_status;                     // set before the device part's decrement
  drivers::HandedWaitFailure wait_failure;
  bool published = false;  // its signals are in the context's PendingSignals
};

Result<std::shared_ptr<ClQueue>> ClQueue::create(std::string name, const void* device_tag,
                                                 std::shared_ptr<ClContext> context,
                                                 std::optional<bool> device_waits) {
  auto queue = std::make_shared<ClQueue>(std::move(name), device_tag, std::move(context));
  if (device_waits) {
    queue->device_waits_ = *device_waits;
  } else {
    KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> from_env,
                          setting_uint("KILN_OPENCL_DEVICE_WAITS"));
    // Off by default on CPU devices, where PoCL ran a chain of kernels across two queues about
    // 10% slower with them (docs/opencl.md, "Waits").
    queue->device_waits_ = from_env.value_or(queue->context_->record().cpu ? 0 : 1) == 1;
  }
  const Api& api = queue->context_->api();
  cl_int err = CL_SUCCESS;
  queue->queue_ = api.CreateCommandQueue(queue->context_->context(), queue->context_->device(), 0, &err);
  if (!queue->queue_ || err != CL_SUCCESS) {
    queue->queue_ = nullptr;
    return cl_error("clCreateCommandQueue", err, "queue '" + queue->name() + "'");
  }
  KILN_ASSIGN_OR_RETURN(queue->ring_,
                        StatusRing::create(queue->context_, queue->queue_, queue->name()));
  return queue;
}

ClQueue::~ClQueue() {
  abort_pending();
  host_calls_.stop();
  const Api& api = context_->api();
  if (queue_) api.Finish(queue_);
  {
    // Completion callbacks may run after clFinish returns; they touch this queue.
    std::unique_lock<std::mutex> lock(inflight_mutex_);
    inflight_idle_.wait(lock, [this] { return inflight_ == 0; });
  }
  ring_.reset();
  if (queue_) api.ReleaseCommandQueue(queue_);
}

void ClQueue::finished() {
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  if (--inflight_ == 0) inflight_idle_.notify_all();
}

void ClQueue::enqueue(std::unique_ptr<hal::Action> action) {
  if (std::holds_alternative<hal::HostCallCommand>(action->command)) {
    defer(std::move(action));
    return;
  }
  // A wait not reached yet is handed to the device when an action enqueued on this device will
  // signal it. If that signaller has kernels, they may still fail on the device: then this
  // action must be one the wait gate can stop, and the gate must be available.
  const Api& api = context_->api();
  std::vector<HandedWait> handed;
  const bool gateable = drivers::only_kernels(action->command);
  size_t gated = 0;
  for (const hal::SemaphoreValue& wait : action->waits) {
    Result<uint64_t> value = wait.semaphore->query();
    if (value.ok() && *value >= wait.value) continue;
    std::optional<PendingSignal> signaller;
    if (value.ok() && device_waits_) signaller = context_->pending_signals().find(wait.semaphore.get(), wait.value);
    // The gate will read the signaller's status slot: reserved now, so that it is not reused
    // first (reserve() fails if it already was).
    if (signaller && signaller->can_fail &&
        (!gateable || ++gated > WaitGate::kMaxSignallers || !context_->wait_gate().available() ||
         !signaller->ring->reserve(signaller->tag))) {
      api.ReleaseEvent(signaller->event);
      signaller.reset();
    }
    if (!signaller) {
      // The host waits (and drops the action if the wait fails).
      for (const HandedWait& h : handed) {
        api.ReleaseEvent(h.signaller.event);
        if (h.signaller.can_fail) h.signaller.ring->release(h.signaller.tag);
      }
      defer(std::move(action));
      return;
    }
    handed.push_back({wait, std::move(*signaller)});
  }
  submit_device(std::move(action), std::move(handed));
}

void ClQueue::issue(std::unique_ptr<hal::Action> action) {
  if (std::holds_alternative<hal::HostCallCommand>(action->command)) {
    run_host_call(std::move(action));
    return;
  }
  submit_device(std::move(action));
}

void ClQueue::advance(cl_event event, std::vector<cl_event>& waits, cl_event* last) {
  const Api& api = context_->api();
  if (*last) api.ReleaseEvent(*last);
  *last = event;
  // The in-order queue orders everything after this command behind it.
  for (cl_event e : waits) api.ReleaseEvent(e);
  waits.clear();
}

void ClQueue::submit_device(std::unique_ptr<hal::Action> action, std::vector<HandedWait> handed) {
  const Api& api = context_->api();
  // The events the next command waits on, within this action: first the handed signallers'.
  std::vector<cl_event> waits;
  std::vector<const PendingSignal*> gated;  // signallers whose kernels may fail on the device
  for (const HandedWait& h : handed) {
    waits.push_back(h.signaller.event);
    if (h.signaller.can_fail) gated.push_back(&h.signaller);
  }
  auto* flight = new InFlight();
  flight->queue = this;
  flight->action = std::move(action);
  flight->check_status = drivers::has_dispatch(flight->action->command) || !gated.empty();
  flight->wait_points.resize(handed.size());
  flight->unresolved.store(handed.size() + 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    ++inflight_;
  }
  cl_event last = nullptr;
  bool callback_missing = false;
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    // A fresh tag whose slot no reader has reserved (tags only need to be unique and non-zero);
    // gates on other queues that read the slot for an earlier tag go first.
    do {
      if (++next_tag_ == 0) ++next_tag_;
    } while (!ring_->take(next_tag_, waits));
    flight->tag = next_tag_;
    Status status;
    if (!gated.empty()) {
      cl_event gate = nullptr;
      status = context_->wait_gate().enqueue(queue_, ring_->mem(), flight->tag, gated, waits, &gate);
      for (const PendingSignal* s : gated) {
        if (status.ok()) s->ring->add_reader(s->tag, gate);
        else s->ring->release(s->tag);
      }
      if (status.ok()) advance(gate, waits, &last);
    }
    if (status.ok()) status = enqueue_command(flight->action->command, 0, *flight, waits, &last);
    if (status.ok() && flight->check_status) {
      cl_event read = nullptr;
      cl_int err = api.EnqueueReadBuffer(queue_, ring_->mem(), CL_FALSE,
                                         StatusRing::slot_offset(flight->tag), sizeof flight->words,
                                         flight->words, static_cast<cl_uint>(waits.size()),
                                         waits.empty() ? nullptr : waits.data(), &read);
      if (err == CL_SUCCESS) {
        advance(read, waits, &last);
      } else {
        status = cl_error("clEnqueueReadBuffer", err, "kernel status");
        flight->check_status = false;
      }
    }
    if (!last || !status.ok()) {
      // Nothing was enqueued (a barrier, zero-length work), or something failed midway: a
      // marker completes after whatever was enqueued before it.
      cl_event marker = nullptr;
      cl_int err = api.EnqueueMarkerWithWaitList(queue_, static_cast<cl_uint>(waits.size()),
                                                 waits.empty() ? nullptr : waits.data(), &marker);
      if (err == CL_SUCCESS) {
        advance(marker, waits, &last);
      } else if (status.ok()) {
        status = cl_error("clEnqueueMarkerWithWaitList", err);
      }
    }
    for (cl_event e : waits) api.ReleaseEvent(e);
    waits.clear();
    flight->enqueue_error = status.ok() ? status
                                        : status.annotate(std::string(hal::command_name(
                                                              flight->action->command)) +
                                                          " on queue '" + name() + "'");
    // Published: later waits for these signals may be handed to the device. A queue that hands
    // no waits publishes nothing, so its actions pay for none of this.
    if (device_waits_ && status.ok() && last && !flight->action->signals.empty()) {
      flight->published = true;
      for (const hal::SemaphoreValue& signal : flight->action->signals) {
        context_->pending_signals().add(
            signal.semaphore.get(), {signal.value, last, ring_, flight->tag, flight->check_status});
      }
    }
  }
  // The handed waits resolve on the host too; the action completes after them, so its signals
  // never overtake its signallers' on a timeline. The device part is still pending here, so the
  // flight outlives this loop.
  for (size_t i = 0; i < handed.size(); ++i) {
    hal::Timepoint& point = flight->wait_points[i];
    point.fn = &ClQueue::on_wait_resolved;
    point.value = handed[i].wait.value;
    point.user = flight;
    handed[i].wait.semaphore->add_timepoint(&point);
  }
  // Outside issue_mutex_: an event that has already completed runs the callback right here, and
  // the actions it releases may be issued on this queue from within it.
  if (last) {
    cl_int err = api.SetEventCallback(last, CL_COMPLETE, &ClQueue::on_complete, flight);
    if (err == CL_SUCCESS) last = nullptr;  // the callback owns the event and the flight now
    else if (flight->enqueue_error.ok()) flight->enqueue_error = cl_error("clSetEventCallback", err);
  } else {
    callback_missing = true;
  }
  api.Flush(queue_);
  if (!last && !callback_missing) return;
  // No completion callback (the runtime refused the marker or the callback): finish here. Only
  // a failing OpenCL runtime gets here.
  api.Finish(queue_);
  if (flight->enqueue_error.ok()) {
    flight->enqueue_error = internal_error("no completion event for an action on queue '" + name() + "'");
  }
  if (last) {
    unpublish(*flight, last);
    api.ReleaseEvent(last);
  }
  device_done(flight, flight->enqueue_error);
}

Status ClQueue::enqueue_command(const hal::Command& command, uint32_t index, InFlight& flight,
                                std::vector<cl_event>& waits, cl_event* last) {
  const Api& api = context_->api();
  const cl_uint wait_count = static_cast<cl_uint>(waits.size());
  const cl_event* wait_list = waits.empty() ? nullptr : waits.data();
  cl_event event = nullptr;
  cl_int err = CL_SUCCESS;
  const char* call = nullptr;
  std::visit(
      Overloaded{
          [&](const hal::CopyCommand& c) {
            Status s = enqueue_copy(c, waits, last);
            if (!s.ok()) {
              call = "copy";
              err = -9999;
              flight.enqueue_error = s;
            }
          },
          [&](const hal::FillCommand& c) {
            if (c.length == 0) return;
            call = "clEnqueueFillBuffer";
            err = api.EnqueueFillBuffer(queue_, buffer_mem(*c.target), &c.pattern, c.pattern_size,
                                        c.target->byte_offset() + c.offset, c.length, wait_count,
                                        wait_list, &event);
          },
          [&](const hal::UpdateCommand& c) {
            if (c.data.empty()) return;
            call = "clEnqueueWriteBuffer";
            err = api.EnqueueWriteBuffer(queue_, buffer_mem(*c.target), CL_FALSE,
                                         c.target->byte_offset() + c.offset, c.data.size(),
                                         c.data.data(), wait_count, wait_list, &event);
          },
          [&](const hal::ReadCommand& c) {
            if (c.length == 0) return;
            call = "clEnqueueReadBuffer";
            err = api.EnqueueReadBuffer(queue_, buffer_mem(*c.source), CL_FALSE,
                                        c.source->byte_offset() + c.offset, c.length, c.host,
                                        wait_count, wait_list, &event);
          },
          [&](const hal::WriteCommand& c) {
            if (c.length == 0) return;
            call = "clEnqueueWriteBuffer";
            err = api.EnqueueWriteBuffer(queue_, buffer_mem(*c.target), CL_FALSE,
                                         c.target->byte_offset() + c.offset, c.length, c.host,
                                         wait_count, wait_list, &event);
          },
          [&](const hal::DispatchCommand& d) {
            Status s = enqueue_dispatch(d, index, flight, waits, last);
            if (!s.ok()) {
              call = "dispatch";
              err = -9999;
              flight.enqueue_error = s;
            }
          },
          [&](const hal::BarrierCommand&) {},  // the queue is in order
          [&](const hal::ExecuteCommand& e) {
            uint32_t i = 0;
            for (const hal::Command& inner : e.command_buffer->commands()) {
              Status s = enqueue_command(inner, i++, flight, waits, last);
              if (!s.ok()) {
                call = "execute";
                err = -9999;
                flight.enqueue_error = s;
                return;
              }
            }
          },
          [&](const hal::HostCallCommand&) {
            call = "host_call";
            err = -9999;
            flight.enqueue_error = internal_error("host_call cannot run inside a command buffer");
          },
      },
      command);
  if (err == -9999) {
    Status s = flight.enqueue_error;
    flight.enqueue_error = Status();
    return s;
  }
  if (err != CL_SUCCESS) return cl_error(call, err);
  if (event) advance(event, waits, last);
  return Status();
}

Status ClQueue::enqueue_copy(const hal::CopyCommand& c, std::vector<cl_event>& waits,
                             cl_event* last) {
  if (c.length == 0) return Status();
  const Api& api = context_->api();
  cl_mem source = buffer_mem(*c.source), target = buffer_mem(*c.target);
  const size_t from = c.source->byte_offset() + c.source_offset;
  const size_t to = c.target->byte_offset() + c.target_offset;
  cl_event event = nullptr;
  if (source == target && from < to + c.length && to < from + c.length) {
    if (from == to) return Status();  // copying a range onto itself changes nothing
    // clEnqueueCopyBuffer refuses overlapping ranges; the HAL's copy is a memmove. Stage it
    // through a temporary buffer (released now; OpenCL frees it after the commands).
    cl_int err = CL_SUCCESS;
    cl_mem staging = api.CreateBuffer(context_->context(), CL_MEM_READ_WRITE, c.length, nullptr, &err);
    if (!staging || err != CL_SUCCESS) return cl_error("clCreateBuffer", err, "overlapping copy");
    err = api.EnqueueCopyBuffer(queue_, source, staging, from, 0, c.length,
                                static_cast<cl_uint>(waits.size()),
                                waits.empty() ? nullptr : waits.data(), &event);
    if (err == CL_SUCCESS) {
      advance(event, waits, last);
      err = api.EnqueueCopyBuffer(queue_, staging, target, 0, to, c.length, 0, nullptr, &event);
      if (err == CL_SUCCESS) advance(event, waits, last);
    }
    api.ReleaseMemObject(staging);
    return err == CL_SUCCESS ? Status() : cl_error("clEnqueueCopyBuffer", err);
  }
  cl_int err = api.EnqueueCopyBuffer(queue_, source, target, from, to, c.length,
                                     static_cast<cl_uint>(waits.size()),
                                     waits.empty() ? nullptr : waits.data(), &event);
  if (err != CL_SUCCESS) return cl_error("clEnqueueCopyBuffer", err);
  advance(event, waits, last);
  return Status();
}

Status ClQueue::enqueue_dispatch(const hal::DispatchCommand& d, uint32_t index, InFlight& flight,
                                 std::vector<cl_event>& waits, cl_event* last) {
  if (uint64_t{d.workgroups[0]} * d.workgroups[1] * d.workgroups[2] == 0) return Status();
  const Api& api = context_->api();
  // Validation checked that the executable belongs to this device: it is a ClExecutable.
  const auto& executable = static_cast<const ClExecutable&>(*d.executable);
  ClKernel& k = executable.kernel(d.export_ordinal);
  std::lock_guard<std::mutex> lock(k.mutex);
  cl_uint arg = 0;
  cl_int err = CL_SUCCESS;
  auto set = [&](size_t size, const void* value) {
    if (err == CL_SUCCESS) err = api.SetKernelArg(k.kernel, arg, size, value);
    ++arg;
  };
  cl_mem ring = ring_->mem();
  set(sizeof(cl_mem), &ring);
  set(sizeof(uint32_t), &flight.tag);
  set(sizeof(uint32_t), &index);
  for (const hal::BufferBinding& b : d.bindings) {
    cl_mem mem = buffer_mem(*b.buffer);
    const cl_ulong offset = b.buffer->byte_offset() + b.offset, length = b.length;
    set(sizeof(cl_mem), &mem);
    set(sizeof(cl_ulong), &offset);
    set(sizeof(cl_ulong), &length);
  }
  for (const uint32_t& constant : d.constants) set(sizeof(uint32_t), &constant);
  const std::string kernel_name = executable.exports()[d.export_ordinal].name;
  if (err != CL_SUCCESS) {
    return cl_error("clSetKernelArg", err, "kernel '" + kernel_name + "' argument " + std::to_string(arg - 1));
  }
  // The HAL workgroup is the OpenCL work group, of k.local_size work items in x (one unless the
  // kernel was written for any local size).
  const size_t global[3] = {size_t{d.workgroups[0]} * k.local_size, d.workgroups[1], d.workgroups[2]};
  const size_t local[3] = {k.local_size, 1, 1};
  cl_event event = nullptr;
  err = api.EnqueueNDRangeKernel(queue_, k.kernel, 3, nullptr, global, local,
                                 static_cast<cl_uint>(waits.size()),
                                 waits.empty() ? nullptr : waits.data(), &event);
  if (err != CL_SUCCESS) return cl_error("clEnqueueNDRangeKernel", err, "kernel '" + kernel_name + "'");
  advance(event, waits, last);
  return Status();
}

void ClQueue::on_complete(cl_event event, cl_int exec_status, void* user) {
  auto* flight = static_cast<InFlight*>(user);
  ClQueue* queue = flight->queue;
  const hal::Action& action = *flight->action;
  Status status = flight->enqueue_error;
  if (status.ok() && exec_status < 0) {
    status = internal_error(std::string("OpenCL ") + hal::command_name(action.command) +
                            " on queue '" + queue->name() + "' failed: execution status " +
                            error_name(exec_status));
  }
  if (status.ok() && flight->check_status && flight->words[0] == flight->tag) {
    status = drivers::kernel_failure(action.command, flight->words, queue->name());
  }
  queue->unpublish(*flight, event);
  queue->context_->api().ReleaseEvent(event);
  device_done(flight, std::move(status));
}

void ClQueue::unpublish(const InFlight& flight, cl_event event) {
  if (!flight.published) return;
  for (const hal::SemaphoreValue& signal : flight.action->signals) {
    context_->pending_signals().remove(signal.semaphore.get(), event);
  }
}

void ClQueue::on_wait_resolved(hal::Timepoint* point, const Status& status) {
  auto* flight = static_cast<InFlight*>(point->user);
  if (!status.ok()) flight->wait_failure.fail(status, flight->action->signals);
  resolve(flight);
}

void ClQueue::device_done(InFlight* flight, Status status) {
  flight->device_status = std::move(status);
  resolve(flight);
}

void ClQueue::resolve(InFlight* flight) {
  if (flight->unresolved.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const Status status = flight->wait_failure.outcome(flight->device_status);
  ClQueue* queue = flight->queue;
  hal::Queue::complete(*flight->action, status);
  delete flight;
  queue->finished();
}

void ClQueue::run_host_call(std::unique_ptr<hal::Action> action) {
  std::shared_ptr<hal::Action> shared = std::move(action);
  host_calls_.push([shared] { drivers::run_host_call(*shared); });
}

}  // namespace kiln::opencl
