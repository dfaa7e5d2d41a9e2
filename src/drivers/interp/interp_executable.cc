#include "drivers/interp/interp_executable.h"

namespace kiln::interp {

int InterpExecutable::run_workgroup(uint32_t ordinal, const kiln_dispatch_state_t* state,
                                    const kiln_workgroup_id_t* id, int64_t* failure_value) const {
  // The queue validated the ordinal against the exports; this only guards the interpreter.
  if (ordinal >= kernels_.size()) return kMalformedKernel;
  return kernels_[ordinal].run_workgroup(state, id, failure_value);
}

}  // namespace kiln::interp
