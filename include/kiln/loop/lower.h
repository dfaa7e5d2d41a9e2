// Lowering: a Program's routines become kernels of loop nests (the loop IR), and every node gets
// its memory mode.
//
// What lowering guarantees (the meaning is docs/language.md, "Meaning of a routine"):
//  - statements run in order, each kernel finishing before the next;
//  - the right side of a statement reads the values from before the statement: a read of the
//    target at any point other than the one being written reads a snapshot taken first;
//  - out-of-range compound subscripts skip the iteration point in a reduction and read 0 in an
//    elementwise expression (reads of a folded const too: its value stands under the same range
//    guard as a load);
//  - a reduction starts from its neutral element (0, 1, -inf, +inf; INT32_MIN/MAX for i32),
//    `mean` divides by the product of the reduced extents, and the result is combined with the
//    target by the statement's accumulation, then converted to the target's type.
// Kernels: consecutive statements that touch the same rows run as one kernel, parallel over
// their leading target dimensions (collapsed into one loop while it is short); see
// src/loop/fusion.h. A statement that reads its target elsewhere gets a snapshot kernel first.
// Memory modes: inputs, outputs and params are kHosted; a const with a plain value is folded
// into the code (kVirtual); intermediates are kVirtual when inlined (see below), kLocal when a
// row of them lives in one fused kernel (src/loop/local_arrays.h), else kOnDevice; kOnDevice ones
// that the compiler placed may share a routine's buffer (LoweredRoutine::shared). A mode the user
// requested (kiln/ir/memory_mode.h) is never overridden: kHosted / kOnDevice keep a buffer, and
// a kVirtual or kLocal request that cannot be met fails with INVALID_ARGUMENT saying why.
// A read of `x.merge` reads the hidden node "x.merge" (kHosted), which the runtime binds to the
// stream's merge buffer.
#pragma once

#include <cstdint>

#include "kiln/loop/loop.h"
#include "kiln/ir/library_calls.h"
#include "kiln/ir/program.h"

namespace kiln::ir {

struct LowerOptions {
  // Inline an intermediate computed elementwise by one `=` statement into the one statement
  // that reads it (OCANNL's virtual nodes), instead of storing it.
  bool inline_virtual = true;
  // Fuse consecutive statements that touch the same rows into one kernel (src/loop/fusion.h), and
  // collapse small leading dimensions into one parallel loop; off: one kernel per statement,
  // parallel over the target's first dimension.
  bool fuse = true;
  bool collapse = true;
  // Keep small intermediates written and read in one fused kernel as local arrays
  // (src/loop/local_arrays.h) instead of device buffers.
  bool local_arrays = true;
  // Let a routine's stored intermediates whose lifetimes do not overlap share one buffer
  // (src/loop/shared_buffers.h, LoweredRoutine::shared); off: a buffer each.
  bool shared_buffers = true;
  // Run the loop-IR optimization passes (kiln/loop/optimize.h) on every kernel: constant folding,
  // loop-invariant hoisting, fma formation. Off gives the plain translation (the reference side
  // of differential tests).
  bool optimize = true;
  // Let the optimizer reassociate float reductions (sums, products, max, min over a loop) into
  // several accumulators that run in vector registers (split_reductions in
  // kiln/loop/optimize.h). This changes the rounding of sums and products. Off: `--strict-fp`.
  bool reassociate = true;
  // Replace statements a library function computes faster by calls of it first (a matrix
  // product by gemm; kiln/ir/library_calls.h). Off: `--no-auto-calls`.
  bool auto_calls = true;
  LibraryCallOptions library_calls;
  // Value tracing (docs/tracing.md): after each store of a statement to device memory, and after
  // each term of a reduction, a kTrace statement (kiln/loop/loop.h) logs the point's indices, the
  // values its right side read and the value stored, at most `trace_lines` times per kernel run
  // (0: no limit). Traced kernels are not parallel and skip the optimization passes, so every
  // device logs the same points in the same order. Off: no kTrace at all (the kernels are those
  // of an untraced build, byte for byte).
  bool trace_values = false;
  int64_t trace_lines = 16;
  // Checked gathers (`kiln run --check-bounds`): a gathered subscript outside its dimension
  // (`e[t[i], j]` with t[i] outside e's rows) fails the run, naming the statement (FILE:LINE),
  // the tensor and the index (a kFail statement, kiln/loop/loop.h), where it otherwise reads 0.
  // The checked kernels are mostly not vectorized. Off: no check at all.
  bool check_bounds = false;
};

Result<LoweredProgram> lower_program(const Program& program, const LowerOptions& options = {});
// The optimization passes of lower_program on every kernel of `lowered`, as lower_program runs
// them last: nothing unless options.optimize is set and no values are traced. Lowering with
// optimize off and then this gives what lower_program gives, in two phases a caller can time.
void optimize_lowered(LoweredProgram& lowered, const LowerOptions& options);

// The node a merge read of `node` refers to in a lowered program, or -1 if there is none.
int merge_node_of(const LoweredProgram& lowered, int node);

}  // namespace kiln::ir
