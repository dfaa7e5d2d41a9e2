// Small builders of loop-IR expressions used by lowering and its analyses: i64 offset arithmetic
// with the trivial cases folded (so offsets read like hand-written ones), conversions between
// types with the loop IR's semantics, and per-reduction constants.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/loop/loop.h"
#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

LExprRef i64(int64_t v);
bool is_const(const LExprRef& e, double v);
// a + b, a * b, a / b, a % b in i64, folding constants, 0 and 1.
LExprRef add(LExprRef a, LExprRef b);
LExprRef mul(LExprRef a, LExprRef b);
LExprRef div(LExprRef a, LExprRef b);
LExprRef mod(LExprRef a, LExprRef b);
// 0/1 (i64) conjunction of range conditions; null for none.
LExprRef conjunction(const std::vector<LExprRef>& conditions);

// A constant converted to `type` as a store would convert it (f32 rounding, i32 saturation).
double convert_constant(double v, DType type);
// `e` converted to `type` (a cast op, or a converted constant).
LExprRef cast_to(LExprRef e, DType type);

// Dimensions as i64 expressions: a number, or for a dimension that names sizes (language
// version 2) an expression of the sizes (kSize), which kernels read from the dispatch.
LExprRef size_value(const SizeExpr& e);
LExprRef dim_value(const TensorNode& node, size_t d);
// How far an index runs: its extent, or its expression of sizes.
LExprRef extent_value(const IndexVar& index);
// The product of the first `k` dimensions of `node`, and of all of them.
LExprRef leading_extent_value(const TensorNode& node, int k);
LExprRef element_count_value(const TensorNode& node);
// Row-major element strides of a node.
std::vector<LExprRef> strides_of(const TensorNode& node);

// The neutral element of a reduction in `type` (0, 1, -inf, +inf; an integer type's limits).
double neutral(Reduce reduce, DType type);
// The op that folds one term into a reduction (sum and mean: +).
Op fold_op(Reduce reduce);
// The op that combines the old target value with the new one for += -= *=.
Op combine_op(Accum accum);

// Whether `e` loads node `node` (local array `local`) anywhere.
bool loads_node(const LExprRef& e, int node);
bool loads_local(const LExprRef& e, int local);

}  // namespace kiln::ir::lowering
