#include "kiln/runtime/backend.h"

#include <algorithm>

#include "kiln/base/time.h"
#include "kiln/ral/context.h"
#include "runtime/device_array.h"
#include "runtime/scheduler.h"
#include "runtime/stream_state.h"

namespace kiln::runtime {

Result<std::shared_ptr<Backend>> Backend::create(hal::DeviceRef device, BackendOptions options) {
  if (!device) return invalid_argument_error("Backend::create: no device");
  std::shared_ptr<Backend> backend(new Backend(std::move(device), std::move(options)));
  backend->ral_ = std::make_shared<ral::Context>(backend->device_->info().driver);
  backend->ral_->set_host_device(backend->device_);
  return backend;
}

Backend::~Backend() {
  // Queued work may still use host memory the runtime owns (staging, host copies).
  for (const StreamRef& s : streams_) (void)s->await();
  // A stream's streaming merge source is an array whose home is a stream (possibly this one):
  // Stream → StreamState → DeviceArray → Stream would keep both alive forever. Nothing can use
  // them once the backend is gone (every context holds it); released outside the lock.
  std::vector<std::shared_ptr<DeviceArray>> sources;
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    for (const StreamRef& s : streams_) {
      StreamState& state = StreamInternals::state(*s);
      sources.push_back(std::move(state.merge_streaming_source));
      state.merge_streaming_source.reset();
      state.merge_node.clear();
    }
  }
}

Result<StreamRef> Backend::new_stream(std::string name) {
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, device_->create_queue(name));
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  const int ordinal = static_cast<int>(streams_.size());
  if (name.empty()) name = device_->info().name + "/s" + std::to_string(ordinal);
  auto stream = std::make_shared<Stream>(device_, std::move(queue), std::move(name), ordinal);
  StreamInternals::state(*stream).trace = options_.trace;
  streams_.push_back(stream);
  return stream;
}

std::vector<StreamRef> Backend::streams() const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return streams_;
}

Status Backend::await(Timeout timeout) const {
  Status first;
  for (const StreamRef& s : streams()) {
    Status status = s->await(timeout);
    if (first.ok() && !status.ok()) first = status;
  }
  return first;
}

bool Backend::is_idle() const {
  for (const StreamRef& s : streams()) {
    if (!s->is_idle()) return false;
  }
  return true;
}

Result<CodeRef> Backend::compile(const ir::Program& program, std::string_view routine,
                                 const CompileOptions& options) {
  const std::string name(routine);
  return compile_batch(program, {&name, 1}, options);
}

Result<ir::LoweredProgram> lower_traced(const ir::Program& program, const ir::LowerOptions& options, Trace* trace) {
  if (!trace) return ir::lower_program(program, options);
  ir::LowerOptions unoptimized = options;
  unoptimized.optimize = false;
  const int64_t begin_ns = now_ns();
  KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, ir::lower_program(program, unoptimized));
  const int64_t lowered_ns = now_ns();
  ir::optimize_lowered(lowered, options);
  size_t kernels = 0;
  for (const ir::LoweredRoutine& r : lowered.routines) kernels += r.kernels.size();
  const std::vector<std::pair<std::string, std::string>> args = {{"kernels", std::to_string(kernels)}};
  trace->record({"lowering", "compile", "compiler", Trace::kCompilerThread, begin_ns, lowered_ns, args});
  trace->record({"passes", "compile", "compiler", Trace::kCompilerThread, lowered_ns, now_ns(), args});
  return lowered;
}

Result<CodeRef> Backend::compile_batch(const ir::Program& program,
                                       std::span<const std::string> routines,
                                       const CompileOptions& options) {
  for (const std::string& r : routines) {
    if (!program.find_routine(r)) {
      return not_found_error("the program has no routine named '" + r + "'");
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, lower_traced(program, options.lower, options_.trace.get()));
  return compile_lowered(std::move(lowered), routines, options);
}

Result<CodeRef> Backend::compile_lowered(ir::LoweredProgram lowered,
                                         std::span<const std::string> routines,
                                         const CompileOptions& options) {
  std::shared_ptr<Code> code(new Code());
  code->lowered_.program = std::move(lowered.program);
  code->lowered_.trace_sites = std::move(lowered.trace_sites);
  for (const std::string& r : routines) {
    auto it = std::find_if(lowered.routines.begin(), lowered.routines.end(),
                           [&](const ir::LoweredRoutine& lr) { return lr.name == r; });
    if (it == lowered.routines.end()) {
      return not_found_error("the program has no routine named '" + r + "'");
    }
    // The code holds each routine once (its kernels are exports of one executable, whose names
    // must be unique); running a routine twice is the caller's schedule, not a second copy.
    const std::vector<ir::LoweredRoutine>& held = code->lowered_.routines;
    if (std::none_of(held.begin(), held.end(), [&](const ir::LoweredRoutine& lr) { return lr.name == r; })) {
      code->lowered_.routines.push_back(*it);
    }
  }
  code->shared_ = options.shared;
  code->compiled_by_ = this;
  // Shared code is built now, so that its errors surface here; other code at its first link.
  if (options.shared) KILN_RETURN_IF_ERROR(code->executable_for(device_, options_.trace.get()).status());
  return CodeRef(std::move(code));
}

Result<CodeRef> Backend::compile_kernels(const ir::Program& program, KernelSet kernels,
                                         const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(check_kernel_set(kernels, program));
  std::shared_ptr<Code> code(new Code());
  // The nodes alone: linking finds a binding's declaration there, as for compiled code.
  code->lowered_.program.file = program.file;
  code->lowered_.program.nodes = program.nodes;
  code->kernels_ = std::make_shared<const KernelSet>(std::move(kernels));
  code->shared_ = options.shared;
  code->compiled_by_ = this;
  // Built now, shared or not: an error in the caller's source belongs to this call, not to a
  // later link.
  KILN_RETURN_IF_ERROR(code->executable_for(device_, options_.trace.get()).status());
  return CodeRef(std::move(code));
}

Result<ContextRef> Backend::make_context(const StreamRef& stream, std::shared_ptr<NodeTable> nodes,
                                         std::string label) {
  if (!stream || !nodes) return invalid_argument_error("make_context: no stream or node table");
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) {
      return invalid_argument_error("stream '" + stream->name() + "' belongs to another backend");
    }
  }
  if (label.empty()) label = stream->name();
  return ContextRef(new Context(shared_from_this(), stream, std::move(nodes), nullptr, std::move(label)));
}

}  // namespace kiln::runtime
