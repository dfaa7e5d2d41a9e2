#include "kiln/runtime/code.h"

#include <algorithm>

#include "kiln/codegen/c_emitter.h"

namespace kiln::runtime {

Result<std::string> generate_source(const ir::LoweredProgram& lowered,
                                    const hal::DeviceCapabilities& capabilities, std::string* format) {
  std::vector<ir::Kernel> kernels;
  for (const ir::LoweredRoutine& r : lowered.routines) {
    kernels.insert(kernels.end(), r.kernels.begin(), r.kernels.end());
  }
  const auto& formats = capabilities.executable_formats;
  auto supports = [&](const char* f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  if (supports("c")) {
    *format = "c";
    return codegen::emit_kernels(kernels, &lowered.program, {});
  }
  if (supports("opencl-c")) {
    *format = "opencl-c";
    return codegen::emit_kernels(kernels, &lowered.program, {codegen::Dialect::kOpenCL});
  }
  if (supports("kiln-loop")) {
    *format = "kiln-loop";
    std::string text;
    for (const ir::Kernel& k : kernels) text += ir::print_kernel(k, &lowered.program) + "\n";
    return text;
  }
  return unimplemented_error("the device builds none of the formats kiln generates (c, opencl-c, kiln-loop)");
}

std::vector<std::string> Code::routine_names() const {
  std::vector<std::string> names;
  for (const ir::LoweredRoutine& r : lowered_.routines) names.push_back(r.name);
  return names;
}

Result<std::string> Code::source_for(const hal::DeviceRef& device) const {
  std::string format;
  return generate_source(lowered_, device->info().capabilities, &format);
}

Result<hal::ExecutableRef> Code::executable_for(const hal::DeviceRef& device) {
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
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, build_executable(lowered_, device));
  executables_.emplace_back(device, executable);
  return executable;
}

Result<hal::ExecutableRef> build_executable(const ir::LoweredProgram& lowered,
                                            const hal::DeviceRef& device, std::string* source_out) {
  std::string format;
  KILN_ASSIGN_OR_RETURN(std::string text, generate_source(
                                              lowered, device->info().capabilities, &format));
  hal::ExecutableSource source{format, std::move(text), {},
                               lowered.program.file.empty() ? "program" : lowered.program.file};
  for (const ir::LoweredRoutine& r : lowered.routines) {
    for (const ir::Kernel& k : r.kernels) {
      source.exports.push_back({k.name, static_cast<uint32_t>(k.nodes.size()), 0});
    }
  }
  if (source_out) *source_out = source.source;
  if (source.exports.empty()) return hal::ExecutableRef();
  return device->compile_executable(source);
}

}  // namespace kiln::runtime
