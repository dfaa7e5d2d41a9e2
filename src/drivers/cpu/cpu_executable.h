// A CPU executable: a loaded shared object and the kernel function of each export.
#pragma once

#include <memory>
#include <vector>

#include "drivers/cpu/cpu_compiler.h"
#include "kiln/hal/executable.h"
#include "kiln/kernel_abi.h"

namespace kiln::cpu {

class CpuExecutable final : public hal::Executable {
 public:
  // NOT_FOUND when an export is missing from the object.
  static Result<std::shared_ptr<CpuExecutable>> load(const void* device_tag,
                                                      std::vector<hal::ExportInfo> exports,
                                                      std::shared_ptr<LoadedLibrary> library);
  kiln_kernel_fn_t function(uint32_t ordinal) const { return functions_[ordinal]; }

  CpuExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
                std::shared_ptr<LoadedLibrary> library, std::vector<kiln_kernel_fn_t> functions)
      : Executable(device_tag, std::move(exports)),
        library_(std::move(library)),
        functions_(std::move(functions)) {}

 private:
  std::shared_ptr<LoadedLibrary> library_;
  std::vector<kiln_kernel_fn_t> functions_;
};

}  // namespace kiln::cpu
