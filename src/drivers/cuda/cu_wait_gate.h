// The wait gate: a one-thread kernel that an action runs first when one of its waits was handed
// to the device (cuStreamWaitEvent) and the signaller has kernels, which may fail on the device.
// It reads the signallers' status slots and, when one of them failed, fails the action's own
// slot with kWaitFailedCode, so that the action's kernels return at their entry check
// (KILN_ENTRY) and what they would have written stays unwritten, as a failed wait drops an
// action on the host. Built with NVRTC once per context, on first use.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>

#include "drivers/cuda/cu_status_slots.h"
#include "drivers/kernel_failure.h"

namespace kiln::cuda {

class CuContext;

using drivers::kWaitFailedCode;  // what the gate writes (drivers/kernel_failure.h)

class WaitGate {
 public:
  // The most signallers one gate reads; an action that would need more waits on the host.
  static constexpr size_t kMaxSignallers = 4;

  explicit WaitGate(const CuContext& context) : context_(context) {}
  ~WaitGate();
  WaitGate(const WaitGate&) = delete;
  WaitGate& operator=(const WaitGate&) = delete;

  // Whether the gate builds and loads here (tried on the first call; a failure is logged once,
  // and waits on signallers with kernels then stay on the host).
  bool available();
  // Launches the gate of the action holding `own` on `stream` (the context pushed), reading
  // `signallers` (1 to kMaxSignallers).
  Status launch(CUstream stream, const StatusSlot& own, std::span<const StatusSlot* const> signallers);

 private:
  const CuContext& context_;
  std::mutex mutex_;
  bool tried_ = false;  // guarded by mutex_
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace kiln::cuda
