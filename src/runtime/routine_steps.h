// A routine's work as queue actions. Where the device's executable holds the calls as kernels
// (a CPU device: calls_are_kernels), the routine is one command buffer whose call kernels reach
// the runtime through the RAL context the execution hands them. Elsewhere its kernels are in
// command buffers split where a call runs, each call a host action over mapped buffers. Backend
// routines and ProgramInstance both run routines through this, so calls mean the same on both.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/hal/queue.h"
#include "kiln/loop/loop.h"
#include "kiln/ral/bound_call.h"
#include "kiln/ral/context.h"
#include "kiln/runtime/trace.h"

namespace kiln::runtime {

// A call with the buffers of its tensors (BoundCall::tensors() order). `site` names the call
// statement ("routine 'step', line 4"); a collective's messages carry it to the other ranks.
struct CallStep {
  std::shared_ptr<const ral::BoundCall> call;
  std::vector<hal::BufferRef> buffers;
  std::string site;
};

// Kernels in a command buffer; `calls_runtime` when some of them are call kernels, which need
// the run's RAL context.
struct KernelStep {
  std::shared_ptr<const hal::CommandBuffer> command_buffer;
  bool calls_runtime = false;
};

// Work of the runtime's own on the queue's host thread between the others (value tracing: the
// summaries of a call's tensors, the end of a run).
struct HostStep {
  std::function<Status()> fn;
};

using RoutineStep = std::variant<KernelStep, CallStep, HostStep>;

// Where the routine's calls are kernels: the executable and the export ordinal of its first call
// (call_export_ordinal); the others follow it.
struct CallKernels {
  hal::ExecutableRef executable;
  uint32_t first_ordinal = 0;
  std::vector<uint32_t> constants;  // the sizes of a program with sizes (ir::size_constants)
};

// The workgroups of a dispatch of `kernel` on a device with `caps`: min(its extent, `fixed`) when
// `fixed` is set (BackendOptions::max_workgroups), else sized by its work within the device's
// limits (DeviceCapabilities::workgroups_per_compute_unit, min_stores_per_workgroup).
uint32_t dispatch_workgroups(const ir::Kernel& kernel, const hal::DeviceCapabilities& caps, uint32_t fixed);

// What make_routine_steps needs of a routine: its name (for errors), how many kernels it
// dispatches, and its calls with where they run among the kernels. A routine of a caller's own
// kernels has no calls.
struct RoutineShape {
  std::string_view name;
  size_t kernels = 0;
  std::span<const ir::LoweredCall> calls;
};

inline RoutineShape shape_of(const ir::LoweredRoutine& routine) {
  return RoutineShape{routine.name, routine.kernels.size(), routine.calls};
}

// The routine's steps: runs of consecutive kernels (with a barrier between kernels) as command
// buffers, and its calls, either as dispatches among the kernels (`call_kernels` given; never a
// collective, which ends on its own time) or as steps between them. `dispatch(k)` makes kernel k's dispatch; `buffer(node)` gives the buffer a
// call passes for `node`; `calls` are bound already, one per routine call.
Result<std::vector<RoutineStep>> make_routine_steps(
    const hal::Device& device, const RoutineShape& routine,
    const std::vector<std::shared_ptr<const ral::BoundCall>>& calls,
    const std::optional<CallKernels>& call_kernels,
    const std::function<Result<hal::DispatchCommand>(size_t kernel)>& dispatch,
    const std::function<Result<hal::BufferRef>(int node)>& buffer);

// Binds every call of `routine` for `device` in the global registry (NOT_FOUND naming the function
// and the device for one that is not registered). A routine with collectives makes the process's
// world here (ral::world(): MPI is initialized on the thread that links, and a world that cannot
// be made fails the link).
Result<std::vector<std::shared_ptr<const ral::BoundCall>>> bind_routine_calls(
    const ir::LoweredRoutine& routine, const ir::Program& program, const hal::Device& device);

// One run of a routine's calls: its RAL execution context (seed, run number).
struct RoutineRun {
  std::shared_ptr<ral::Context> ral;
  uint64_t seed = 0;
  uint64_t run = 0;
  // Where collectives are traced, from their start to their end, on a track of their own beside
  // the stream's (Trace::Event::thread kCollectiveTrack + the stream's ordinal); null: not traced.
  std::shared_ptr<Trace> trace;
  std::string stream;
  int stream_ordinal = 0;
  // How a routine of one submission is submitted (hal::Placement); more submissions are queued.
  hal::Placement placement = hal::Placement::kQueued;
};
inline constexpr int kCollectiveTrack = 1000;

// Submits the steps in order: the first waits on `waits`, the last signals `signals`, and a
// semaphore of their own orders the steps between. A failing step fails the rest and `signals`
// with its status. No steps: a barrier.
Status submit_routine_steps(hal::Device& device, hal::Queue& queue, const hal::SemaphoreList& waits,
                            const hal::SemaphoreList& signals, const std::vector<RoutineStep>& steps,
                            const RoutineRun& run);

}  // namespace kiln::runtime
