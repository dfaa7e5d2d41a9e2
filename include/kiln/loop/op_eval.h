// The meaning of one loop-IR op on known operand values (the semantics listed in
// kiln/loop/loop.h), in one place: the reference interpreter evaluates every op through it and the
// constant-folding pass (kiln/loop/optimize.h) folds with it, so that a folded constant is exactly
// what the reference would have computed.
//
// Values follow the interpreter's evaluation: integers and bool in int64, kept in their type's
// range by wrapping (a u64 as its bit pattern), floating point in double whatever the type (f32,
// f16 and bf16 are rounded only by a cast, a constant, or a store — which is the caller's
// business; round_float() does it).
#pragma once

#include <cstdint>
#include <span>

#include "kiln/ir/program.h"

namespace kiln::ir {

// A value of a statically known type: `f` for the floats, `i` for bool and the integers (the
// other is 0).
struct Scalar {
  double f = 0;
  int64_t i = 0;
};

// The nearest f32, as a double.
double round_f32(double d);
// The nearest value of the float type `type` (to nearest even; beyond its range ±inf; NaN stays
// NaN), as a double.
double round_float(DType type, double d);
// f16 and bf16 values to and from their bits (round to nearest even).
uint16_t f16_bits(double d);
uint16_t bf16_bits(double d);
double f16_value(uint16_t bits);
double bf16_value(uint16_t bits);
// Truncation toward zero, saturating at the limits of the integer type (0 and 1 for bool: a
// non-zero value is 1); NaN becomes 0 (1 for bool).
int64_t saturate_int(DType type, double d);
// An integer of `type` as a double (a u64's bit pattern read unsigned).
double int_to_double(DType type, int64_t v);
// What a constant of `type` holding `value` evaluates to (f32 rounded, integers saturated).
Scalar const_scalar(DType type, double value);
// The value of `type` as the double an LExpr constant stores, or false when an i64 value has no
// exact double (so no constant can hold it).
bool scalar_to_const(DType type, Scalar v, double* value);
// An element of `type` in memory (dtype_size(type) bytes, host byte order) as a value, and a
// value stored into one: floats round to the type (f16/bf16 to nearest even), integers wrap.
Scalar load_scalar(DType type, const void* p);
void store_scalar(DType type, Scalar v, void* p);
// Whether a condition (of select or if) of this type and value holds: v != 0.
bool scalar_truthy(DType type, Scalar v);

// op(args) in type `type` for every op except select (whose operands are evaluated lazily, so
// the evaluator picks one itself with scalar_truthy). `arg_types` are the operands' types (casts
// and comparisons look at them). The arity must be op_arity(op) (callers validate it); a wrong
// one gives 0.
Scalar eval_op(Op op, DType type, std::span<const DType> arg_types, std::span<const Scalar> args);

}  // namespace kiln::ir
