// An executable of the `interp` device: one loop-IR kernel per export, run by the reference
// interpreter on the CPU device's worker threads.
#pragma once

#include <memory>
#include <vector>

#include "drivers/cpu/host_executable.h"
#include "drivers/interp/interpreter.h"

namespace kiln::interp {

class InterpExecutable final : public cpu::HostExecutable {
 public:
  // `kernels[i]` runs export i.
  InterpExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
                   std::vector<Interpreter> kernels)
      : HostExecutable(device_tag, std::move(exports)), kernels_(std::move(kernels)) {}

  int run_workgroup(uint32_t ordinal, const kiln_dispatch_state_t* state,
                    const kiln_workgroup_id_t* id, int64_t* failure_value) const override;

  const Interpreter& kernel(uint32_t ordinal) const { return kernels_[ordinal]; }

 private:
  std::vector<Interpreter> kernels_;
};

}  // namespace kiln::interp
