// Op semantics of the loop IR (kiln/loop/loop.h), shared by the reference interpreter and the
// constant folder.
#include "kiln/loop/op_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::ir {

namespace {

// Two's complement wrap-around of an unsigned result into the type's range.
int64_t wrap(DType t, uint64_t v) {
  if (t == DType::kI32) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

int64_t int_min(DType t) {
  return t == DType::kI32 ? std::numeric_limits<int32_t>::min()
                          : std::numeric_limits<int64_t>::min();
}
int64_t int_max(DType t) {
  return t == DType::kI32 ? std::numeric_limits<int32_t>::max()
                          : std::numeric_limits<int64_t>::max();
}

// The value converted to `to` (for casts).
Scalar convert(DType from, Scalar v, DType to) {
  Scalar r;
  if (to == DType::kF32) {
    r.f = is_float_type(from) ? round_f32(v.f) : static_cast<double>(static_cast<float>(v.i));
  } else if (to == DType::kF64) {
    r.f = is_float_type(from) ? v.f : static_cast<double>(v.i);
  } else if (is_float_type(from)) {
    r.i = saturate_int(to, v.f);
  } else {
    r.i = std::clamp(v.i, int_min(to), int_max(to));
  }
  return r;
}

double float_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? b : a;
}
double float_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return b < a ? b : a;
}

// The math functions, in double.
double math(Op op, double x) {
  switch (op) {
    case Op::kExp: return std::exp(x);
    case Op::kLog: return std::log(x);
    case Op::kSqrt: return std::sqrt(x);
    case Op::kRsqrt: return 1.0 / std::sqrt(x);
    case Op::kTanh: return std::tanh(x);
    case Op::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::kSin: return std::sin(x);
    case Op::kCos: return std::cos(x);
    case Op::kErf: return std::erf(x);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

Scalar unary(Op op, DType t, Scalar a) {
  Scalar r;
  if (is_float_type(t)) {
    switch (op) {
      case Op::kNeg: r.f = -a.f; break;
      case Op::kAbs: r.f = std::fabs(a.f); break;
      case Op::kRelu: r.f = std::isnan(a.f) ? a.f : a.f > 0 ? a.f : 0.0; break;
      case Op::kFloor: r.f = std::floor(a.f); break;
      case Op::kCeil: r.f = std::ceil(a.f); break;
      default: r.f = math(op, a.f); break;
    }
    return r;
  }
  switch (op) {
    case Op::kNeg: r.i = wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)); break;
    case Op::kAbs:
      r.i = a.i < 0 ? wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)) : a.i;
      break;
    case Op::kRelu: r.i = a.i > 0 ? a.i : 0; break;
    case Op::kFloor:
    case Op::kCeil: r.i = a.i; break;
    default: r.i = saturate_int(t, math(op, static_cast<double>(a.i))); break;
  }
  return r;
}

Scalar binary(Op op, DType t, Scalar a, Scalar b) {
  Scalar r;
  if (is_float_type(t)) {
    switch (op) {
      case Op::kAdd: r.f = a.f + b.f; break;
      case Op::kSub: r.f = a.f - b.f; break;
      case Op::kMul: r.f = a.f * b.f; break;
      case Op::kDiv: r.f = a.f / b.f; break;
      case Op::kMax: r.f = float_max(a.f, b.f); break;
      case Op::kMin: r.f = float_min(a.f, b.f); break;
      case Op::kPow: r.f = std::pow(a.f, b.f); break;
      default: break;
    }
    return r;
  }
  const uint64_t ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
  switch (op) {
    case Op::kAdd: r.i = wrap(t, ua + ub); break;
    case Op::kSub: r.i = wrap(t, ua - ub); break;
    case Op::kMul: r.i = wrap(t, ua * ub); break;
    case Op::kDiv:
      if (b.i == 0) {
        r.i = 0;
      } else if (b.i == -1) {
        r.i = wrap(t, uint64_t{0} - ua);  // MIN / -1 == MIN
      } else {
        r.i = a.i / b.i;
      }
      break;
    case Op::kMax: r.i = std::max(a.i, b.i); break;
    case Op::kMin: r.i = std::min(a.i, b.i); break;
    case Op::kPow:
      r.i = saturate_int(t, std::pow(static_cast<double>(a.i), static_cast<double>(b.i)));
      break;
    default: break;
  }
  return r;
}

bool compare(Op op, DType operand_type, Scalar a, Scalar b) {
  if (is_float_type(operand_type)) {
    switch (op) {
      case Op::kLt: return a.f < b.f;
      case Op::kLe: return a.f <= b.f;
      case Op::kGt: return a.f > b.f;
      case Op::kGe: return a.f >= b.f;
      case Op::kEq: return a.f == b.f;
      case Op::kNe: return a.f != b.f;
      default: return false;
    }
  }
  switch (op) {
    case Op::kLt: return a.i < b.i;
    case Op::kLe: return a.i <= b.i;
    case Op::kGt: return a.i > b.i;
    case Op::kGe: return a.i >= b.i;
    case Op::kEq: return a.i == b.i;
    case Op::kNe: return a.i != b.i;
    default: return false;
  }
}

}  // namespace

bool is_float_type(DType type) { return type == DType::kF32 || type == DType::kF64; }

double round_f32(double d) { return static_cast<double>(static_cast<float>(d)); }

int64_t saturate_int(DType t, double d) {
  if (std::isnan(d)) return 0;
  // -2^31 and -2^63 are exact doubles; the upper limits are reached from 2^31 and 2^63 up.
  const double lo = static_cast<double>(int_min(t));
  const double hi_exclusive = t == DType::kI32 ? 2147483648.0 : 9223372036854775808.0;
  if (d <= lo) return int_min(t);
  if (d >= hi_exclusive) return int_max(t);
  return static_cast<int64_t>(d);
}

Scalar const_scalar(DType type, double value) {
  Scalar r;
  if (type == DType::kF32) {
    r.f = round_f32(value);
  } else if (type == DType::kF64) {
    r.f = value;
  } else {
    r.i = saturate_int(type, value);
  }
  return r;
}

bool scalar_to_const(DType type, Scalar v, double* value) {
  if (is_float_type(type)) {
    *value = type == DType::kF32 ? round_f32(v.f) : v.f;
    return true;
  }
  // 2^63 (the double nearest INT64_MAX) reads back as INT64_MAX, so it holds that value too.
  const double d = static_cast<double>(v.i);
  if (saturate_int(type, d) != v.i) return false;
  *value = d;
  return true;
}

bool scalar_truthy(DType type, Scalar v) { return is_float_type(type) ? v.f != 0.0 : v.i != 0; }

Scalar eval_op(Op op, DType type, std::span<const DType> arg_types, std::span<const Scalar> args) {
  Scalar r;
  if (args.size() != arg_types.size() || static_cast<int>(args.size()) != op_arity(op)) return r;
  switch (op) {
    case Op::kCastF32: return convert(arg_types[0], args[0], DType::kF32);
    case Op::kCastF64: return convert(arg_types[0], args[0], DType::kF64);
    case Op::kCastI32: return convert(arg_types[0], args[0], DType::kI32);
    case Op::kSelect:
      return scalar_truthy(arg_types[0], args[0]) ? args[1] : args[2];
    case Op::kFma:
      if (is_float_type(type)) {
        r.f = std::fma(args[0].f, args[1].f, args[2].f);
      } else {
        r.i = wrap(type, static_cast<uint64_t>(args[0].i) * static_cast<uint64_t>(args[1].i) +
                             static_cast<uint64_t>(args[2].i));
      }
      return r;
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe:
    case Op::kEq:
    case Op::kNe: {
      const bool yes = compare(op, arg_types[0], args[0], args[1]);
      if (is_float_type(type)) {
        r.f = yes ? 1.0 : 0.0;
      } else {
        r.i = yes ? 1 : 0;
      }
      return r;
    }
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMax:
    case Op::kMin:
    case Op::kPow:
      return binary(op, type, args[0], args[1]);
    case Op::kNeg:
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kRelu:
    case Op::kAbs:
    case Op::kSin:
    case Op::kCos:
    case Op::kErf:
    case Op::kFloor:
    case Op::kCeil:
      return unary(op, type, args[0]);
  }
  return r;
}

}  // namespace kiln::ir
