#include "kiln/runtime/routine.h"

#include <map>

#include "kiln/runtime/backend.h"
#include "runtime/routine_steps.h"
#include "runtime/stream_state.h"
#include "runtime/transfer_internal.h"

namespace kiln::runtime {

Status Routine::run() const { return run_in(context_); }

Status Routine::run_in(const ContextRef& context) const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  const std::string where = "running routine '" + name_ + "'";
  KILN_RETURN_IF_ERROR(context->check_usable().annotate(where));
  Stream& stream = *context->stream();
  if (executable_ && executable_->device_tag() != stream.device()->tag()) {
    return invalid_argument_error(where + ": it was linked for device '" +
                                  context_->stream()->device()->info().name +
                                  "' and cannot run with the arrays of context '" + context->label() +
                                  "' on device '" + stream.device()->info().name + "'");
  }

  // Each array once, with how the routine uses it.
  std::map<std::string, ArrayAccess, std::less<>> accesses;
  std::map<std::string, std::shared_ptr<DeviceArray>, std::less<>> arrays;
  auto use = [&](const std::string& node, bool write) -> Status {
    auto it = arrays.find(node);
    if (it == arrays.end()) {
      Result<std::shared_ptr<DeviceArray>> array = context->find_array(node);
      if (!array.ok()) return array.status().annotate(where);
      it = arrays.emplace(node, *array).first;
    }
    ArrayAccess& a = accesses[node];
    a.array = it->second.get();
    (write ? a.write : a.read) = true;
    return Status();
  };
  for (const std::string& node : reads_) KILN_RETURN_IF_ERROR(use(node, false));
  for (const std::string& node : writes_) KILN_RETURN_IF_ERROR(use(node, true));

  // The merge buffer must hold what the routine reads as `x.merge`.
  StreamState& state = stream.state();
  hal::BufferRef merge;
  std::shared_ptr<DeviceArray> streaming;
  if (!merge_node_.empty()) {
    if (state.merge_node != merge_node_) {
      return failed_precondition_error(
          where + ": it reads " + merge_node_ + ".merge, but the merge buffer of stream '" +
          stream.name() + "' holds " +
          (state.merge_node.empty() ? std::string("nothing") : "'" + state.merge_node + "'") +
          " (schedule device_to_device of '" + merge_node_ + "' into the merge buffer first)");
    }
    const size_t bytes = merge_bytes_;
    if (state.merge_streaming_source) {
      streaming = state.merge_streaming_source;
      merge = streaming->buffer;
    } else {
      merge = state.merge_buffer;
    }
    if (merge->byte_length() < bytes) {
      return failed_precondition_error(where + ": the merge buffer holds " +
                                       std::to_string(merge->byte_length()) + " bytes of '" +
                                       merge_node_ + "', which needs " + std::to_string(bytes));
    }
  }

  // Arrays whose host copy is newer are uploaded first (automatic host transfers).
  if (context->nodes()->automatic_transfers()) {
    for (auto& [node, a] : accesses) {
      if (a.read && a.array->stale && a.array->node) {
        KILN_RETURN_IF_ERROR(upload_locked(stream, *a.array).status().annotate(where));
      }
    }
  }

  auto dispatch = [&](size_t i) -> Result<hal::DispatchCommand> {
    const Dispatch& d = dispatches_[i];
    hal::DispatchCommand command;
    command.executable = executable_;
    command.export_ordinal = d.export_ordinal;
    command.workgroups = {d.workgroups, 1, 1};
    for (size_t b = 0; b < d.bindings.size(); ++b) {
      if (static_cast<int>(b) == d.merge_binding) {
        command.bindings.push_back({merge});
        continue;
      }
      // Lowering binds only nodes a kernel reads or writes; a binding outside them would be a
      // lowering bug, reported rather than thrown.
      auto array = arrays.find(d.bindings[b]);
      if (array == arrays.end()) {
        return internal_error(where + ": kernel " + std::to_string(i) + " binds '" + d.bindings[b] +
                              "', which the routine neither reads nor writes");
      }
      command.bindings.push_back({array->second->buffer});
    }
    return command;
  };
  const ir::Program& program = code_->lowered().program;
  auto call_buffer = [&](int node) -> Result<hal::BufferRef> {
    auto array = arrays.find(program.nodes[node].name);
    if (array == arrays.end()) {
      return internal_error(where + ": a call passes '" + program.nodes[node].name +
                            "', which the routine neither reads nor writes");
    }
    return array->second->buffer;
  };
  std::optional<CallKernels> call_kernels;
  if (first_call_ordinal_) call_kernels = CallKernels{executable_, *first_call_ordinal_};
  Result<std::vector<RoutineStep>> steps =
      make_routine_steps(*stream.device(), *lowered_, calls_, call_kernels, dispatch, call_buffer);
  if (!steps.ok()) return steps.status().annotate(where);
  const RoutineRun run{context->backend().ral_context(), context->nodes()->seed(), runs_++};

  std::vector<ArrayAccess> list;
  for (auto& [node, a] : accesses) list.push_back(a);
  if (streaming) list.push_back({streaming.get(), true, false});
  Result<StreamPoint> done = schedule(stream, list, {}, {name_, "routine", true},
                                      [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                        return submit_routine_steps(*stream.device(), *stream.queue(), w, s,
                                                                    *steps, run);
                                      });
  if (!done.ok()) return done.status().annotate(where);
  for (auto& [node, a] : accesses) {
    if (!a.write) continue;
    a.array->stale = false;
    a.array->newer = true;
    if (a.array->node) a.array->node->newer_on_device = arrays.find(node)->second;  // `use` added it
  }
  return Status();
}

}  // namespace kiln::runtime
