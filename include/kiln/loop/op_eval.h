// The meaning of one loop-IR op on known operand values (the semantics listed in
// kiln/loop/loop.h), in one place: the reference interpreter evaluates every op through it and the
// constant-folding pass (kiln/loop/optimize.h) folds with it, so that a folded constant is exactly
// what the reference would have computed.
//
// Values follow the interpreter's evaluation: integers in int64 (i32 kept in range by
// wrapping), floating point in double whatever the type (f32 is rounded only by a cast to f32,
// an f32 constant, or a store — which is the caller's business).
#pragma once

#include <cstdint>
#include <span>

#include "kiln/ir/program.h"

namespace kiln::ir {

// A value of a statically known type: `f` for f32/f64, `i` for i32/i64 (the other is 0).
struct Scalar {
  double f = 0;
  int64_t i = 0;
};

bool is_float_type(DType type);
// The nearest f32, as a double.
double round_f32(double d);
// Truncation toward zero, saturating at the limits of i32 or i64; NaN becomes 0.
int64_t saturate_int(DType type, double d);
// What a constant of `type` holding `value` evaluates to (f32 rounded, integers saturated).
Scalar const_scalar(DType type, double value);
// The value of `type` as the double an LExpr constant stores, or false when an i64 value has no
// exact double (so no constant can hold it).
bool scalar_to_const(DType type, Scalar v, double* value);
// Whether a condition (of select or if) of this type and value holds: v != 0.
bool scalar_truthy(DType type, Scalar v);

// op(args) in type `type` for every op except select (whose operands are evaluated lazily, so
// the evaluator picks one itself with scalar_truthy). `arg_types` are the operands' types (casts
// and comparisons look at them). The arity must be op_arity(op) (callers validate it); a wrong
// one gives 0.
Scalar eval_op(Op op, DType type, std::span<const DType> arg_types, std::span<const Scalar> args);

}  // namespace kiln::ir
