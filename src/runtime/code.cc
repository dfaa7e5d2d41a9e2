#include "kiln/runtime/code.h"

#include <algorithm>
#include <cstdio>

#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/codegen/call_kernel.h"
#include "kiln/ir/sizes.h"
#include "kiln/ral/bound_call.h"
#include "kiln/runtime/trace.h"

namespace kiln::runtime {

namespace {

bool builds(const hal::DeviceInfo& device, const char* format) {
  const auto& formats = device.capabilities.executable_formats;
  return std::find(formats.begin(), formats.end(), format) != formats.end();
}

// For a program with sizes, what its calls are described against: every size at a stand-in value
// (large, so that the calls' checks of their shapes pass wherever some size would), whose sized
// dimensions the call kernels then read from the dispatch instead. An error where the program
// cannot take it (a tensor too large), and then its calls are host actions.
constexpr int64_t kCallSizeStandIn = int64_t{1} << 20;

Result<ir::Program> at_call_stand_in(const ir::Program& program) {
  return ir::specialize_sizes(program, std::vector<int64_t>(program.sizes.size(), kCallSizeStandIn));
}

// The call kernels of every routine, in call_export_ordinal order.
Result<std::vector<codegen::CallKernel>> call_kernels(const ir::LoweredProgram& lowered,
                                                      const hal::DeviceInfo& device) {
  std::vector<codegen::CallKernel> kernels;
  if (!builds(device, "c")) return kernels;
  const bool sized = lowered.program.has_sizes();
  const Result<ir::Program> stand_in = sized ? at_call_stand_in(lowered.program) : Result<ir::Program>(ir::Program{});
  if (!stand_in.ok()) return kernels;  // calls_are_kernels says no
  const ir::Program& described_at = sized ? *stand_in : lowered.program;
  for (size_t r = 0; r < lowered.routines.size(); ++r) {
    const ir::LoweredRoutine& routine = lowered.routines[r];
    for (size_t c = 0; c < routine.calls.size(); ++c) {
      const ir::LoweredCall& call = routine.calls[c];
      KILN_ASSIGN_OR_RETURN(ral::BoundCall described,
                            ral::BoundCall::describe(call.call, described_at, call.call_site, device.driver));
      codegen::CallKernel kernel = described.kernel("kiln_call_" + std::to_string(r) + "_" + std::to_string(c));
      // Dimensions that are sizes: read when the kernel runs.
      kernel.size_count = static_cast<int>(lowered.program.sizes.size());
      const std::vector<int>& tensors = described.tensors();
      for (size_t t = 0; t < tensors.size() && t < kernel.tensors.size(); ++t) {
        const ir::TensorNode& node = lowered.program.nodes[static_cast<size_t>(tensors[t])];
        if (!node.is_sized() || kernel.tensors[t].sizes.size() != node.sized_dims.size()) continue;
        kernel.tensors[t].sized.resize(node.sized_dims.size());
        for (size_t d = 0; d < node.sized_dims.size(); ++d) {
          if (!node.sized_dims[d].is_constant()) kernel.tensors[t].sized[d] = node.sized_dims[d];
        }
      }
      kernels.push_back(std::move(kernel));
    }
  }
  return kernels;
}

}  // namespace

bool calls_are_kernels(const hal::DeviceInfo& device, const ir::Program& compiled) {
  return builds(device, "c") && (!compiled.has_sizes() || at_call_stand_in(compiled).ok());
}

uint32_t call_export_ordinal(const ir::LoweredProgram& lowered, size_t routine, size_t call) {
  size_t ordinal = call;
  for (const ir::LoweredRoutine& r : lowered.routines) ordinal += r.kernels.size();
  for (size_t i = 0; i < routine; ++i) ordinal += lowered.routines[i].calls.size();
  return static_cast<uint32_t>(ordinal);
}

Result<std::string> generate_source(const ir::LoweredProgram& lowered, const hal::DeviceInfo& device,
                                    std::string* format) {
  std::vector<ir::Kernel> kernels;
  for (const ir::LoweredRoutine& r : lowered.routines) {
    kernels.insert(kernels.end(), r.kernels.begin(), r.kernels.end());
  }
  if (builds(device, "c")) {
    *format = "c";
    KILN_ASSIGN_OR_RETURN(std::string text, codegen::emit_kernels(kernels, &lowered.program, {}));
    KILN_ASSIGN_OR_RETURN(std::vector<codegen::CallKernel> calls, call_kernels(lowered, device));
    KILN_ASSIGN_OR_RETURN(std::string call_text, codegen::emit_call_kernels(calls));
    return text + call_text;
  }
  if (builds(device, "opencl-c")) {
    *format = "opencl-c";
    return codegen::emit_kernels(kernels, &lowered.program, {codegen::Dialect::kOpenCL});
  }
  if (builds(device, "cuda-c")) {
    *format = "cuda-c";
    return codegen::emit_kernels(kernels, &lowered.program, {codegen::Dialect::kCuda});
  }
  if (builds(device, "kiln-loop")) {
    *format = "kiln-loop";
    std::string text;
    for (const ir::Kernel& k : kernels) text += ir::print_kernel(k, &lowered.program) + "\n";
    return text;
  }
  return unimplemented_error("the device builds none of the formats kiln generates (c, opencl-c, cuda-c, kiln-loop)");
}

std::vector<std::string> Code::routine_names() const {
  std::vector<std::string> names;
  if (kernels_) {
    for (const KernelRoutine& r : kernels_->routines) names.push_back(r.name);
  }
  for (const ir::LoweredRoutine& r : lowered_.routines) names.push_back(r.name);
  return names;
}

Result<std::shared_ptr<Code>> Code::at_sizes(const std::shared_ptr<Code>& general, std::vector<int64_t> values) {
  if (!general || general->general_ || !general->lowered_.program.has_sizes()) {
    return invalid_argument_error("binding sizes: the code's program declares no sizes");
  }
  KILN_ASSIGN_OR_RETURN(ir::Program program, ir::specialize_sizes(general->lowered_.program, values));
  std::shared_ptr<Code> code(new Code());
  code->lowered_.program = std::move(program);
  code->lowered_.routines = general->lowered_.routines;
  code->lowered_.trace_sites = general->lowered_.trace_sites;
  code->shared_ = general->shared_;
  code->compiled_by_ = general->compiled_by_;
  code->general_ = general;
  code->sizes_ = std::move(values);
  return code;
}

Result<std::string> Code::source_for(const hal::DeviceRef& device) const {
  if (general_) return general_->source_for(device);
  if (kernels_) return kernels_->source.source;
  std::string format;
  return generate_source(lowered_, device->info(), &format);
}

namespace {

// A build of `executable` for the device `device_name`, from `begin_ns` to now, as a trace event
// with the driver's steps as its arguments.
void record_build(Trace& trace, const hal::Executable& executable, const std::string& device_name, int64_t begin_ns) {
  Trace::Event event{"compile for " + device_name, "compile", "compiler", Trace::kCompilerThread,
                     begin_ns, now_ns(), {}};
  char seconds[32];
  for (const hal::BuildStep& step : executable.build_steps()) {
    std::snprintf(seconds, sizeof seconds, "%.3f s", step.seconds);
    event.args.emplace_back(step.what, seconds);
  }
  trace.record(std::move(event));
}

}  // namespace

Result<hal::ExecutableRef> Code::executable_for(const hal::DeviceRef& device, Trace* trace) {
  if (general_) return general_->executable_for(device, trace);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = executables_.begin(); it != executables_.end();) {
    std::shared_ptr<hal::Device> d = it->first.lock();
    if (!d) {
      it = executables_.erase(it);
      continue;
    }
    if (d == device) return it->second;
    ++it;
  }
  // The caller's source is built as it is: the driver's errors (a format the device does not
  // build, a compile error with the compiler's output) reach the caller unchanged but for where.
  const int64_t begin_ns = now_ns();
  Result<hal::ExecutableRef> built =
      kernels_ ? device->compile_executable(kernels_->source) : build_executable(lowered_, device);
  if (trace && built.ok()) record_build(*trace, **built, device->info().name, begin_ns);
  if (!built.ok()) {
    if (!kernels_) return built.status();
    return built.status().annotate("compiling the kernels of '" + kernels_->source.label + "' for device '" +
                                   device->info().name + "'");
  }
  executables_.emplace_back(device, *built);
  return *built;
}

Result<hal::ExecutableRef> build_executable(const ir::LoweredProgram& lowered,
                                            const hal::DeviceRef& device, std::string* source_out) {
  std::string format;
  KILN_ASSIGN_OR_RETURN(std::string text, generate_source(lowered, device->info(), &format));
  hal::ExecutableSource source{format, std::move(text), {},
                               lowered.program.file.empty() ? "program" : lowered.program.file};
  for (const ir::LoweredRoutine& r : lowered.routines) {
    for (const ir::Kernel& k : r.kernels) {
      // The emitter writes every kernel for any local size (codegen/dialect.h, work items).
      hal::ExportInfo info{k.name, static_cast<uint32_t>(k.nodes.size()), 2 * static_cast<uint32_t>(k.size_count), true};
      for (int node : k.nodes) {
        info.binding_alignment.push_back(static_cast<uint32_t>(ir::dtype_size(lowered.program.nodes[node].dtype)));
        info.binding_min_bytes.push_back(codegen::binding_min_bytes(lowered.program.nodes[node]));
      }
      info.failures = ir::failure_messages(k);  // what its failed checks report (check_bounds)
      // Its kernel fails only through those checks and the entry check of the bindings' sizes:
      // the emitter's kernels allocate nothing where a status slot reports failures.
      info.may_fail = !info.failures.empty();
      source.exports.push_back(std::move(info));
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<codegen::CallKernel> calls, call_kernels(lowered, device->info()));
  for (const codegen::CallKernel& k : calls) {
    source.exports.push_back({k.name, static_cast<uint32_t>(k.tensors.size()), 2 * static_cast<uint32_t>(k.size_count)});
  }
  if (source_out) *source_out = source.source;
  if (source.exports.empty()) return hal::ExecutableRef();
  return device->compile_executable(source);
}

}  // namespace kiln::runtime
