#include "kiln/runtime/routine.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string_view>

#include "kiln/codegen/c_emitter.h"
#include "kiln/ir/call.h"
#include "kiln/ir/sizes.h"
#include "kiln/runtime/backend.h"
#include "runtime/device_array.h"
#include "runtime/routine_steps.h"
#include "runtime/stream_state.h"
#include "runtime/transfer_internal.h"
#include "runtime/value_trace_steps.h"

namespace kiln::runtime {

Status Routine::run() const { return run_in(context_); }

// What run_in resolves once per context and then reuses (Context::prepared_): the routine's
// arrays there (arrays are added only to new child contexts and leave only when a context is
// finalized, which check_usable reports), and its steps recorded for one merge buffer.
struct PreparedRun {
  std::vector<ArrayAccess> accesses;    // each array once, reads_ and writes_ merged
  std::vector<DeviceArrayRef> arrays;   // accesses[i].array
  std::vector<std::string_view> names;  // accesses[i]'s node (in the routine's reads_ / writes_)
  // The arrays of a sized routine's shared buffer (ir::LoweredRoutine::shared, in its order),
  // laid out again when the sizes change; empty without one.
  std::vector<DeviceArray*> shared;
  hal::BufferRef merge;                 // the merge buffer `steps` bind, if the routine reads one
  std::optional<std::vector<RoutineStep>> steps;
  // A sized routine (Routine::sized_) at some sizes: the dispatches and the calls bound to the
  // tensors' shapes there. Working them out specializes the whole program (a few hundred µs), so
  // the plans of the last kSizedPlans sizes are kept: a program run at alternating sizes (a last,
  // smaller batch each epoch) works each out once.
  struct SizedPlan {
    std::vector<int64_t> sizes;
    std::vector<Routine::Dispatch> dispatches;
    std::vector<std::shared_ptr<const ral::BoundCall>> calls;
    std::optional<int64_t> call_multiply_adds = 0;  // of `calls`, where kiln knows them all
    std::optional<hal::Placement> placement;  // once steps were recorded at these sizes
  };
  static constexpr size_t kSizedPlans = 4;
  std::vector<SizedPlan> plans;  // the most recently used last
  // The table's size generation `steps` were recorded at, and the plan of its sizes (plans.back()).
  uint64_t size_generation = UINT64_MAX;
  // kCallerWhenReady for a routine of one command buffer of kernels whose work is below the
  // device's max_caller_stores: Routine::run then runs it on the caller's thread when its waits
  // are met (recorded with `steps`).
  hal::Placement placement = hal::Placement::kQueued;

  // Where a run may go (PreparedRun::placement): on the caller's thread for one command buffer of
  // the routine's own generated kernels and of calls whose work kiln knows (`call_multiply_adds`,
  // counted as a store per kMultiplyAddsPerStore; nullopt for a call it cannot bound), storing at
  // most the device's max_caller_stores in all. A batch-1 dense layer's product is such a call:
  // handing it to the queue's thread cost more than the product.
  static constexpr int64_t kMultiplyAddsPerStore = 16;  // one AVX-512 f32 fused multiply-add
  static hal::Placement placement_of(const std::vector<RoutineStep>& steps, const std::vector<Routine::Dispatch>& dispatches,
                                      const std::vector<int64_t>& sizes, const hal::DeviceCapabilities& caps,
                                      std::optional<int64_t> call_multiply_adds) {
    const auto* kernels = steps.size() == 1 ? std::get_if<KernelStep>(&steps.front()) : nullptr;
    if (!kernels || caps.max_caller_stores <= 0) return hal::Placement::kQueued;
    if (kernels->calls_runtime && !call_multiply_adds) return hal::Placement::kQueued;
    int64_t stores = kernels->calls_runtime ? *call_multiply_adds / kMultiplyAddsPerStore : 0;
    if (stores > caps.max_caller_stores) return hal::Placement::kQueued;
    for (const Routine::Dispatch& d : dispatches) {
      if (!d.kernel) return hal::Placement::kQueued;
      stores += d.kernel->size_count > 0 ? codegen::estimated_stores(ir::kernel_at_sizes(*d.kernel, sizes))
                                         : codegen::estimated_stores(*d.kernel);
      if (stores > caps.max_caller_stores) return hal::Placement::kQueued;
    }
    return hal::Placement::kCallerWhenReady;
  }
};

namespace {
std::atomic<uint64_t> next_routine_id{1};

// The multiply-adds of `calls` at `program`'s shapes, or nullopt where one's work is unknown.
std::optional<int64_t> multiply_adds_of(const std::vector<std::shared_ptr<const ral::BoundCall>>& calls,
                                        const ir::Program& program) {
  int64_t total = 0;
  for (const auto& call : calls) {
    std::optional<int64_t> work = call->multiply_adds(program);
    if (!work) return std::nullopt;
    total = *work > INT64_MAX - total ? INT64_MAX : total + *work;
  }
  return total;
}
}  // namespace

void forget_recorded_steps_locked(PreparedRun& run) { run.steps.reset(); }

Routine::Routine(std::string name, ContextRef context, CodeRef code, hal::ExecutableRef executable)
    : name_(std::move(name)),
      context_(std::move(context)),
      code_(std::move(code)),
      id_(next_routine_id.fetch_add(1, std::memory_order_relaxed)),
      executable_(std::move(executable)) {}

Result<std::shared_ptr<PreparedRun>> Routine::prepare(const ContextRef& context) const {
  auto prepared = std::make_shared<PreparedRun>();
  std::map<std::string_view, size_t> index;  // node → accesses[i]
  auto use = [&](const std::string& node, bool write) -> Status {
    auto it = index.find(node);
    if (it == index.end()) {
      KILN_ASSIGN_OR_RETURN(DeviceArrayRef array, context->find_array(node));
      it = index.emplace(node, prepared->accesses.size()).first;
      prepared->accesses.push_back({array.get(), false, false});
      prepared->arrays.push_back(std::move(array));
      prepared->names.push_back(node);
    }
    ArrayAccess& a = prepared->accesses[it->second];
    (write ? a.write : a.read) = true;
    return Status();
  };
  for (const std::string& node : reads_) KILN_RETURN_IF_ERROR(use(node, false));
  for (const std::string& node : writes_) KILN_RETURN_IF_ERROR(use(node, true));
  if (lowered_ && sized_) {  // laid out once at link where no shape names a size
    for (const ir::SharedNode& n : lowered_->shared) {
      auto it = index.find(code_->lowered().program.nodes[static_cast<size_t>(n.node)].name);
      // Every node of a shared buffer is one the routine touches; a context whose array of it
      // is not such a view (another code's) keeps its arrays as they are.
      if (it == index.end() || !prepared->arrays[it->second]->shared_whole) {
        prepared->shared.clear();
        break;
      }
      prepared->shared.push_back(prepared->arrays[it->second].get());
    }
  }
  return prepared;
}

Status Routine::use_plan_at(PreparedRun& prepared, const std::vector<int64_t>& values, const Context& context) const {
  auto known = std::find_if(prepared.plans.begin(), prepared.plans.end(),
                            [&](const PreparedRun::SizedPlan& p) { return p.sizes == values; });
  if (known != prepared.plans.end()) {
    std::rotate(known, known + 1, prepared.plans.end());
    return Status();
  }
  PreparedRun::SizedPlan plan;
  plan.sizes = values;
  const hal::Device& device = *context.stream()->device();
  const uint32_t fixed = context.backend().options().max_workgroups;
  plan.dispatches = dispatches_;
  for (Dispatch& d : plan.dispatches) {
    d.workgroups = {dispatch_workgroups(ir::kernel_at_sizes(*d.kernel, values), device.info().capabilities, fixed), 1, 1};
    d.constants = ir::size_constants(values);
  }
  if (lowered_ && !lowered_->calls.empty()) {
    // Calls take the tensors' shapes at these sizes: bound again.
    KILN_ASSIGN_OR_RETURN(ir::Program at, ir::specialize_sizes(code_->lowered().program, values));
    KILN_ASSIGN_OR_RETURN(plan.calls, bind_routine_calls(*lowered_, at, device));
    plan.call_multiply_adds = multiply_adds_of(plan.calls, at);
  }
  if (prepared.plans.size() == PreparedRun::kSizedPlans) prepared.plans.erase(prepared.plans.begin());
  prepared.plans.push_back(std::move(plan));
  return Status();
}

Status Routine::run_in(const ContextRef& context) const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  // Built only on a failure: the hot path allocates no message.
  auto where = [&] { return "running routine '" + name_ + "'"; };
  if (Status usable = context->check_usable(); !usable.ok()) return usable.annotate(where());
  Stream& stream = *context->stream();
  if (executable_ && executable_->device_tag() != stream.device()->tag()) {
    return invalid_argument_error(where() + ": it was linked for device '" +
                                  context_->stream()->device()->info().name +
                                  "' and cannot run with the arrays of context '" + context->label() +
                                  "' on device '" + stream.device()->info().name + "'");
  }
  std::shared_ptr<PreparedRun>& slot = context->prepared_[id_];
  if (!slot) {
    Result<std::shared_ptr<PreparedRun>> made = prepare(context);
    if (!made.ok()) {
      context->prepared_.erase(id_);
      return made.status().annotate(where());
    }
    slot = std::move(*made);
  }
  PreparedRun& prepared = *slot;
  NodeTable& table = *context->nodes();
  table.note_run();

  // At the table's sizes: arrays that fit them, and the dispatches' workgroups and constants.
  size_t merge_bytes = merge_bytes_;
  if (sized_) {
    const std::vector<int64_t>& values = table.size_values_locked();
    if (prepared.size_generation != table.size_generation_locked()) {
      const std::vector<std::string> names = table.size_names();
      std::string unbound;
      for (size_t s = 0; s < values.size(); ++s) {
        if (values[s] < 0 && std::find(sizes_.begin(), sizes_.end(), names[s]) != sizes_.end()) {
          unbound += (unbound.empty() ? "" : ", ") + names[s];
        }
      }
      if (!unbound.empty()) {
        const bool one = unbound.find(',') == std::string::npos;
        return failed_precondition_error(where() + (one ? ": size " : ": sizes ") + unbound + (one ? " is" : " are") +
                                         " not bound: give an input that names it, or set it (C++ NodeTable::set_sizes, "
                                         "C kiln_size_set, Python run(..., sizes={...}), kiln run --size)");
      }
      for (const DeviceArrayRef& array : prepared.arrays) {
        if (Status fit = fit_to_sizes_locked(*array, values, names); !fit.ok()) return fit.annotate(where());
      }
      if (!prepared.shared.empty()) {
        if (Status laid = lay_out_shared_locked(prepared.shared, lowered_->shared); !laid.ok()) return laid.annotate(where());
      }
      if (Status planned = use_plan_at(prepared, values, *context); !planned.ok()) return planned.annotate(where());
      prepared.size_generation = table.size_generation_locked();
      prepared.steps.reset();
    }
    if (!merge_node_.empty()) {
      if (Result<std::shared_ptr<Node>> node = table.find(merge_node_); node.ok()) merge_bytes = (*node)->desc().bytes;
    }
  }

  // The merge buffer must hold what the routine reads as `x.merge`.
  StreamState& state = StreamInternals::state(stream);
  hal::BufferRef merge;
  std::shared_ptr<DeviceArray> streaming;
  if (!merge_node_.empty()) {
    if (state.merge_node != merge_node_) {
      return failed_precondition_error(
          where() + ": it reads " + merge_node_ + ".merge, but the merge buffer of stream '" +
          stream.name() + "' holds " +
          (state.merge_node.empty() ? std::string("nothing") : "'" + state.merge_node + "'") +
          " (schedule device_to_device of '" + merge_node_ + "' into the merge buffer first)");
    }
    if (state.merge_streaming_source) {
      streaming = state.merge_streaming_source;
      merge = streaming->buffer;
    } else {
      merge = state.merge_buffer;
    }
    if (merge->byte_length() < merge_bytes) {
      return failed_precondition_error(where() + ": the merge buffer holds " +
                                       std::to_string(merge->byte_length()) + " bytes of '" +
                                       merge_node_ + "', which needs " + std::to_string(merge_bytes));
    }
  }

  // Arrays whose host copy is newer are uploaded first (automatic host transfers).
  if (context->nodes()->automatic_transfers()) {
    for (const ArrayAccess& a : prepared.accesses) {
      if (a.read && a.array->stale && a.array->node) {
        if (Status up = upload_locked(stream, *a.array).status(); !up.ok()) return up.annotate(where());
      }
    }
  }

  // A traced run: its run id, in a buffer of its own that its kernels bind (kiln/loop/loop.h,
  // "Value tracing"), and its own steps.
  const uint64_t run_number = runs_++;
  const std::shared_ptr<ValueTrace>& values = context->backend().options().value_trace;
  uint32_t trace_run = 0;
  hal::BufferRef trace_buffer;
  if (traced_) {
    // Its kernels print their lines: only into a capture, never onto the real standard output.
    if (!values || !values->active()) {
      return failed_precondition_error(where() + ": it was compiled with value tracing and the backend has " +
                                       (values ? "a ValueTrace that is stopped" : "no ValueTrace (BackendOptions::value_trace)"));
    }
    Result<hal::BufferRef> buffer = stream.device()->allocator().allocate({}, sizeof(int32_t));
    if (!buffer.ok()) return buffer.status().annotate(where());
    trace_buffer = std::move(*buffer);
    trace_run = values->begin_run(code_, &code_->lowered(), name_, stream.name(),
                                  stream.device()->info().name, run_number);
    const int32_t id = static_cast<int32_t>(trace_run);
    if (Status st = trace_buffer->write_data(0, &id, sizeof id); !st.ok()) return st.annotate(where());
    prepared.steps.reset();
  }

  // The steps, recorded on the first run in this context (and again when the merge buffer is
  // another one), then replayed.
  if (!prepared.steps || prepared.merge != merge) {
    auto array_of = [&](std::string_view node) -> DeviceArray* {
      for (size_t i = 0; i < prepared.names.size(); ++i) {
        if (prepared.names[i] == node) return prepared.accesses[i].array;
      }
      return nullptr;
    };
    auto dispatch = [&](size_t i) -> Result<hal::DispatchCommand> {
      const Dispatch& d = (sized_ ? prepared.plans.back().dispatches : dispatches_)[i];
      hal::DispatchCommand command;
      command.executable = executable_;
      command.export_ordinal = d.export_ordinal;
      command.workgroups = d.workgroups;
      command.constants = d.constants;
      for (size_t b = 0; b < d.bindings.size(); ++b) {
        if (static_cast<int>(b) == d.merge_binding) {
          command.bindings.push_back({merge});
          continue;
        }
        if (static_cast<int>(b) == d.trace_binding) {
          command.bindings.push_back({trace_buffer});
          continue;
        }
        // Lowering binds only nodes a kernel reads or writes; a binding outside them would be a
        // lowering bug, reported rather than thrown.
        DeviceArray* array = array_of(d.bindings[b]);
        if (!array) {
          return internal_error(where() + ": kernel " + std::to_string(i) + " binds '" + d.bindings[b] +
                                "', which the routine neither reads nor writes");
        }
        command.bindings.push_back({array->buffer});
      }
      return command;
    };
    const ir::Program& program = code_->lowered().program;
    auto call_buffer = [&](int node) -> Result<hal::BufferRef> {
      DeviceArray* array = array_of(program.nodes[node].name);
      if (!array) {
        return internal_error(where() + ": a call passes '" + program.nodes[node].name +
                              "', which the routine neither reads nor writes");
      }
      return array->buffer;
    };
    std::optional<CallKernels> call_kernels;
    // A traced run summarizes each call's tensors around it: its calls are host steps.
    if (first_call_ordinal_ && !traced_) {
      // Call kernels of a program with sizes read them, like the routine's kernels.
      call_kernels = CallKernels{executable_, *first_call_ordinal_,
                                 ir::size_constants(sized_ ? prepared.plans.back().sizes : code_->sizes())};
    }
    // Own kernels have no calls: their steps are the dispatches alone.
    const RoutineShape shape = lowered_ ? shape_of(*lowered_) : RoutineShape{name_, dispatches_.size(), {}};
    Result<std::vector<RoutineStep>> steps =
        make_routine_steps(*stream.device(), shape, sized_ ? prepared.plans.back().calls : calls_, call_kernels, dispatch, call_buffer);
    if (!steps.ok()) return steps.status().annotate(where());
    if (traced_ && lowered_) *steps = traced_steps(*steps, *lowered_, program, values, trace_run);
    prepared.steps = std::move(*steps);
    prepared.merge = merge;
    // The steps bind the arrays' buffers: an array given another one forgets them (bind_host).
    for (const DeviceArrayRef& array : prepared.arrays) {
      std::erase_if(array->recorded_by, [&](const std::weak_ptr<PreparedRun>& r) {
        return r.expired() || r.lock() == slot;
      });
      array->recorded_by.push_back(slot);
    }
    const hal::DeviceCapabilities& caps = stream.device()->info().capabilities;
    if (sized_) {
      // The same at the same sizes: estimating the kernels' stores at sizes takes a while too.
      PreparedRun::SizedPlan& plan = prepared.plans.back();
      if (!plan.placement) {
        plan.placement =
            PreparedRun::placement_of(*prepared.steps, plan.dispatches, plan.sizes, caps, plan.call_multiply_adds);
      }
      prepared.placement = *plan.placement;
    } else {
      prepared.placement = PreparedRun::placement_of(*prepared.steps, dispatches_, code_->sizes(), caps,
                                                     multiply_adds_of(calls_, code_->lowered().program));
    }
  }
  const RoutineRun run{context->backend().ral_context(), context->nodes()->seed(), run_number,
                       context->backend().options().trace, stream.name(), stream.ordinal(),
                       traced_ ? hal::Placement::kQueued : prepared.placement};

  std::span<const ArrayAccess> accesses = prepared.accesses;
  std::vector<ArrayAccess> with_streaming;
  if (streaming) {
    with_streaming.assign(accesses.begin(), accesses.end());
    with_streaming.push_back({streaming.get(), true, false});
    accesses = with_streaming;
  }
  const std::vector<RoutineStep>& steps = *prepared.steps;
  Result<StreamPoint> done = schedule(stream, accesses, {}, {name_, "routine", true},
                                      [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                        return submit_routine_steps(*stream.device(), *stream.queue(), w, s,
                                                                    steps, run);
                                      });
  if (!done.ok()) return done.status().annotate(where());
  for (size_t i = 0; i < prepared.accesses.size(); ++i) {
    const ArrayAccess& a = prepared.accesses[i];
    if (!a.write) continue;
    a.array->stale = false;
    a.array->newer = true;
    if (a.array->node) a.array->node->newer_on_device = prepared.arrays[i];
  }
  return Status();
}

}  // namespace kiln::runtime
