// Which stored intermediates of a routine share one buffer (LoweredRoutine::shared), and where.
//
// A node takes a place in its routine's shared buffer when
//  - it is a `tensor` whose mode nobody requested and that lowering stored (kOnDevice: neither
//    inlined nor a local array);
//  - that routine alone touches it (its statements, reads through inlined definitions, its
//    calls), never through a merge buffer;
//  - the first statement or call there that touches it overwrites it completely without reading
//    it (fully_overwritten; a call's output that is not also its argument), and something reads
//    it later: its value never outlives a run of the routine, so neither a later run nor the
//    host could tell shared memory from a buffer of its own (which the host never sees either).
// Its lifetime is the span of the lowered routine's actions (kernels and calls, in the order
// they run) from the first that touches it to the last (ir::SharedNode); where it lies in the
// buffer, ir::layout_shared_buffer decides from the nodes' sizes. A plan where no two nodes'
// lifetimes are apart (nothing to share) is none.
#pragma once

#include <vector>

#include "kiln/loop/loop.h"
#include "loop/local_arrays.h"

namespace kiln::ir::lowering {

// `requested`: the program as written (its memory modes are the user's requests); `decided`: the
// same nodes with the modes lowering gave them. `plans` and `uses` as for local arrays
// (local_arrays.h); `lowered` is plan `routine`'s lowered form.
std::vector<SharedNode> plan_shared_buffer(const Program& requested, const Program& decided,
                                           const std::vector<RoutinePlan>& plans, const NodeUses& uses, size_t routine,
                                           const LoweredRoutine& lowered);

}  // namespace kiln::ir::lowering
