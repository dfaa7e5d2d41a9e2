// What the CPU driver's queues run: an executable whose workgroups execute on host threads, and
// the compiler that makes them. The native C path (CpuExecutable) and the reference interpreter
// (drivers/interp) are the two implementations; everything else of the CPU device is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/hal/executable.h"
#include "kiln/kernel_abi.h"

namespace kiln::cpu {

class HostExecutable : public hal::Executable {
 public:
  using hal::Executable::Executable;
  // Runs one workgroup of export `ordinal`; non-zero fails the dispatch with that code. A failed
  // check (ir::kFirstFailureCode + site, kiln/loop/loop.h) also sets `*failure_value` to the
  // value it reports. Called concurrently for different workgroups.
  virtual int run_workgroup(uint32_t ordinal, const kiln_dispatch_state_t* state,
                            const kiln_workgroup_id_t* id, int64_t* failure_value) const = 0;
};

class HostCompiler {
 public:
  virtual ~HostCompiler() = default;
  // The ExecutableSource formats it builds, e.g. {"c"}.
  virtual std::vector<std::string> formats() const = 0;
  virtual Result<std::shared_ptr<HostExecutable>> compile(const hal::ExecutableSource& source,
                                                          const void* device_tag) = 0;
};

}  // namespace kiln::cpu
