// A native CPU executable: a loaded shared object and the kernel function of each export, and
// the compiler that builds them from C.
#pragma once

#include <memory>
#include <vector>

#include "drivers/cpu/cpu_compiler.h"
#include "drivers/cpu/host_executable.h"
#include "kiln/hal/executable.h"
#include "kiln/kernel_abi.h"
#include "kiln/loop/loop.h"

namespace kiln::cpu {

class CpuExecutable final : public HostExecutable {
 public:
  // NOT_FOUND when an export is missing from the object.
  static Result<std::shared_ptr<CpuExecutable>> load(const void* device_tag,
                                                      std::vector<hal::ExportInfo> exports,
                                                      std::shared_ptr<LoadedLibrary> library);
  int run_workgroup(uint32_t ordinal, const kiln_dispatch_state_t* state,
                    const kiln_workgroup_id_t* id, int64_t* failure_value) const override {
    const int code = functions_[ordinal](state, id);
    // The generated code keeps the value of the calling thread's failed check (codegen's C dialect).
    if (code >= ir::kFirstFailureCode && failure_value_) *failure_value = failure_value_();
    return code;
  }

  using FailureValueFn = int64_t (*)(void);
  CpuExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
                std::shared_ptr<LoadedLibrary> library, std::vector<kiln_kernel_fn_t> functions,
                FailureValueFn failure_value = nullptr)
      : HostExecutable(device_tag, std::move(exports)),
        library_(std::move(library)),
        functions_(std::move(functions)),
        failure_value_(failure_value) {}

 private:
  std::shared_ptr<LoadedLibrary> library_;
  std::vector<kiln_kernel_fn_t> functions_;
  FailureValueFn failure_value_;  // `kiln_failure_value` of an object whose kernels check
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
