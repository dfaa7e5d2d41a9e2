// Optimization passes over the loop IR: rewrites of one kernel that keep its meaning (the
// semantics of kiln/loop/loop.h), run by lowering at the end (LowerOptions::optimize) so that every
// backend gets the same simplified kernels instead of relying on its own compiler.
//
// Guarantees common to every pass, for a valid kernel (as lowering or parse_kernel makes it):
//  - the result is valid too: parse_kernel(print_kernel(k)) accepts it (types, scoping, locals);
//  - every store stores the value the reference interpreter computes for the original kernel,
//    up to the rounding loop.h allows a backend (an f32 value rounded where the original kept
//    it in f64; fma rounding once), so integer results are identical;
//  - no load or local load runs that the original would not have run (loads are checked in the
//    reference), so an optimized kernel fails only where the original fails; a load whose value
//    is provably unused (x * 0 on integers) may be dropped;
//  - the dispatch convention is kept: a kernel whose body is a parallel `for` still is one.
// Distinct nodes are distinct buffers (as the runtime binds them), so a store to one node never
// changes a load of another.
#pragma once

#include "kiln/loop/loop.h"

namespace kiln::ir {

// Evaluates ops whose operands are all constants with exactly the reference's semantics
// (kiln/loop/op_eval.h: wrap-around, x / 0 == 0, saturating casts, NaN rules; an f32 result is
// rounded to f32, as any f32 constant is). Applies exact identities only: x * 1, 1 * x, x / 1
// (any type); select with a constant condition; `if` with a constant condition. Integer (i32 and
// i64) sums and products by constants — offsets above all — are rewritten as a sum of distinct
// terms times their coefficients plus one constant (exact, since they wrap), which also
// removes x + 0, x - 0, x * 1 and x * 0. Float x + 0.0 is kept (-0.0 + 0.0 is +0.0).
void fold_constants(Kernel& kernel);

// Float (f32 / f64) a * b + c and c + a * b become fma(a, b, c), which loop.h lets a backend
// round once. a * b - c is left alone.
void form_fma(Kernel& kernel);

// Computes loop-invariant expressions once before their loop. Within a `for` of extent >= 2 (an
// extent-1 loop gains nothing; an extent-0 one must not run anything), a maximal subexpression
// that contains a load or a costly op (exp, log, sqrt, rsqrt, tanh, sigmoid, sin, cos, erf, pow, float
// division) and does not depend on the loop's variable, on any variable bound inside the loop,
// on a node or local stored inside the loop, or on a local declared inside it, is stored into a
// new size-1 local declared around the loop (local_count grows) and read back with local_load.
// An expression that loads (a node or a local) is hoisted only where the loop body evaluates it
// on every iteration: never out of an `if` body, an operand select does not always pick, or a
// nested loop of extent 0. The kernel's top parallel loop is never hoisted out of (the kernel
// would stop being split over workgroups); its inner loops are.
void hoist_invariants(Kernel& kernel);

// Removes from kernel.nodes (keeping the order of the rest) every node the kernel neither loads
// nor stores. Folding can remove the last load of a node (select with a constant condition,
// an integer x * 0); the runtime binds a buffer for every listed node and tracks only the
// accessed ones, so a kernel lists exactly the nodes it accesses.
void drop_unused_bindings(Kernel& kernel);

// Splits a reduction loop into lanes: `for v in [0, N): acc = op(acc, x(v))` with op one of
// + * max min, acc one element of a local (at an offset independent of v and of loads), x not
// reading that local, and N at least twice the lane count K (32 for 4-byte types, 16 for 8-byte
// ones), becomes K accumulators in a new local array (lane u folds x(u), x(K + u), ...), the
// remaining N mod K values folded into acc in order, then the lanes combined pairwise into acc.
// The same values are loaded, and the same loads fail. Integer reductions (wrapping) give the
// same bits. Float sums and products are reassociated, which changes their rounding: they are
// split only with `reassociate_floats` (LowerOptions::reassociate, off with `--strict-fp`), as
// are float max and min (equal up to which of -0.0 and +0.0 wins a tie).
void split_reductions(Kernel& kernel, bool reassociate_floats);

// Border splitting. A loop of known extent (not the kernel's parallel loop) whose body compares
// its variable v with constants, `c * v + k OP 0` for OP one of < <= > >= (the range checks of a
// read at an offset, as in a padded window, or a `where` bound), runs as up to three loops: the
// iterations before the interior, the interior, and those after it. The interior is where every
// comparison that fails only at one end of the loop holds; it must be at least 4 iterations and
// half of the loop. In the interior's copy each comparison over v alone that is constant there is
// that constant (fold_constants then removes the checks). Splits nest at most 2 deep, and a body
// over 4000 expression nodes is not copied. Every iteration runs the same operations as before,
// in the same order, so results are identical. Returns whether the kernel changed.
bool split_borders(Kernel& kernel);

// Register tiles for contractions. In a kernel whose body is a parallel loop over rows i (at
// least 6, or a size), a statement of that loop's body of the form
//   for k in [0, EK): for j in [0, EJ): X[off(i, j)] = v(i, k, j)
// where v reads X only at off(i, j) (outside select operands), off does not depend on k and is
// affine in j with a non-zero coefficient, and EJ is at least one tile width W (64 bytes of the
// element type: 16 f32) or a size, and v loads an operand that a tile reuses (one whose offset
// does not depend on i, or not on j), is computed in tiles of 6 rows × W columns: 6 local
// accumulators of W elements, loaded from X, updated for every k, stored back. The parallel loop
// becomes one over steps of whole tiles (at most 264 rows, an even number of steps; computed when
// the kernel runs for rows over a size); every other statement of its body runs for the step's
// rows in turn. The reduction runs in blocks of at most 256 ks. For a block, the loads of v that
// depend on i and not on j (a[i, k]) are copied for all the step's rows into a local, tile by
// tile with its 6 rows side by side; per W columns, those that depend on j and not on i (b[k, j])
// into a local panel of 16 KiB that all the step's tiles read. When v's loads are of X, packed
// ones or ones that depend on neither i nor j, and its ops cannot fail (+ - * fma max min casts),
// the last rows and columns are padded tiles whose padding is never stored; otherwise they run
// as before. Each element sees the same operations in the same order, so the results are
// identical, float ones included. This reorders the statements of different rows, which relies
// on the iterations of a parallel loop being independent (what `parallel` means). A kernel with a
// triangular loop (is_triangular in kiln/loop/loop.h) is left as it is. Returns whether the
// kernel changed.
bool tile_contractions(Kernel& kernel);

struct OptimizeOptions {
  // Let split_reductions reassociate float reductions.
  bool reassociate = true;
};

// split_borders (then fold_constants where it split), split_reductions, fold_constants,
// tile_contractions (folding its offsets again when it tiled),
// hoist_invariants (before fma, so that an invariant product is hoisted whole), form_fma, then
// drop_unused_bindings. A kernel with kTrace statements (value tracing) is left as it is.
void optimize_kernel(Kernel& kernel, const OptimizeOptions& options = {});

}  // namespace kiln::ir
