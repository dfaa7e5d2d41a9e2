// Op semantics of the loop IR (kiln/loop/loop.h), shared by the reference interpreter and the
// constant folder. docs/language.md ("Element types") states the rules written here.
#include "kiln/loop/op_eval.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <limits>

namespace kiln::ir {

namespace {

// Two's complement wrap-around of a result into the type's range (bool: non-zero is 1).
int64_t wrap(DType t, uint64_t v) {
  switch (t) {
    case DType::kBool: return v != 0 ? 1 : 0;
    case DType::kI8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::kU8: return static_cast<uint8_t>(v);
    case DType::kI16: return static_cast<int16_t>(static_cast<uint16_t>(v));
    case DType::kU16: return static_cast<uint16_t>(v);
    case DType::kI32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::kU32: return static_cast<uint32_t>(v);
    default: return static_cast<int64_t>(v);
  }
}

// The limits of an integer type as doubles: [lo, hi_exclusive), both exact.
double int_lo(DType t) { return is_unsigned_type(t) || t == DType::kBool ? 0.0 : -std::ldexp(1.0, dtype_bits(t) - 1); }
double int_hi_exclusive(DType t) {
  if (t == DType::kBool) return 2.0;
  return std::ldexp(1.0, is_unsigned_type(t) ? dtype_bits(t) : dtype_bits(t) - 1);
}
int64_t int_max(DType t) {
  if (t == DType::kU64) return -1;  // the bit pattern of 2^64 - 1
  if (t == DType::kI64) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(int_hi_exclusive(t)) - 1;
}

// Rounds |d| to `mantissa` bits below the leading one, with exponents from `min_exp` (subnormals
// below it) up; beyond `max_finite` it is inf. `d` is finite.
double round_binary(double d, int mantissa, int min_exp, double max_finite) {
  if (d == 0) return d;
  int e = 0;
  std::frexp(d, &e);  // d = m * 2^e, 0.5 <= |m| < 1: the leading one is at 2^(e-1)
  const int quantum_exp = std::max(e - 1, min_exp) - mantissa;
  const double r = std::ldexp(std::nearbyint(std::ldexp(d, -quantum_exp)), quantum_exp);
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), d);
  return r;
}

// The value converted to `to` (for casts). Integers reach f16 and bf16 through f32, as every
// value of those types is computed in f32.
Scalar convert(DType from, Scalar v, DType to) {
  Scalar r;
  if (is_float_type(to)) {
    if (is_float_type(from)) {
      r.f = round_float(to, v.f);
    } else {
      const double f32 = from == DType::kU64 ? static_cast<double>(static_cast<float>(static_cast<uint64_t>(v.i)))
                                             : static_cast<double>(static_cast<float>(v.i));
      r.f = to == DType::kF64 ? int_to_double(from, v.i) : round_float(to, f32);
    }
  } else if (is_float_type(from)) {
    r.i = to == DType::kBool ? (v.f != 0.0 ? 1 : 0) : saturate_int(to, v.f);
  } else {
    r.i = wrap(to, static_cast<uint64_t>(v.i));
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
  const bool is_signed = !is_unsigned_type(t);
  switch (op) {
    case Op::kNeg: r.i = wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)); break;
    case Op::kAbs:
      r.i = is_signed && a.i < 0 ? wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)) : a.i;
      break;
    case Op::kRelu: r.i = is_signed && a.i < 0 ? 0 : a.i; break;
    case Op::kFloor:
    case Op::kCeil: r.i = a.i; break;
    case Op::kBitNot: r.i = t == DType::kBool ? (a.i == 0 ? 1 : 0) : wrap(t, ~static_cast<uint64_t>(a.i)); break;
    default: r.i = saturate_int(t, math(op, int_to_double(t, a.i))); break;
  }
  return r;
}

// a << b and a >> b for an integer a of type t and an amount b of type bt: an amount below 0 or
// at least the width gives 0 (-1 for >> of a negative signed value).
int64_t shift(Op op, DType t, int64_t a, DType bt, int64_t b) {
  const bool negative_amount = !is_unsigned_type(bt) && b < 0;
  const bool signed_negative = !is_unsigned_type(t) && a < 0;
  if (negative_amount || static_cast<uint64_t>(b) >= static_cast<uint64_t>(dtype_bits(t))) {
    return op == Op::kShr && signed_negative ? -1 : 0;
  }
  if (op == Op::kShl) return wrap(t, static_cast<uint64_t>(a) << b);
  if (t == DType::kU64) return static_cast<int64_t>(static_cast<uint64_t>(a) >> b);
  return a >> b;  // signed values are sign-extended in int64, unsigned ones are not negative
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
  const bool is_u64 = t == DType::kU64;
  switch (op) {
    case Op::kAdd: r.i = wrap(t, ua + ub); break;
    case Op::kSub: r.i = wrap(t, ua - ub); break;
    case Op::kMul: r.i = wrap(t, ua * ub); break;
    case Op::kDiv:
      if (b.i == 0) {
        r.i = 0;
      } else if (is_u64) {
        r.i = static_cast<int64_t>(ua / ub);
      } else if (b.i == -1) {
        r.i = wrap(t, uint64_t{0} - ua);  // MIN / -1 == MIN
      } else {
        r.i = a.i / b.i;
      }
      break;
    case Op::kMax: r.i = is_u64 ? static_cast<int64_t>(std::max(ua, ub)) : std::max(a.i, b.i); break;
    case Op::kMin: r.i = is_u64 ? static_cast<int64_t>(std::min(ua, ub)) : std::min(a.i, b.i); break;
    case Op::kPow: r.i = saturate_int(t, std::pow(int_to_double(t, a.i), int_to_double(t, b.i))); break;
    case Op::kBitAnd: r.i = wrap(t, ua & ub); break;
    case Op::kBitOr: r.i = wrap(t, ua | ub); break;
    case Op::kBitXor: r.i = wrap(t, ua ^ ub); break;
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
  if (operand_type == DType::kU64) {
    const uint64_t ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
    switch (op) {
      case Op::kLt: return ua < ub;
      case Op::kLe: return ua <= ub;
      case Op::kGt: return ua > ub;
      case Op::kGe: return ua >= ub;
      case Op::kEq: return ua == ub;
      case Op::kNe: return ua != ub;
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

double round_f32(double d) { return static_cast<double>(static_cast<float>(d)); }

double round_float(DType type, double d) {
  if (!std::isfinite(d)) return d;
  switch (type) {
    case DType::kF32: return round_f32(d);
    case DType::kF16: return round_binary(d, 10, -14, 65504.0);
    case DType::kBF16: return round_binary(d, 7, -126, std::ldexp(255.0, 120));
    default: return d;
  }
}

uint16_t f16_bits(double d) {
  const double r = round_float(DType::kF16, d);
  const uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  if (std::isnan(r)) return static_cast<uint16_t>(sign | 0x7e00);
  if (std::isinf(r)) return static_cast<uint16_t>(sign | 0x7c00);
  const double a = std::fabs(r);
  if (a < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const auto mantissa = static_cast<uint16_t>(std::ldexp(m, 11) - 1024);
  return static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | mantissa);
}

double f16_value(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double v = 0;
  if (exponent == 0x1f) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else {
    v = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (bits & 0x8000) ? -v : v;
}

// bf16 is the upper half of an f32.
uint16_t bf16_bits(double d) {
  const double r = round_float(DType::kBF16, d);
  if (std::isnan(r)) return std::signbit(r) ? 0xffc0 : 0x7fc0;
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
}

double bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

int64_t saturate_int(DType t, double d) {
  if (t == DType::kBool) return d != 0.0 ? 1 : 0;
  if (std::isnan(d)) return 0;
  // The lower limits are exact doubles; the upper ones are reached from 2^(bits) up.
  if (d <= int_lo(t)) return static_cast<int64_t>(int_lo(t));
  if (d >= int_hi_exclusive(t)) return int_max(t);
  if (t == DType::kU64) return static_cast<int64_t>(static_cast<uint64_t>(d));
  return static_cast<int64_t>(d);
}

double int_to_double(DType type, int64_t v) {
  return type == DType::kU64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
}

Scalar const_scalar(DType type, double value) {
  Scalar r;
  if (is_float_type(type)) {
    r.f = round_float(type, value);
  } else {
    r.i = saturate_int(type, value);
  }
  return r;
}

bool scalar_to_const(DType type, Scalar v, double* value) {
  if (is_float_type(type)) {
    *value = round_float(type, v.f);
    return true;
  }
  // 2^63 (the double nearest INT64_MAX) reads back as INT64_MAX, so it holds that value too.
  const double d = int_to_double(type, v.i);
  if (saturate_int(type, d) != v.i) return false;
  *value = d;
  return true;
}

namespace {

template <typename T>
T read_as(const void* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

template <typename T>
void write_as(T x, void* p) {
  std::memcpy(p, &x, sizeof x);
}

}  // namespace

Scalar load_scalar(DType type, const void* p) {
  Scalar r;
  switch (type) {
    case DType::kBool: r.i = read_as<uint8_t>(p) != 0 ? 1 : 0; break;
    case DType::kI8: r.i = read_as<int8_t>(p); break;
    case DType::kU8: r.i = read_as<uint8_t>(p); break;
    case DType::kI16: r.i = read_as<int16_t>(p); break;
    case DType::kU16: r.i = read_as<uint16_t>(p); break;
    case DType::kI32: r.i = read_as<int32_t>(p); break;
    case DType::kU32: r.i = read_as<uint32_t>(p); break;
    case DType::kI64:
    case DType::kU64: r.i = read_as<int64_t>(p); break;
    case DType::kF16: r.f = f16_value(read_as<uint16_t>(p)); break;
    case DType::kBF16: r.f = bf16_value(read_as<uint16_t>(p)); break;
    case DType::kF32: r.f = read_as<float>(p); break;
    case DType::kF64: r.f = read_as<double>(p); break;
  }
  return r;
}

void store_scalar(DType type, Scalar v, void* p) {
  const auto u = static_cast<uint64_t>(v.i);
  switch (type) {
    case DType::kBool: write_as<uint8_t>(v.i != 0 ? 1 : 0, p); break;
    case DType::kI8:
    case DType::kU8: write_as(static_cast<uint8_t>(u), p); break;
    case DType::kI16:
    case DType::kU16: write_as(static_cast<uint16_t>(u), p); break;
    case DType::kI32:
    case DType::kU32: write_as(static_cast<uint32_t>(u), p); break;
    case DType::kI64:
    case DType::kU64: write_as(u, p); break;
    case DType::kF16: write_as(f16_bits(v.f), p); break;
    case DType::kBF16: write_as(bf16_bits(v.f), p); break;
    case DType::kF32: write_as(static_cast<float>(v.f), p); break;
    case DType::kF64: write_as(v.f, p); break;
  }
}

bool scalar_truthy(DType type, Scalar v) { return is_float_type(type) ? v.f != 0.0 : v.i != 0; }

Scalar eval_op(Op op, DType type, std::span<const DType> arg_types, std::span<const Scalar> args) {
  Scalar r;
  if (args.size() != arg_types.size() || static_cast<int>(args.size()) != op_arity(op)) return r;
  if (std::optional<DType> to = cast_target(op)) return convert(arg_types[0], args[0], *to);
  switch (op) {
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
    case Op::kShl:
    case Op::kShr:
      r.i = shift(op, type, args[0].i, arg_types[1], args[1].i);
      return r;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMax:
    case Op::kMin:
    case Op::kPow:
    case Op::kBitAnd:
    case Op::kBitOr:
    case Op::kBitXor:
      return binary(op, type, args[0], args[1]);
    default:
      return unary(op, type, args[0]);
  }
}

}  // namespace kiln::ir
