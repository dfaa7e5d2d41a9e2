#include "drivers/cuda/cu_queue.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_executable.h"
#include "drivers/cuda/cu_wait_gate.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "drivers/device_waits.h"
#include "drivers/kernel_failure.h"
#include "kiln/base/log.h"
#include "kiln/base/overloaded.h"
#include "kiln/base/time.h"

namespace kiln::cuda {

namespace {
constexpr uint32_t kMaxGridX = 0x7FFFFFFFu, kMaxGridYZ = 65535;
// How long the completion thread spins on an action's event before it sleeps in the driver.
constexpr int64_t kSpinNs = 20000;

// Whether `command` runs a kernel that may fail (a check, a hand-written KILN_FAIL) or whose entry
// check of a binding's size fails: its action then needs a status slot to say so. Other kernels
// get the context's quiet slot, and nothing is read back after them.
bool reports_status(const hal::Command& command) {
  if (const auto* d = std::get_if<hal::DispatchCommand>(&command)) {
    const CuKernel& kernel = static_cast<const CuExecutable&>(*d->executable).kernel(d->export_ordinal);
    if (kernel.may_fail) return true;
    for (size_t i = 0; i < d->bindings.size() && i < kernel.min_bytes.size(); ++i) {
      if (d->bindings[i].length < kernel.min_bytes[i]) return true;
    }
    return false;
  }
  if (const auto* e = std::get_if<hal::ExecuteCommand>(&command)) {
    const std::vector<hal::Command>& commands = e->command_buffer->commands();
    return std::any_of(commands.begin(), commands.end(), reports_status);
  }
  return false;
}
}  // namespace

// One action on the stream, from its submission to its completion on the worker.
// It completes when its device work is over (finish) and each wait handed to the device has
// resolved on the host (a timepoint), whichever is last.
struct CuQueue::Flight {
  CuQueue* queue = nullptr;
  std::unique_ptr<hal::Action> action;
  std::shared_ptr<const StatusSlot> slot;  // runs kernels or a gate: read back at the end
  Status enqueue_error;  // a command that could not be put on the stream
  std::vector<HandedWait> handed;      // their signallers' events and slots stay held meanwhile
  EventRef completion;                 // recorded after the work, when the action signals
  std::atomic<size_t> unresolved{1};   // handed waits not yet resolved, and the device part
  Status device_status;                // set before the device part's decrement
  drivers::HandedWaitFailure wait_failure;
  std::vector<StagingBlock> staging;  // released after the copies that use them
  struct Readback {
    void* host;
    const void* staged;
    size_t length;
  };
  std::vector<Readback> readbacks;     // staged reads, copied to host memory at the end
  bool prints = false;                 // runs a kernel whose source calls printf
};

Result<std::shared_ptr<CuQueue>> CuQueue::create(std::string name, const void* device_tag,
                                                 std::shared_ptr<CuContext> context) {
  auto queue = std::make_shared<CuQueue>(std::move(name), device_tag, std::move(context));
  KILN_RETURN_IF_ERROR(queue->completions_.start().annotate("queue '" + queue->name() + "'"));
  KILN_RETURN_IF_ERROR(call_in_context(queue->context_->target(), "cuStreamCreate", "queue '" + queue->name() + "'",
                                       [&](const Api& api) { return api.StreamCreate(&queue->stream_, CU_STREAM_NON_BLOCKING); }));
  return queue;
}

CuQueue::~CuQueue() {
  abort_pending();
  host_calls_.stop();
  if (stream_) {
    call_in_context(context_->target(), "cuStreamSynchronize", name(), [&](const Api& api) {
      return api.StreamSynchronize(stream_);
    }).ignore();
  }
  {
    // Completions may still be on their way to the worker after the stream is idle.
    std::unique_lock<std::mutex> lock(inflight_mutex_);
    inflight_idle_.wait(lock, [this] { return inflight_ == 0; });
  }
  completions_.stop();
  {
    ContextScope scope(context_->target());
    if (scope.status("").ok()) graphs_.clear();
  }
  if (stream_) {
    call_in_context(context_->target(), "cuStreamDestroy_v2", name(), [&](const Api& api) {
      return api.StreamDestroy(stream_);
    }).ignore();
  }
}

void CuQueue::enqueue(std::unique_ptr<hal::Action> action) {
  // A write copies host memory when issued, so its waits must be met first. A host call runs on
  // the host once they are; one that queues device work (StreamCallFn) goes onto the stream as a
  // dispatch would, its waits handed to the device where their signallers run no kernels (the
  // wait gate cannot stop a library's work).
  const auto* call = std::get_if<hal::HostCallCommand>(&action->command);
  if ((call && !call->on_stream) || drivers::runs_command<hal::WriteCommand>(action->command)) {
    defer(std::move(action));
    return;
  }
  // A read long enough to go through CUDA's own copy (kDirectTransferBytes) writes the caller's
  // memory before the action ends, so its waits must be met first too: a handed wait that failed
  // later would have let it write there (a staged read copies out only once the action is over).
  if (const auto* read = std::get_if<hal::ReadCommand>(&action->command); read && read->length >= kDirectTransferBytes) {
    defer(std::move(action));
    return;
  }
  const bool gateable = drivers::only_kernels(action->command);
  size_t gated = 0;
  std::vector<HandedWait> handed;
  for (const hal::SemaphoreValue& wait : action->waits) {
    Result<uint64_t> value = wait.semaphore->query();
    if (value.ok() && *value >= wait.value) continue;
    std::optional<PendingSignal> signaller;
    if (value.ok()) signaller = context_->pending_signals().find(wait.semaphore.get(), wait.value);
    if (signaller && signaller->slot &&
        (!gateable || ++gated > WaitGate::kMaxSignallers || !context_->wait_gate().available())) {
      signaller.reset();
    }
    if (!signaller) {
      defer(std::move(action));  // the host waits (and drops the action if the wait fails)
      return;
    }
    handed.push_back({wait, std::move(*signaller)});
  }
  submit(std::move(action), std::move(handed));
}

void CuQueue::issue(std::unique_ptr<hal::Action> action) {
  if (const auto* call = std::get_if<hal::HostCallCommand>(&action->command); call && !call->on_stream) {
    std::shared_ptr<hal::Action> shared = std::move(action);
    host_calls_.push([shared] { drivers::run_host_call(*shared); });
    return;
  }
  if (const auto* read = std::get_if<hal::ReadCommand>(&action->command); read && read->length >= kDirectTransferBytes) {
    // The driver's read returns once it has landed: on this queue's own host thread, never on
    // the caller's or on the thread whose signal released it (another queue's completions).
    auto held = std::make_shared<std::unique_ptr<hal::Action>>(std::move(action));
    host_calls_.push([this, held] { submit(std::move(*held)); });
    return;
  }
  submit(std::move(action));
}

void CuQueue::submit(std::unique_ptr<hal::Action> action, std::vector<HandedWait> handed) {
  auto* flight = new Flight();
  flight->queue = this;
  flight->action = std::move(action);
  flight->handed = std::move(handed);
  flight->unresolved.store(flight->handed.size() + 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    ++inflight_;
  }
  std::vector<const StatusSlot*> gated;  // signallers whose kernels may fail on the device
  for (const HandedWait& h : flight->handed) {
    if (h.signaller.slot) gated.push_back(h.signaller.slot.get());
  }
  const Api& api = context_->api();
  Status status = context_->lost();  // a lost device runs nothing more
  if (status.ok() && (reports_status(flight->action->command) || !gated.empty())) {
    Result<std::shared_ptr<const StatusSlot>> slot = context_->slots().acquire();
    if (slot.ok()) {
      flight->slot = std::move(*slot);
    } else {
      status = slot.status();
    }
  }
  if (status.ok()) {
    Result<EventRef> event = context_->events().acquire();
    if (event.ok()) {
      flight->completion = std::move(*event);
    } else {
      status = event.status();
    }
  }
  // Once the flight is on the completion worker it may end at any moment (with no handed waits),
  // and the last handed wait to resolve may end it too: what is needed after that is copied now.
  hal::SemaphoreList handed_waits;
  for (const HandedWait& h : flight->handed) handed_waits.push_back(h.wait);
  bool recorded = false;
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    ContextScope scope(context_->target());
    if (status.ok()) status = scope.status("queue '" + name() + "'");
    for (const HandedWait& h : flight->handed) {
      if (!status.ok()) break;
      CUresult result = api.StreamWaitEvent(stream_, h.signaller.event.get(), CU_EVENT_WAIT_DEFAULT);
      if (result != CUDA_SUCCESS) status = cu_error("cuStreamWaitEvent", result);
    }
    if (status.ok() && !gated.empty()) status = context_->wait_gate().launch(stream_, *flight->slot, gated);
    if (status.ok()) status = launch(flight->action->command, 0, *flight);
    if (status.ok() && flight->slot) {
      // The slot is device memory: its words reach the host through a copy after the kernels.
      CUresult copied = StatusSlots::copy_to_host(api, *flight->slot, stream_);
      if (copied != CUDA_SUCCESS) status = cu_error("cuMemcpyDtoHAsync_v2", copied, "the action's status slot");
    }
    // Recorded even after a failed command: the worker then waits for what was put on the stream.
    if (flight->completion && scope.status("").ok()) {
      CUresult result = api.EventRecord(flight->completion.get(), stream_);
      recorded = result == CUDA_SUCCESS;
      if (!recorded && status.ok()) status = cu_error("cuEventRecord", result);
    }
    if (status.ok()) {
      // Published: later waits for these signals may be handed to the device.
      for (const hal::SemaphoreValue& signal : flight->action->signals) {
        PendingSignal pending;
        pending.value = signal.value;
        pending.event = flight->completion;
        pending.slot = flight->slot;
        context_->pending_signals().add(signal.semaphore.get(), std::move(pending));
      }
    } else {
      flight->enqueue_error =
          status.annotate(std::string(hal::command_name(flight->action->command)) + " on queue '" + name() + "'");
    }
    // In the order of the stream, under the issue lock: the worker completes flights in order.
    completions_.push([flight, recorded] { flight->queue->await_device(flight, recorded); });
  }
  // The handed waits resolve on the host too.
  for (const hal::SemaphoreValue& wait : handed_waits) {
    Result<TimepointHandle> point =
        context_->timepoints().add_host_wait(wait.semaphore, wait.value, &CuQueue::on_wait_resolved, flight);
    if (!point.ok()) {
      // No timepoint (the pool is shut down): resolve it as failed rather than never.
      on_wait_resolved(flight, point.status());
    }
  }
}

Status CuQueue::launch(const hal::Command& command, uint32_t index, Flight& flight) {
  return std::visit(
      Overloaded{
          [&](const hal::CopyCommand& c) { return launch_copy(c, flight); },
          [&](const hal::FillCommand& f) { return launch_fill(f, flight); },
          [&](const hal::UpdateCommand& u) {
            return launch_upload(u.data.data(), u.data.size(), buffer_pointer(*u.target) + u.offset, flight);
          },
          [&](const hal::WriteCommand& w) {
            return launch_upload(w.host, w.length, buffer_pointer(*w.target) + w.offset, flight);
          },
          [&](const hal::ReadCommand& r) {
            return launch_download(buffer_pointer(*r.source) + r.offset, r.length, r.host, flight);
          },
          [&](const hal::DispatchCommand& d) { return launch_dispatch(d, index, flight); },
          [&](const hal::BarrierCommand&) { return Status(); },  // the stream is in order
          [&](const hal::ExecuteCommand& e) { return launch_execute(e, flight); },
          [&](const hal::HostCallCommand& c) {
            // Only an action's own command (a command buffer holds no host calls).
            return c.on_stream ? launch_stream_call(c.on_stream)
                               : internal_error("host_call cannot run inside a command buffer");
          },
      },
      command);
}

Status CuQueue::launch_stream_call(const hal::StreamCallFn& on_stream) {
  try {
    return on_stream(stream_);
  } catch (const std::exception& e) {
    return internal_error(std::string("stream call threw: ") + e.what());
  } catch (...) {
    return internal_error("stream call threw a non-standard exception");
  }
}

size_t CuQueue::chunk_bytes() const { return std::min(kStagingChunkBytes, context_->staging().max_block_bytes()); }

Status CuQueue::for_each_staged_chunk(size_t length, Flight& flight, void* read_into,
                                      const std::function<CUresult(size_t, size_t, void*)>& copy) {
  // Chunks of at most 4 MiB, and never above the pool's largest class (transfers reuse pooled
  // blocks instead of pinning one-off blocks of their own size): the copy of one chunk into
  // pinned memory overlaps the device's copy of the one before. The flight holds every block
  // until it ends (the device may still use them), and a read's chunks are copied out then.
  const size_t most = chunk_bytes();
  for (size_t done = 0; done < length;) {
    const size_t chunk = std::min(length - done, most);
    KILN_ASSIGN_OR_RETURN(StagingBlock block, context_->staging().acquire(chunk));
    void* staged = block.data();
    flight.staging.push_back(std::move(block));
    if (CUresult result = copy(done, chunk, staged); result != CUDA_SUCCESS) {
      return cu_error(read_into ? "cuMemcpyDtoHAsync_v2" : "cuMemcpyHtoDAsync_v2", result);
    }
    if (read_into) flight.readbacks.push_back({static_cast<char*>(read_into) + done, staged, chunk});
    done += chunk;
  }
  return Status();
}

Status CuQueue::launch_upload(const void* host, size_t length, CUdeviceptr target, Flight& flight) {
  if (length >= kDirectTransferBytes) {
    // From pageable memory the driver returns once it has taken the bytes, as a write must.
    const CUresult result = context_->api().MemcpyHtoDAsync(target, host, length, stream_);
    return result == CUDA_SUCCESS ? Status() : cu_error("cuMemcpyHtoDAsync_v2", result);
  }
  return for_each_staged_chunk(length, flight, nullptr, [&](size_t done, size_t chunk, void* staged) {
    std::memcpy(staged, static_cast<const char*>(host) + done, chunk);
    return context_->api().MemcpyHtoDAsync(target + done, staged, chunk, stream_);
  });
}

Status CuQueue::launch_download(CUdeviceptr source, size_t length, void* host, Flight& flight) {
  if (length >= kDirectTransferBytes) {
    const CUresult result = context_->api().MemcpyDtoHAsync(host, source, length, stream_);
    return result == CUDA_SUCCESS ? Status() : cu_error("cuMemcpyDtoHAsync_v2", result);
  }
  return for_each_staged_chunk(length, flight, host, [&](size_t done, size_t chunk, void* staged) {
    return context_->api().MemcpyDtoHAsync(staged, source + done, chunk, stream_);
  });
}

Status CuQueue::launch_copy(const hal::CopyCommand& c, Flight& flight) {
  if (c.length == 0) return Status();
  const Api& api = context_->api();
  const CUdeviceptr from = buffer_pointer(*c.source) + c.source_offset;
  const CUdeviceptr to = buffer_pointer(*c.target) + c.target_offset;
  if (from == to) return Status();  // copying a range onto itself changes nothing
  if (from < to + c.length && to < from + c.length) {
    // Overlapping ranges: the HAL's copy is a memmove, CUDA's is not. Through a temporary, in
    // stream order (cuMemAlloc and cuMemFree would synchronize the whole device), from kiln's pool.
    CUdeviceptr temporary = 0;
    const CUmemoryPool pool = context_->memory_pool();
    CUresult result = pool ? api.MemAllocFromPoolAsync(&temporary, c.length, pool, stream_)
                           : api.MemAllocAsync(&temporary, c.length, stream_);
    if (result != CUDA_SUCCESS) return cu_error("cuMemAllocAsync", result, "overlapping copy");
    result = api.MemcpyDtoDAsync(temporary, from, c.length, stream_);
    if (result == CUDA_SUCCESS) result = api.MemcpyDtoDAsync(to, temporary, c.length, stream_);
    const CUresult freed = api.MemFreeAsync(temporary, stream_);
    if (result != CUDA_SUCCESS) return cu_error("cuMemcpyDtoDAsync_v2", result, "overlapping copy");
    return freed == CUDA_SUCCESS ? Status() : cu_error("cuMemFreeAsync", freed, "overlapping copy");
  }
  CUresult result = api.MemcpyDtoDAsync(to, from, c.length, stream_);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuMemcpyDtoDAsync_v2", result);
}

Status CuQueue::launch_fill(const hal::FillCommand& f, Flight& flight) {
  if (f.length == 0) return Status();
  const Api& api = context_->api();
  const CUdeviceptr target = buffer_pointer(*f.target) + f.offset;
  CUresult result = CUDA_SUCCESS;
  if (f.pattern_size == 1) {
    result = api.MemsetD8Async(target, static_cast<unsigned char>(f.pattern), f.length, stream_);
  } else if (target % f.pattern_size == 0 && f.pattern_size == 2) {
    result = api.MemsetD16Async(target, static_cast<unsigned short>(f.pattern), f.length / 2, stream_);
  } else if (target % f.pattern_size == 0) {
    result = api.MemsetD32Async(target, f.pattern, f.length / 4, stream_);
  } else {
    // cuMemsetD16/D32 need an aligned address; a subspan need not give one. The pattern is
    // written out on the host and uploaded.
    std::vector<uint8_t> bytes(f.length);
    for (size_t i = 0; i < f.length; ++i) bytes[i] = static_cast<uint8_t>(f.pattern >> (8 * (i % f.pattern_size)));
    return launch_upload(bytes.data(), bytes.size(), target, flight);
  }
  return result == CUDA_SUCCESS ? Status() : cu_error("cuMemsetD*Async", result);
}

Result<KernelLaunch> CuQueue::kernel_launch(const hal::DispatchCommand& d, uint32_t index, Flight& flight) {
  // Validation checked that the executable belongs to this device: it is a CuExecutable.
  const auto& executable = static_cast<const CuExecutable&>(*d.executable);
  const CuKernel& kernel = executable.kernel(d.export_ordinal);
  // CUDA's grid limits for every supported architecture: x below 2^31, y and z at most 65535.
  // Past them cuLaunchKernel fails with a bare CUDA_ERROR_INVALID_VALUE; say which limit instead.
  if (d.workgroups[0] > kMaxGridX || d.workgroups[1] > kMaxGridYZ || d.workgroups[2] > kMaxGridYZ) {
    return invalid_argument_error("kernel '" + executable.exports()[d.export_ordinal].name + "': " +
                                  std::to_string(d.workgroups[0]) + " x " + std::to_string(d.workgroups[1]) + " x " +
                                  std::to_string(d.workgroups[2]) +
                                  " workgroups exceed CUDA's grid limits (x at most 2147483647, y and z at most 65535)");
  }
  flight.prints = flight.prints || kernel.prints;
  // Kernels that cannot fail read the context's quiet slot at entry (reports_status).
  const StatusSlot* slot = flight.slot.get();
  if (!slot) {
    KILN_ASSIGN_OR_RETURN(slot, context_->slots().quiet());
  }
  // The ABI's parameters (cuda_kernel_abi.h), each in a 64-bit slot.
  KernelLaunch launch;
  launch.function = kernel.function;
  launch.grid = {d.workgroups[0], d.workgroups[1], d.workgroups[2]};
  launch.block = kernel.block_size;
  std::vector<uint64_t>& values = launch.values;
  values.reserve(3 + 3 * d.bindings.size() + d.constants.size());
  values.push_back(slot->ring);
  values.push_back(slot->tag);
  values.push_back(index);
  for (const hal::BufferBinding& b : d.bindings) {
    const auto* storage = static_cast<const CuStorage*>(b.buffer->storage().get());
    values.push_back(storage->pointer());
    values.push_back(b.buffer->byte_offset() + b.offset);
    values.push_back(b.length);
  }
  for (uint32_t constant : d.constants) values.push_back(constant);
  return launch;
}

Status CuQueue::launch_kernel(const KernelLaunch& launch) {
  // A 32-bit parameter is read from the low bytes of its slot (little-endian, as every CUDA host is).
  std::vector<void*> pointers = launch.parameters();
  CUresult result = context_->api().LaunchKernel(launch.function, launch.grid[0], launch.grid[1], launch.grid[2],
                                                 launch.block, 1, 1, 0, stream_, pointers.data(), nullptr);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuLaunchKernel", result);
}

Status CuQueue::launch_dispatch(const hal::DispatchCommand& d, uint32_t index, Flight& flight) {
  if (uint64_t{d.workgroups[0]} * d.workgroups[1] * d.workgroups[2] == 0) return Status();
  KILN_ASSIGN_OR_RETURN(KernelLaunch launch, kernel_launch(d, index, flight));
  const auto& executable = static_cast<const CuExecutable&>(*d.executable);
  return launch_kernel(launch).annotate("kernel '" + executable.exports()[d.export_ordinal].name + "'");
}

Status CuQueue::launch_execute(const hal::ExecuteCommand& e, Flight& flight) {
  const std::vector<hal::Command>& commands = e.command_buffer->commands();
  // As a graph: kernels only (every one with workgroups; barriers between them, which the
  // graph's order keeps), none reading a status slot of this action (whose tag changes with every
  // run: its nodes would all change) nor printing (a graph would not flush its output).
  bool graphable = !flight.slot && graphs_.enabled();
  size_t kernels = 0;
  for (const hal::Command& c : commands) {
    if (std::holds_alternative<hal::BarrierCommand>(c)) continue;
    const auto* d = std::get_if<hal::DispatchCommand>(&c);
    graphable = graphable && d && uint64_t{d->workgroups[0]} * d->workgroups[1] * d->workgroups[2] > 0 &&
                !static_cast<const CuExecutable&>(*d->executable).kernel(d->export_ordinal).prints;
    ++kernels;
  }
  graphable = graphable && kernels > 0;
  if (!graphable) {
    uint32_t i = 0;
    for (const hal::Command& inner : commands) KILN_RETURN_IF_ERROR(launch(inner, i++, flight));
    return Status();
  }
  std::vector<KernelLaunch> launches;
  uint32_t i = 0;
  for (const hal::Command& c : commands) {
    if (const auto* d = std::get_if<hal::DispatchCommand>(&c)) {
      KILN_ASSIGN_OR_RETURN(KernelLaunch launch, kernel_launch(*d, i, flight));
      launches.push_back(std::move(launch));
    }
    ++i;  // the command's index in the buffer, as launch() numbers it
  }
  KILN_ASSIGN_OR_RETURN(bool as_graph, graphs_.launch(launches, stream_));
  if (as_graph) return Status();
  for (const KernelLaunch& launch : launches) KILN_RETURN_IF_ERROR(launch_kernel(launch));
  return Status();
}

void CuQueue::await_device(Flight* flight, bool recorded) {
  Status device = context_->lost();
  if (device.ok()) {
    // A kernel that prints is waited for in cuEventSynchronize, which flushes device printf
    // (value tracing) to stdout, so its lines come before whatever follows the action.
    device = recorded ? wait_for_event(flight->completion.get(), !flight->prints)
                      : call_in_context(context_->target(), "cuStreamSynchronize", name(),
                                        [&](const Api& api) { return api.StreamSynchronize(stream_); });
    if (!device.ok()) device = context_->mark_lost(device.annotate("queue '" + name() + "'"));
    // Lost while the action ran, without a CUDA error: an NCCL collective that timed out was
    // aborted, which ends its kernels and lets the stream go on past what it did not write.
    if (device.ok()) device = context_->lost();
  }
  if (!device.ok() && flight->enqueue_error.ok()) flight->enqueue_error = device;
  finish(flight);
}

Status CuQueue::wait_for_event(CUevent event, bool spin) {
  const Api& api = context_->api();
  ContextScope scope(context_->target());
  KILN_RETURN_IF_ERROR(scope.status("queue '" + name() + "'"));
  if (spin) {
    // Short actions complete within a few microseconds of their launch: a spin catches them
    // sooner than the driver's wake-up from cuEventSynchronize.
    const int64_t until = now_ns() + kSpinNs;
    do {
      CUresult result = api.EventQuery(event);
      if (result == CUDA_SUCCESS) return Status();
      if (result != CUDA_ERROR_NOT_READY) return cu_error("cuEventQuery", result);
    } while (now_ns() < until);
  }
  CUresult result = api.EventSynchronize(event);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuEventSynchronize", result);
}

void CuQueue::finish(Flight* flight) {
  Status status = flight->enqueue_error;
  if (status.ok() && flight->slot && StatusSlots::failed(*flight->slot)) {
    uint32_t words[kStatusWords];
    for (size_t i = 0; i < kStatusWords; ++i) words[i] = flight->slot->words[i];
    status = drivers::kernel_failure(flight->action->command, words, name());
  }
  if (flight->completion) {
    for (const hal::SemaphoreValue& signal : flight->action->signals) {
      context_->pending_signals().remove(signal.semaphore.get(), flight->completion.get());
    }
  }
  flight->device_status = std::move(status);
  resolve(flight);
}

void CuQueue::on_wait_resolved(void* user, const Status& status) {
  auto* flight = static_cast<Flight*>(user);
  if (!status.ok()) flight->wait_failure.fail(status, flight->action->signals);
  flight->queue->resolve(flight);
}

void CuQueue::resolve(Flight* flight) {
  if (flight->unresolved.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const Status status = flight->wait_failure.outcome(flight->device_status);
  // Staged reads reach the caller's memory only for an action that succeeded as a whole: a wait
  // handed to the device that failed on the host let the device copy bytes its signaller never
  // wrote, and the caller's memory keeps what it held.
  if (status.ok()) {
    for (const Flight::Readback& r : flight->readbacks) std::memcpy(r.host, r.staged, r.length);
  }
  flight->staging.clear();
  hal::Queue::complete(*flight->action, status);
  delete flight;
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  if (--inflight_ == 0) inflight_idle_.notify_all();
}

}  // namespace kiln::cuda
