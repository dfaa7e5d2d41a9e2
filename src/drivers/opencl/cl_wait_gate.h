// The wait gate: a one-work-item kernel that an action runs first when one of its waits was
// handed to the device and the signaller has kernels (which may fail on the device). It reads
// the signallers' status slots and, when one of them failed, fails the action's own slot with
// kWaitFailedCode, so that the action's kernels return at their entry check (KILN_ENTRY) and
// what they would have written stays unwritten, as a failed wait drops an action on the host.
// Built once per context, from source, on first use.
#pragma once

#include <mutex>
#include <span>
#include <vector>

#include "drivers/opencl/cl_pending_signals.h"

namespace kiln::opencl {

class ClContext;

class WaitGate {
 public:
  // The most signallers one gate reads; an action that would need more waits on the host.
  static constexpr size_t kMaxSignallers = 4;

  explicit WaitGate(ClContext& context) : context_(context) {}
  ~WaitGate();
  WaitGate(const WaitGate&) = delete;
  WaitGate& operator=(const WaitGate&) = delete;

  // Whether the gate builds on this device (built on the first call; a failure is logged once,
  // and waits on signallers with kernels then stay on the host).
  bool available();
  // Enqueues the gate of the action `tag` (status ring `ring`) on `queue` after `waits`, reading
  // the slots of `signallers` (1 to kMaxSignallers); `*event` is the gate's completion.
  Status enqueue(cl_command_queue queue, cl_mem ring, uint32_t tag,
                 std::span<const PendingSignal* const> signallers,
                 const std::vector<cl_event>& waits, cl_event* event);

 private:
  Status build();  // with mutex_ held

  ClContext& context_;
  std::mutex mutex_;  // building, and setting the kernel's arguments until it is enqueued
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
  bool build_failed_ = false;  // guarded by mutex_
};

}  // namespace kiln::opencl
