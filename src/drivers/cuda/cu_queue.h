// A CUDA queue: one CUDA stream per HAL queue (non-blocking, so it never synchronizes with the
// legacy default stream of other users of the primary context).
//
// A wait not reached yet is handed to the device when an action already on a stream of this
// context will signal it (PendingSignals): the stream waits on that action's pooled event
// (cuStreamWaitEvent), with no host round trip. If the signaller has kernels, which may fail on
// the device, the action must be one the wait gate can stop (kernels and barriers only) and
// runs the gate first (cu_wait_gate.h). Any other action is held in the HAL's DeferredQueue
// until its waits are met, then goes onto the stream from the thread that met them, so a failed
// wait drops it before any of it reaches CUDA. A handed wait also resolves on the host (a
// pooled timepoint), and the action completes only after it, so its signals never overtake its
// signallers' on a timeline.
//
// After an action's commands, an event from the context's pool is recorded (for later device
// waits on its signals, and for its completion), and the queue's completion thread waits for it
// in order, the way IREE's CUDA HAL does: a short spin on cuEventQuery, then cuEventSynchronize,
// which sleeps. No stream callback is used: CUDA drops cuLaunchHostFunc callbacks after a fault in
// the context, which would leave every waiter blocked forever; an event wait returns the fault
// instead. The first fault marks the context lost (CuContext::lost) and fails every action in
// flight and every later submission with a status that names it. Otherwise the completion thread
// reads the action's status slot (cu_status_slots.h), copies staged reads to their host memory,
// and signals or fails the action's semaphores. Reads and writes go through pinned staging
// blocks (cu_staging_pool.h), so the copies are asynchronous; a write's host bytes are read when
// it is issued, which for an action with handed waits is before they resolve, so actions with
// transfers from host memory (write) keep their waits on the host. Host calls run on a worker
// of their own; a host call that queues device work (hal::StreamCallFn, a library call) runs
// when issued instead, putting its work on this queue's stream, and completes as a dispatch
// does: no host thread waits for its work, and the actions after it wait on its event.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_graph_cache.h"
#include "drivers/serial_worker.h"
#include "kiln/hal/queue.h"

namespace kiln::cuda {

class CuQueue final : public hal::Queue {
 public:
  static Result<std::shared_ptr<CuQueue>> create(std::string name, const void* device_tag,
                                                 std::shared_ptr<CuContext> context);
  CuQueue(std::string name, const void* device_tag, std::shared_ptr<CuContext> context)
      : Queue(std::move(name), device_tag), context_(std::move(context)) {}
  // Fails actions still waiting (CANCELLED), finishes the host calls already ready and the work
  // on the stream, then destroys the stream.
  ~CuQueue() override;

  // Staged reads and writes go in chunks of at most this many bytes (and of the staging pool's
  // largest class), so that the host's copy of one chunk overlaps the device's copy of another.
  static constexpr size_t kStagingChunkBytes = size_t{4} << 20;
  // Reads and writes of at least this many bytes go through CUDA's own copy of the caller's
  // (usually pageable) memory, cuMemcpyDtoHAsync / cuMemcpyHtoDAsync, instead of kiln's staging
  // blocks: on an H200 the driver moved 64 MiB device to host at 14.2 GB/s where kiln's staged
  // read reached 4.9, bound by one thread's memcpy out of the blocks. The driver returns from a
  // read into pageable memory only once it has landed, so such a read waits for its waits on the
  // host (no handed wait can fail after it wrote) and runs on the queue's host thread.
  static constexpr size_t kDirectTransferBytes = size_t{16} << 20;
  // How long the completion worker polls for the next flight before it sleeps.
  static constexpr int64_t kCompletionSpinNs = 50000;

 private:
  struct Flight;
  struct HandedWait {
    hal::SemaphoreValue wait;
    PendingSignal signaller;
  };
  void enqueue(std::unique_ptr<hal::Action> action) override;
  void issue(std::unique_ptr<hal::Action> action) override;
  void submit(std::unique_ptr<hal::Action> action, std::vector<HandedWait> handed = {});
  // Puts one command on the stream; `index` numbers the commands of the action.
  Status launch(const hal::Command& command, uint32_t index, Flight& flight);
  Status launch_dispatch(const hal::DispatchCommand& d, uint32_t index, Flight& flight);
  // A dispatch's kernel, grid and parameters (its grid checked against CUDA's limits), and its
  // launch on the stream.
  Result<KernelLaunch> kernel_launch(const hal::DispatchCommand& d, uint32_t index, Flight& flight);
  Status launch_kernel(const KernelLaunch& launch);
  // A command buffer: as a graph where GraphCache has one for it, else command by command.
  Status launch_execute(const hal::ExecuteCommand& e, Flight& flight);
  // A host call's StreamCallFn with this queue's stream (the context pushed, under the issue lock).
  Status launch_stream_call(const hal::StreamCallFn& on_stream);
  Status launch_copy(const hal::CopyCommand& c, Flight& flight);
  Status launch_fill(const hal::FillCommand& f, Flight& flight);
  // Host bytes to the device, and device bytes to the host, through staging blocks.
  Status launch_upload(const void* host, size_t length, CUdeviceptr target, Flight& flight);
  Status launch_download(CUdeviceptr source, size_t length, void* host, Flight& flight);
  // Calls copy(offset, length, staging block) for each chunk of a staged transfer of `length`
  // bytes (below kDirectTransferBytes), each in a pooled block the flight holds until it ends
  // (`read_into`: the chunk's copy lands in the block, and goes on to read_into + offset then).
  Status for_each_staged_chunk(size_t length, Flight& flight, void* read_into,
                               const std::function<CUresult(size_t, size_t, void*)>& copy);
  // The bytes of one staged chunk.
  size_t chunk_bytes() const;
  // On the completion worker, in submission order: waits until the flight's work on the stream
  // is over (its completion event when `recorded`, else the whole stream), then finishes it.
  void await_device(Flight* flight, bool recorded);
  // Waits for `event` with the context pushed: spins on cuEventQuery for a few microseconds
  // (when `spin`), then blocks in cuEventSynchronize. The fault when the context has one.
  Status wait_for_event(CUevent event, bool spin);
  void finish(Flight* flight);  // on the completion worker: the device part is over
  // A handed wait resolved on the host (reached, or failed).
  static void on_wait_resolved(void* user, const Status& status);
  // One of the things an action's completion waits for happened; the last completes it.
  void resolve(Flight* flight);

  std::shared_ptr<CuContext> context_;
  CUstream stream_ = nullptr;
  std::mutex issue_mutex_;  // one action's commands go onto the stream together
  GraphCache graphs_{context_->api()};  // guarded by issue_mutex_

  std::mutex inflight_mutex_;
  std::condition_variable inflight_idle_;
  size_t inflight_ = 0;  // guarded by inflight_mutex_

  // Spins a while after each completion: the next action of a stream of short ones is usually
  // pushed within microseconds, and a sleeping worker's wake-up would add to its latency.
  drivers::SerialWorker completions_{kCompletionSpinNs};
  drivers::SerialWorker host_calls_;
};

}  // namespace kiln::cuda
