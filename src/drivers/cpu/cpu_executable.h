// A native CPU executable: a loaded shared object and the kernel function of each export, and
// the compiler that builds them from C.
#pragma once

#include <memory>
#include <vector>

#include "drivers/cpu/cpu_compiler.h"
#include "drivers/cpu/host_executable.h"
#include "kiln/hal/executable.h"
#include "kiln/kernel_abi.h"

namespace kiln::cpu {

class CpuExecutable final : public HostExecutable {
 public:
  // NOT_FOUND when an export is missing from the object.
  static Result<std::shared_ptr<CpuExecutable>> load(const void* device_tag,
                                                      std::vector<hal::ExportInfo> exports,
                                                      std::shared_ptr<LoadedLibrary> library);
  int run_workgroup(uint32_t ordinal, const kiln_dispatch_state_t* state,
                    const kiln_workgroup_id_t* id) const override {
    return functions_[ordinal](state, id);
  }

  CpuExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
                std::shared_ptr<LoadedLibrary> library, std::vector<kiln_kernel_fn_t> functions)
      : HostExecutable(device_tag, std::move(exports)),
        library_(std::move(library)),
        functions_(std::move(functions)) {}

 private:
  std::shared_ptr<LoadedLibrary> library_;
  std::vector<kiln_kernel_fn_t> functions_;
};

// Format "c": C source through CpuCompiler.
class CCompiler final : public HostCompiler {
 public:
  explicit CCompiler(std::unique_ptr<CpuCompiler> compiler) : compiler_(std::move(compiler)) {}
  std::vector<std::string> formats() const override { return {"c"}; }
  Result<std::shared_ptr<HostExecutable>> compile(const hal::ExecutableSource& source,
                                                  const void* device_tag) override;
  const CpuCompiler& compiler() const { return *compiler_; }

 private:
  std::unique_ptr<CpuCompiler> compiler_;
};

}  // namespace kiln::cpu
