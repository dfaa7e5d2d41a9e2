// Memory modes requested by the user. A program's node has MemoryMode::kUnset unless the user
// asked for a mode; lowering then decides the rest (lower.h) and never overrides a request:
//  - kHosted / kOnDevice: the node keeps a device buffer (never inlined, never a local array);
//    kHosted on an intermediate lets the host read it after a run;
//  - kVirtual: the node is inlined into its reader, or lowering fails saying why it cannot be;
//  - kLocal: the node is a local array of one kernel, or lowering fails saying why not.
// Requests that cannot make sense are refused here, when made: inputs, outputs and params are
// always stored, kHosted or kOnDevice (which are the same for them: the host sets and reads them
// when it asks, and lowering makes them kHosted); a const cannot be local, nor virtual unless it
// has a plain value (which lowering folds into the code); kUnset is not a request; and a second
// request for a node that contradicts the first is refused (the first stands).
#pragma once

#include <string_view>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::ir {

// OK if `mode` may be requested for `node` as it stands (its role, and the mode it already has
// from an earlier request), else INVALID_ARGUMENT naming the node and the reason.
Status check_memory_mode_request(const TensorNode& node, MemoryMode mode);

// Records the request for the node named `node`: NOT_FOUND if there is none, INVALID_ARGUMENT
// (see check_memory_mode_request) for an inconsistent one, which leaves the program unchanged.
Status set_memory_mode(Program& program, std::string_view node, MemoryMode mode);

// Checks the memory modes already in a program (set directly, or by set_memory_mode) against the
// rules above, as lowering does before it starts: INVALID_ARGUMENT naming the first bad node.
Status check_memory_modes(const Program& program);

}  // namespace kiln::ir
