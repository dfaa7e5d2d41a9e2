#include "drivers/cpu/cpu_executable.h"

namespace kiln::cpu {

Result<std::shared_ptr<CpuExecutable>> CpuExecutable::load(const void* device_tag,
                                                           std::vector<hal::ExportInfo> exports,
                                                           std::shared_ptr<LoadedLibrary> library) {
  std::vector<kiln_kernel_fn_t> functions;
  for (const hal::ExportInfo& info : exports) {
    KILN_ASSIGN_OR_RETURN(void* symbol, library->symbol(info.name));
    functions.push_back(reinterpret_cast<kiln_kernel_fn_t>(symbol));
  }
  return std::make_shared<CpuExecutable>(device_tag, std::move(exports), std::move(library),
                                         std::move(functions));
}

}  // namespace kiln::cpu
