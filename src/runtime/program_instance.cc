#include "kiln/runtime/program_instance.h"

#include <algorithm>

#include "kiln/codegen/c_emitter.h"
#include "kiln/ir/sizes.h"
#include "kiln/runtime/code.h"
#include "kiln/ral/context.h"
#include "runtime/device_array.h"
#include "runtime/initial_value.h"
#include "runtime/routine_steps.h"

namespace kiln::runtime {

struct ProgramInstance::RoutineSteps {
  std::vector<RoutineStep> steps;
  uint64_t runs = 0;  // numbers the runs, for the random calls
};

Result<std::unique_ptr<ProgramInstance>> ProgramInstance::create(hal::DeviceRef device,
                                                                 const ir::Program& program,
                                                                 const ProgramOptions& options) {
  if (options.lower.trace_values) {
    return unimplemented_error("ProgramInstance does not trace values; run traced code through a Backend "
                               "with BackendOptions::value_trace");
  }
  std::unique_ptr<ProgramInstance> instance(new ProgramInstance());
  instance->device_ = device;
  KILN_ASSIGN_OR_RETURN(instance->lowered_, ir::lower_program(program, options.lower));
  const ir::LoweredProgram& lowered = instance->lowered_;

  KILN_ASSIGN_OR_RETURN(instance->executable_,
                        build_executable(lowered, device, &instance->source_));
  if (program.has_sizes()) {
    // Built for every size; the buffers, calls and host copies take the bound shapes.
    KILN_ASSIGN_OR_RETURN(instance->lowered_.program, ir::specialize_sizes(lowered.program, options.sizes));
  } else if (!options.sizes.empty()) {
    return invalid_argument_error("ProgramOptions::sizes: the program declares no sizes");
  }
  KILN_ASSIGN_OR_RETURN(instance->queue_, device->create_queue());
  instance->timeline_ = device->create_semaphore(0);

  // A routine's shared buffer (ir::LoweredRoutine::shared), a view of it per node it holds; then
  // a buffer per other stored node, initialized on the host and uploaded.
  const auto& nodes = lowered.program.nodes;
  instance->buffers_.resize(nodes.size());
  for (const ir::LoweredRoutine& r : lowered.routines) {
    if (r.shared.empty()) continue;
    std::vector<int64_t> bytes;
    for (const ir::SharedNode& n : r.shared) bytes.push_back(nodes[static_cast<size_t>(n.node)].byte_size());
    hal::BufferRef whole;
    Result<std::vector<hal::BufferRef>> views = shared_views(device->allocator(), r.shared, bytes, whole);
    if (!views.ok()) return views.status().annotate("allocating the shared buffer of routine '" + r.name + "'");
    for (size_t i = 0; i < r.shared.size(); ++i) {
      instance->buffers_[static_cast<size_t>(r.shared[i].node)] = std::move((*views)[i]);
      instance->shared_.insert(r.shared[i].node);
    }
  }
  for (const ir::TensorNode& node : nodes) {
    if (node.memory == ir::MemoryMode::kVirtual || node.memory == ir::MemoryMode::kLocal) continue;
    if (instance->shared_.count(node.id)) continue;
    const auto bytes = static_cast<size_t>(node.byte_size());
    Result<hal::BufferRef> buffer = device->allocator().allocate({}, bytes);
    if (!buffer.ok()) return buffer.status().annotate("allocating node '" + node.name + "'");
    instance->buffers_[node.id] = *buffer;
    HostBytes init;
    KILN_RETURN_IF_ERROR(fill_initial_value(node, options.seed, init));
    KILN_RETURN_IF_ERROR(instance->write(node.name, init.data(), init.size()));
  }

  // Per routine: its kernels in command buffers, a barrier between them, split at its calls.
  instance->ral_ = std::make_shared<ral::Context>(device->info().driver);
  instance->ral_->set_host_device(device);
  instance->seed_ = options.seed;
  uint32_t ordinal = 0;
  for (const ir::LoweredRoutine& r : lowered.routines) {
    const uint32_t first_ordinal = ordinal;
    ordinal += static_cast<uint32_t>(r.kernels.size());
    auto dispatch = [&](size_t i) -> Result<hal::DispatchCommand> {
      const ir::Kernel& k = r.kernels[i];
      hal::DispatchCommand d;
      d.executable = instance->executable_;
      d.export_ordinal = first_ordinal + static_cast<uint32_t>(i);
      d.workgroups = {dispatch_workgroups(k.size_count > 0 ? ir::kernel_at_sizes(k, options.sizes) : k,
                                          device->info().capabilities, options.max_workgroups), 1, 1};
      if (k.size_count > 0) d.constants = ir::size_constants(options.sizes);
      for (int node : k.nodes) d.bindings.push_back({instance->buffers_[node]});
      return d;
    };
    auto buffer = [&](int node) -> Result<hal::BufferRef> {
      if (!instance->buffers_[node]) return internal_error("a call passes node " + std::to_string(node) + ", which has no buffer");
      return instance->buffers_[node];
    };
    KILN_ASSIGN_OR_RETURN(auto calls, bind_routine_calls(r, lowered.program, *device));
    std::optional<CallKernels> call_kernels;
    if (calls_are_kernels(device->info(), program)) {
      const size_t index = static_cast<size_t>(&r - lowered.routines.data());
      call_kernels = CallKernels{instance->executable_, call_export_ordinal(lowered, index, 0),
                                 ir::size_constants(options.sizes)};
    }
    KILN_ASSIGN_OR_RETURN(std::vector<RoutineStep> steps,
                          make_routine_steps(*device, shape_of(r), calls, call_kernels, dispatch, buffer));
    instance->routines_[r.name] = std::make_shared<RoutineSteps>(RoutineSteps{std::move(steps), 0});
  }
  return instance;
}

Result<const ir::TensorNode*> ProgramInstance::stored_node(std::string_view name) const {
  const ir::TensorNode* node = lowered_.program.find_node(name);
  if (!node) return not_found_error("the program has no tensor named '" + std::string(name) + "'");
  if (shared_.count(node->id)) {
    return invalid_argument_error("tensor '" + std::string(name) + "' lives in its routine's shared buffer, where "
                                  "other intermediates overwrite it: the host neither reads nor writes it (lower "
                                  "with LowerOptions::shared_buffers off, or request it @device, to keep it)");
  }
  if (!buffers_[node->id]) {
    return invalid_argument_error("tensor '" + std::string(name) + "' is " +
                                  std::string(ir::memory_mode_name(node->memory)) +
                                  " and has no buffer to read or write");
  }
  return node;
}

Status ProgramInstance::submit_and_wait(
    const std::function<Status(const hal::SemaphoreList&, const hal::SemaphoreList&)>& op,
    Timeout timeout) {
  const uint64_t wait = timeline_value_, signal = ++timeline_value_;
  KILN_RETURN_IF_ERROR(op({{timeline_, wait}}, {{timeline_, signal}}));
  return timeline_->wait(signal, timeout);
}

Status ProgramInstance::write(std::string_view name, const void* data, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(const ir::TensorNode* node, stored_node(name));
  const hal::BufferRef& buffer = buffers_[node->id];
  if (bytes != buffer->byte_length()) {
    return invalid_argument_error("tensor '" + node->name + "' holds " +
                                  std::to_string(buffer->byte_length()) + " bytes, got " +
                                  std::to_string(bytes));
  }
  return submit_and_wait([&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
    return queue_->write(w, s, data, buffer, 0, bytes);
  }, Timeout::infinite());
}

Status ProgramInstance::read(std::string_view name, void* data, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(const ir::TensorNode* node, stored_node(name));
  const hal::BufferRef& buffer = buffers_[node->id];
  if (bytes != buffer->byte_length()) {
    return invalid_argument_error("tensor '" + node->name + "' holds " +
                                  std::to_string(buffer->byte_length()) + " bytes, asked for " +
                                  std::to_string(bytes));
  }
  return submit_and_wait([&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
    return queue_->read(w, s, buffer, 0, data, bytes);
  }, Timeout::infinite());
}

Status ProgramInstance::run(std::string_view routine, Timeout timeout) {
  auto it = routines_.find(routine);
  if (it == routines_.end()) {
    return not_found_error("the program has no routine named '" + std::string(routine) + "'");
  }
  RoutineRun run;
  run.ral = ral_;
  run.seed = seed_;
  run.run = it->second->runs++;
  return submit_and_wait([&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
    return submit_routine_steps(*device_, *queue_, w, s, it->second->steps, run);
  }, timeout);
}

}  // namespace kiln::runtime
