// Which statements of a routine run together in one kernel, and over which loop that kernel is
// parallel.
//
// A kernel is parallel over the leading k dimensions of its statements' targets, collapsed into
// one loop (extent = their product; lowering recovers each index with / and %). Alone, a
// statement collapses leading dimensions while the extent is below kMinParallelExtent, so that a
// batch of 1 or 2 (conv2d, maxpool) still spreads over workgroups.
//
// Consecutive statements fuse into one kernel `(for p E parallel (block s1 s2 ...))` when it
// gives the same results as running them one after another: their targets agree in the leading
// k dimensions, none of them needs a snapshot of its target (a read of the target elsewhere than
// the point written), and every access in the group (reads, reduction reads, inlined reads and
// writes) to a node that some statement of the group writes uses the parallel target indices as
// its first k subscripts. Then iteration p of the parallel loop touches only row p of the nodes
// the group writes, so running the statements row by row reads exactly what running them one
// after another would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loop/access.h"
#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

// Below this extent a kernel's parallel loop takes in the next target dimension too.
inline constexpr int64_t kMinParallelExtent = 64;
// What a dimension that is a size counts as in that choice: a small batch, so that a kernel over
// o[n, c, y, x] with n a size is parallel over n and c, and runs on every thread at batch 1
// (counted as kMinParallelExtent, n alone made the kernel serial there: a dynamic-batch
// SqueezeNet-1.1 took 12.2 ms at batch 1 against 7.2 ms for the same program with n = 1). A
// dimension that is a size never joins (parallel_dims_alone).
inline constexpr int64_t kSizeForPlanning = 8;
// Fusion may cut a statement's parallel extent below min(kMinParallelExtent, what it has alone)
// only when its target has at most this many elements (too little work to spread anyway).
inline constexpr int64_t kSerialFusionElements = 4096;

// Product of the first k dims of `node`.
// (A dimension that is a size counts as kSizeForPlanning: planning does not know its value.)
int64_t leading_extent(const TensorNode& node, int k);
// Whether dimension d of `a` and `b` is the same: the same number, or the same sizes.
bool same_dim(const TensorNode& a, const TensorNode& b, size_t d);
// How many leading dims of `target` a kernel of one statement is parallel over: the fewest whose
// product reaches kMinParallelExtent, or up to the first dimension after the first that is a
// size, else all of them (0 for a scalar). With collapse off, 1 (0 for a scalar).
int parallel_dims_alone(const TensorNode& target, bool collapse);

struct KernelGroup {
  std::vector<size_t> statements;  // indices into Routine::statements, in order
  int parallel_dims = 0;           // k; 0: the kernel has no parallel loop (a scalar target)
};

// OK if `statements` of `routine` (in this order) may run as one kernel parallel over their
// first `k` target dims (k >= 1), else INVALID_ARGUMENT saying why (which node, which statement).
Status fusion_legal(const Program& program, const Routine& routine,
                    const std::vector<size_t>& statements, int k, const InlineDefs& inlined);

struct FusionOptions {
  bool fuse = true;
  bool collapse = true;
};

// Groups `statements` (the statements of `routine` that get kernels, in order) greedily: a
// statement joins the group before it when fusion_legal allows some k >= 1 no larger than the
// group's, and no member loses too much parallelism (see kSerialFusionElements). The group's
// legality is kept as summaries updated as members join (the shallowest row depth of accesses to
// written nodes, the leading dims all targets share, parallelism per k), so planning is linear
// in the statements' accesses rather than rechecking every member per statement.
// Row depth of an access: how many leading subscripts are the statement's target indices in
// order (fusion at k needs it >= k for every access of a node the group writes).
int row_depth(const Assignment& s, const Access& a);
std::vector<KernelGroup> plan_kernels(const Program& program, const Routine& routine,
                                      const std::vector<size_t>& statements,
                                      const InlineDefs& inlined, const FusionOptions& options);

}  // namespace kiln::ir::lowering
