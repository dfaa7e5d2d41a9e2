#include "drivers/cpu/cpu_executable.h"

#include <cctype>

namespace kiln::cpu {

Result<std::shared_ptr<CpuExecutable>> CpuExecutable::load(const void* device_tag,
                                                           std::vector<hal::ExportInfo> exports,
                                                           std::shared_ptr<LoadedLibrary> library) {
  std::vector<kiln_kernel_fn_t> functions;
  bool checks = false;
  for (const hal::ExportInfo& info : exports) {
    KILN_ASSIGN_OR_RETURN(void* symbol, library->symbol(info.name));
    functions.push_back(reinterpret_cast<kiln_kernel_fn_t>(symbol));
    checks = checks || !info.failures.empty();
  }
  FailureValueFn failure_value = nullptr;
  if (checks) {
    KILN_ASSIGN_OR_RETURN(void* symbol, library->symbol("kiln_failure_value"));
    failure_value = reinterpret_cast<FailureValueFn>(symbol);
  }
  return std::make_shared<CpuExecutable>(device_tag, std::move(exports), std::move(library),
                                         std::move(functions), failure_value);
}

Result<std::shared_ptr<HostExecutable>> CCompiler::compile(const hal::ExecutableSource& source,
                                                          const void* device_tag) {
  for (const hal::ExportInfo& info : source.exports) {
    bool identifier = !info.name.empty() && !std::isdigit(static_cast<unsigned char>(info.name[0]));
    for (char c : info.name) {
      identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    }
    if (!identifier) {
      return invalid_argument_error("executable '" + source.label + "': export name '" +
                                    info.name + "' is not a C identifier");
    }
  }
  std::vector<hal::BuildStep> steps;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedLibrary> library,
                        compiler_->build(source.source, source.label, &steps));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CpuExecutable> executable,
                        CpuExecutable::load(device_tag, source.exports, std::move(library)));
  executable->set_build_steps(std::move(steps));
  return std::shared_ptr<HostExecutable>(std::move(executable));
}

}  // namespace kiln::cpu
