// Routine: compiled code, or a caller's own kernels (kiln/runtime/kernel_set.h), linked into a
// context: what runs on the context's stream.
//
// run() schedules it and returns at once: the routine waits (through HAL semaphores, without
// blocking the host) for the last writers of the nodes it reads and for the readers of the
// nodes it writes on other streams, and for its stream's previous work. With automatic host
// transfers on, arrays whose host copy is newer are uploaded first. A routine reading `x.merge`
// checks, when scheduled, that its stream's merge buffer holds x (FAILED_PRECONDITION if not).
// A routine whose work is smaller than a hand-off to the queue's thread (the device's
// max_caller_stores) and whose waits are already met runs on the calling thread before run()
// returns; its failure still comes back through the stream, as for any run.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/command.h"
#include "kiln/runtime/code.h"
#include "kiln/runtime/context.h"

namespace kiln::ral {
class BoundCall;
}

namespace kiln::runtime {

class Routine {
 public:
  const std::string& name() const { return name_; }
  const ContextRef& context() const { return context_; }
  const std::vector<std::string>& reads() const { return reads_; }
  const std::vector<std::string>& writes() const { return writes_; }
  // The sizes (language version 2) its run depends on, in declaration order: those its tensors'
  // dimensions name and those its kernels read. Only these must be bound when it runs; a routine
  // of a program with sizes that depends on none runs while they are unbound.
  const std::vector<std::string>& sizes() const { return sizes_; }
  // The node whose merge buffer copy it reads (`x` for `x.merge`); empty if none.
  const std::string& merge_node() const { return merge_node_; }

  // Schedules it on its context's stream.
  Status run() const;
  // Schedules it on `context`'s stream with that context tree's arrays (e.g. a sibling context
  // on another stream that linked the same code). INVALID_ARGUMENT for a context on another
  // device; NOT_FOUND when that tree lacks one of its nodes.
  Status run_in(const ContextRef& context) const;

 private:
  friend class Backend;
  friend struct PreparedRun;
  Routine(std::string name, ContextRef context, CodeRef code, hal::ExecutableRef executable);

  // One kernel: its export, workgroup count, push constants, and for each binding the node name
  // (or the merge buffer, when merge_binding is that binding's index).
  struct Dispatch {
    uint32_t export_ordinal = 0;
    std::array<uint32_t, 3> workgroups = {1, 1, 1};
    std::vector<uint32_t> constants;
    std::vector<std::string> bindings;
    int merge_binding = -1;
    int trace_binding = -1;  // the binding of the run id (ir::kTraceRunNode), if traced
    const ir::Kernel* kernel = nullptr;  // in code_; null for own kernels
  };

  // The routine's arrays in `context`, for Context::prepared_; under the scheduling mutex.
  Result<std::shared_ptr<PreparedRun>> prepare(const ContextRef& context) const;
  // Makes `prepared`'s plan at the sizes `values` its last (kept, or worked out: the dispatches'
  // workgroups and the calls bound at those shapes); under the scheduling mutex.
  Status use_plan_at(PreparedRun& prepared, const std::vector<int64_t>& values, const Context& context) const;

  std::string name_;
  ContextRef context_;
  CodeRef code_;
  const ir::LoweredRoutine* lowered_ = nullptr;  // in code_; null for own kernels
  std::vector<std::shared_ptr<const ral::BoundCall>> calls_;  // bound for the device
  // Where the calls are kernels of executable_ (calls_are_kernels): the export of the first.
  std::optional<uint32_t> first_call_ordinal_;
  // Keys Context::prepared_; never reused within a process. What a routine prepared stays with
  // the context until it is finalized or destroyed (a Routine can be destroyed under the
  // scheduling mutex, when linking fails, so its destructor cannot take it).
  const uint64_t id_;
  mutable std::atomic<uint64_t> runs_{0};  // numbers the runs, for the random calls
  hal::ExecutableRef executable_;
  std::vector<Dispatch> dispatches_;
  std::vector<std::string> reads_;   // sorted, merge buffer excluded
  std::vector<std::string> writes_;  // sorted
  std::vector<std::string> sizes_;   // see sizes()
  std::string merge_node_;
  bool traced_ = false;  // compiled with value tracing: each run gets a run id
  // Its program has sizes bound when it runs (the table's): the dispatches' workgroups and
  // constants are computed per run from the sizes (PreparedRun), and arrays fit them.
  bool sized_ = false;
  size_t merge_bytes_ = 0;
};

using RoutineRef = std::shared_ptr<Routine>;

}  // namespace kiln::runtime
