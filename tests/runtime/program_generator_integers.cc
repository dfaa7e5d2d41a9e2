// The random program generator (program_generator.h): integer and bool expressions of every
// type (language version 3), each with its type as typing settles it and the range of its
// values. Every backend computes them exactly: integers wrap at their type's width, x / 0 is 0,
// shifts take any amount, and floats reach them only as exact values through saturating casts.
// Ranges are conservative: where an operation may wrap around, its range is its whole type, and
// the float expressions that read it squash it (int_as_float).
#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/program_generator.h"

namespace kiln::e2e {

using ir::DType;
using ir::Role;

namespace {

const std::vector<DType>& integer_types() {
  static const std::vector<DType> types = {DType::kI8,  DType::kU8,  DType::kI16, DType::kU16,
                                           DType::kI32, DType::kU32, DType::kI64, DType::kU64};
  return types;
}

// The least and greatest values of an integer or bool type, as doubles (2^64 - 1 rounds up to
// 2^64, which only widens a range).
double type_lo(DType t) {
  if (t == DType::kBool || ir::is_unsigned_type(t)) return 0;
  return -std::ldexp(1.0, ir::dtype_bits(t) - 1);
}
double type_hi(DType t) {
  if (t == DType::kBool) return 1;
  return std::ldexp(1.0, ir::is_unsigned_type(t) ? ir::dtype_bits(t) : ir::dtype_bits(t) - 1) - 1;
}
bool fits(DType t, double lo, double hi) { return lo >= type_lo(t) && hi <= type_hi(t); }

// The range of `g`'s values once converted to the integer type `t`: the same where they fit,
// else (a wrap) the whole type.
std::pair<double, double> range_in(const Gen& g, DType t) {
  if (fits(t, g.lo, g.hi)) return {g.lo, g.hi};
  return {type_lo(t), type_hi(t)};
}

// 2^k - 1 for the least k with 2^k > v (v >= 0): the largest result of | and ^ of values <= v.
double ones_up_to(double v) {
  double p = 1;
  while (p <= v && p < 0x1p64) p *= 2;
  return p - 1;
}

bool is_comparison(const std::string& op) {
  return op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=";
}

}  // namespace

Gen ProgramGenerator::typed(std::string text, DType type, double lo, double hi, bool atom) {
  Gen g;
  g.text = std::move(text);
  g.type = type;
  g.atom = atom;
  if (std::isnan(lo) || std::isnan(hi) || !fits(type, lo, hi)) {
    lo = type_lo(type);
    hi = type_hi(type);
  }
  g.lo = lo;
  g.hi = hi;
  g.bound = std::max(std::fabs(lo), std::fabs(hi));
  return g;
}

Gen ProgramGenerator::cast(const Gen& e, DType type) {
  const std::string text = std::string(ir::dtype_name(type)) + "(" + e.text + ")";
  if (type == DType::kBool) {
    Gen g = typed(text, type, 0, 1, true);
    g.literal = e.literal;
    return g;
  }
  if (!e.is_int()) {
    // A float converts truncating toward zero and saturating at the type's limits.
    const double lo = std::max(type_lo(type), std::trunc(-e.bound));
    const double hi = std::min(type_hi(type), std::trunc(e.bound));
    Gen g = typed(text, type, std::min(lo, hi), std::max(lo, hi), true);
    g.literal = e.literal;
    return g;
  }
  const auto [lo, hi] = range_in(e, type);
  Gen g = typed(text, type, lo, hi, true);
  g.literal = e.literal;
  return g;
}

std::optional<DType> ProgramGenerator::combined_type(const Gen& a, const Gen& b, bool arithmetic) {
  DType t = DType::kI32;
  if (a.weak && b.weak) {
    t = DType::kI32;
  } else if (a.weak) {
    t = b.type == DType::kBool ? DType::kI32 : b.type;  // an integer literal beside a bool is i32
  } else if (b.weak) {
    t = a.type == DType::kBool ? DType::kI32 : a.type;
  } else {
    std::optional<DType> p = ir::promote_types(a.type, b.type);
    if (!p) return std::nullopt;
    t = *p;
  }
  if (arithmetic && t == DType::kBool) t = DType::kI32;  // arithmetic on bool counts in i32
  return t;
}

Gen ProgramGenerator::int_binary(Gen a, const std::string& op, Gen b) {
  const bool arithmetic = op == "+" || op == "-" || op == "*" || op == "/";
  std::optional<DType> type = combined_type(a, b, arithmetic);
  if (!type) {
    // u64 beside a signed type: typing asks for a cast; either side may give.
    Gen& other = a.type == DType::kU64 ? b : a;
    Gen& u64 = a.type == DType::kU64 ? a : b;
    if (chance(0.5)) other = cast(other, DType::kU64);
    else u64 = cast(u64, DType::kI64);
    type = combined_type(a, b, arithmetic);
  }
  const DType t = *type;
  const auto [alo, ahi] = range_in(a, t);
  const auto [blo, bhi] = range_in(b, t);
  double lo = type_lo(t), hi = type_hi(t);
  if (op == "+") {
    lo = alo + blo, hi = ahi + bhi;
  } else if (op == "-") {
    lo = alo - bhi, hi = ahi - blo;
  } else if (op == "*") {
    const double p[] = {alo * blo, alo * bhi, ahi * blo, ahi * bhi};
    lo = *std::min_element(p, p + 4), hi = *std::max_element(p, p + 4);
  } else if (op == "/") {
    const double most = std::max(std::fabs(alo), std::fabs(ahi));  // |a / b| <= |a|; x / 0 is 0
    lo = ir::is_unsigned_type(t) ? 0 : -most, hi = most;
  } else if (op == "max") {
    lo = std::max(alo, blo), hi = std::max(ahi, bhi);
  } else if (op == "min") {
    lo = std::min(alo, blo), hi = std::min(ahi, bhi);
  } else if (op == "&" && alo >= 0 && blo >= 0) {
    lo = 0, hi = std::min(ahi, bhi);
  } else if ((op == "|" || op == "^") && alo >= 0 && blo >= 0) {
    lo = 0, hi = ones_up_to(std::max(ahi, bhi));
  }
  Gen out;
  if (op == "max" || op == "min") {
    out = typed(op + "(" + a.text + ", " + b.text + ")", t, lo, hi, true);
  } else if (is_comparison(op)) {
    out = typed(operand(a) + " " + op + " " + operand(b), DType::kBool, 0, 1, false);
  } else {
    out = typed(operand(a) + " " + op + " " + operand(b), t, lo, hi, false);
  }
  out.literal = a.literal && b.literal;
  return out;
}

Gen ProgramGenerator::int_read(StatementCtx& ctx, const GenTensor& t, bool shifted_self) {
  const std::string ref = reference(ctx, t, shifted_self);
  if (t.role == Role::kInput && !t.wide) {
    // The values input_values draws: -8..8, 0..16 unsigned, 0 or 1.
    return typed(ref, t.dtype, ir::is_unsigned_type(t.dtype) || t.dtype == DType::kBool ? 0 : -8,
                 ir::is_unsigned_type(t.dtype) ? 16 : t.dtype == DType::kBool ? 1 : 8, true);
  }
  return typed(ref, t.dtype, type_lo(t.dtype), type_hi(t.dtype), true);
}

Gen ProgramGenerator::int_as_float(const Gen& e) {
  if (e.bound <= 16) {
    if (e.type == DType::kI32 || e.type == DType::kBool) return e;
    // i8 * i8 would wrap where the float expression thinks of numbers: convert first.
    Gen f = call("f32", {e}, e.bound);
    f.type = DType::kF32;
    return f;
  }
  Gen scaled = binary(call("f32", {e}, INFINITY), "*", atom("0.125", 0.125, true), INFINITY);
  return call("tanh", {scaled}, 1);
}

Gen ProgramGenerator::nonliteral_int(StatementCtx& ctx) {
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput && !t.is_float() && !t.wide) return int_read(ctx, t, false);
  }
  Gen x = float_input(ctx);
  Gen scaled = binary(x, "*", atom("4", 4, true), 4 * x.bound);
  return cast(call("floor", {scaled}, 4 * x.bound + 1), DType::kI32);
}

Gen ProgramGenerator::edge_value() {
  const DType t = one_of(integer_types());
  const std::string name(ir::dtype_name(t));
  const int bits = ir::dtype_bits(t);
  const bool is_unsigned = ir::is_unsigned_type(t);
  const double top = std::ldexp(1.0, bits - 1);  // 2^(bits-1): the sign bit
  switch (pick(4)) {
    case 0:  // all ones: -1, or the greatest unsigned value
      return typed("~" + name + "(0)", t, is_unsigned ? type_hi(t) : -1, is_unsigned ? type_hi(t) : -1, false);
    case 1:  // the sign bit alone: the least signed value
      return typed(name + "(1) << " + std::to_string(bits - 1), t, is_unsigned ? top : -top, is_unsigned ? top : -top, false);
    case 2: {  // the greatest value
      if (bits == 64) {
        const std::string text = is_unsigned ? "~" + name + "(0)" : "~(" + name + "(1) << 63)";
        return typed(text, t, type_hi(t), type_hi(t), false);
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", type_hi(t) - pick(2));
      const double v = std::strtod(buf, nullptr);
      return typed(name + "(" + buf + ")", t, v, v, true);
    }
    default: {  // the least value, or one above it
      if (bits == 64 || is_unsigned) {
        const int plus = pick(2);
        const std::string base = is_unsigned ? name + "(" + std::to_string(plus) + ")" : "(" + name + "(1) << 63)";
        const std::string text = is_unsigned ? base : base + " + " + std::to_string(plus);
        const double v = is_unsigned ? plus : -top + plus;
        return typed(text, t, v, v, is_unsigned);
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", -top + pick(2));
      const double v = std::strtod(buf, nullptr);
      return typed(name + "(" + buf + ")", t, v, v, true);
    }
  }
}

Gen ProgramGenerator::int_leaf(StatementCtx& ctx) {
  std::vector<const GenTensor*> ints = readable(ctx, false, true);
  switch (pick(8)) {
    case 0:
    case 1:
    case 2:
      if (!ints.empty()) {
        const GenTensor& t = *one_of(ints);
        const bool self = &t == ctx.target && chance(0.5);
        return int_read(ctx, t, self);
      }
      [[fallthrough]];
    case 3: {
      if (chance(0.2)) {
        const bool v = chance(0.5);
        Gen g = typed(v ? "true" : "false", DType::kBool, v, v, true);
        g.literal = true;
        return g;
      }
      const int v = pick(6);
      Gen g = typed(std::to_string(v), DType::kI32, v, v, true);
      g.literal = g.weak = true;
      return g;
    }
    case 4:
      if (Index* index = value_index(ctx)) return typed(index->name, DType::kI32, 0, double(index->extent - 1), true);
      return typed("3", DType::kI32, 3, 3, true);
    case 5: {
      // An exact float, scaled and converted (saturating) to any integer type or bool.
      Gen x = float_input(ctx);
      const std::string factor = one_of(std::vector<std::string>{"2", "4", "8"});
      const DType to = chance(0.15) ? DType::kBool : one_of(integer_types());
      if (x.is_int()) {
        Gen k = typed(factor, DType::kI32, std::stod(factor), std::stod(factor), true);
        k.literal = k.weak = true;
        return cast(int_binary(x, "*", k), to);
      }
      Gen scaled = binary(x, "*", atom(factor, 8, true), 8 * x.bound);
      if (chance(0.5)) scaled = call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
      return cast(scaled, to);
    }
    case 6: {
      Gen c = truth(ctx, 0);
      return chance(0.5) ? c : cast(c, one_of(integer_types()));
    }
    default: return edge_value();
  }
}

Gen ProgramGenerator::int_expr(StatementCtx& ctx, int depth) {
  if (depth <= 0 || chance(0.35)) return int_leaf(ctx);
  Gen a = int_expr(ctx, depth - 1);
  auto second = [&] {
    Gen b = int_expr(ctx, depth - 1);
    for (int tries = 0; a.literal && b.literal && tries < 8; ++tries) b = int_expr(ctx, depth - 1);
    if (a.literal && b.literal) b = nonliteral_int(ctx);
    return b;
  };
  // A lone literal is typed by the operand beside it: give it a type of its own before an
  // operation that has no other operand (-, ~, pow, a shift's left side).
  auto own_type = [&](const Gen& g) { return g.weak ? cast(g, one_of(integer_types())) : g; };
  const DType arithmetic = a.type == DType::kBool ? DType::kI32 : a.type;
  switch (pick(17)) {
    case 0: { Gen b = second(); return int_binary(a, "+", b); }
    case 1: { Gen b = second(); return int_binary(a, "-", b); }
    case 2: { Gen b = second(); return int_binary(a, "*", b); }
    case 3: { Gen b = second(); return int_binary(a, "/", b); }  // b may be 0: x / 0 is 0
    case 4: {
      Gen x = own_type(a);
      const DType t = x.type == DType::kBool ? DType::kI32 : x.type;
      const auto [lo, hi] = range_in(x, t);
      std::string inner = operand(x);
      if (inner[0] == '-') inner = "(" + inner + ")";
      return typed("-" + inner, t, -hi, -lo, false);
    }
    case 5: {
      const auto [lo, hi] = range_in(a, arithmetic);
      const double l = lo >= 0 ? lo : hi <= 0 ? -hi : 0, h = std::max(std::fabs(lo), std::fabs(hi));
      Gen g = typed(call("abs", {a}, 0).text, arithmetic, l, h, true);  // abs(MIN) wraps: the range says so
      g.literal = a.literal, g.weak = a.weak;
      return g;
    }
    case 6: {
      const auto [lo, hi] = range_in(a, arithmetic);
      Gen g = typed(call("relu", {a}, 0).text, arithmetic, std::max(lo, 0.0), std::max(hi, 0.0), true);
      g.literal = a.literal, g.weak = a.weak;
      return g;
    }
    case 7: { Gen b = second(); return int_binary(a, chance(0.5) ? "max" : "min", b); }
    case 8: {
      Gen c = condition(ctx, depth - 1);
      Gen b = second();
      std::optional<DType> t = combined_type(a, b, false);
      if (!t) {
        b = cast(b, a.type == DType::kU64 ? DType::kU64 : DType::kI64);
        if (a.type == DType::kU64) t = DType::kU64;
        else { a = cast(a, DType::kI64); t = DType::kI64; }
      }
      const auto [alo, ahi] = range_in(a, *t);
      const auto [blo, bhi] = range_in(b, *t);
      Gen g = typed("select(" + c.text + ", " + a.text + ", " + b.text + ")", *t, std::min(alo, blo), std::max(ahi, bhi), true);
      return g;
    }
    case 9: {
      Gen b = second();
      return int_binary(a, one_of(std::vector<std::string>{"<", "<=", ">", ">=", "==", "!="}), b);
    }
    case 10: {
      // pow of integers is computed in f64 and saturated: exact while a^2 is (and every
      // device's pow gives the exact square).
      Gen x = own_type(a);
      if (x.bound > 0x1p20) { Gen b = second(); return int_binary(a, "+", b); }
      const DType t = x.type == DType::kBool ? DType::kI32 : x.type;
      const double lo = x.lo >= 0 ? x.lo * x.lo : x.hi <= 0 ? x.hi * x.hi : 0;
      return typed("pow(" + x.text + ", 2)", t, lo, std::min(x.bound * x.bound, type_hi(t)), true);
    }
    case 11: {
      const auto [lo, hi] = range_in(a, arithmetic);
      Gen g = typed(call(chance(0.5) ? "floor" : "ceil", {a}, 0).text, arithmetic, lo, hi, true);
      g.literal = a.literal, g.weak = a.weak;
      return g;
    }
    case 12: { Gen b = second(); return int_binary(a, one_of(std::vector<std::string>{"&", "|", "^"}), b); }
    case 13: {
      Gen x = own_type(a);
      if (x.type == DType::kBool) return typed("~" + operand(x), DType::kBool, 0, 1, false);
      const auto [lo, hi] = range_in(x, x.type);
      if (ir::is_unsigned_type(x.type)) return typed("~" + operand(x), x.type, type_hi(x.type) - hi, type_hi(x.type) - lo, false);
      return typed("~" + operand(x), x.type, -hi - 1, -lo - 1, false);
    }
    case 14:
    case 15: {
      // A shift keeps its left operand's type (an integer, not bool); the amount may be any
      // integer, out of range too (then 0, or -1 for >> of a negative value).
      Gen x = own_type(a);
      if (x.type == DType::kBool) x = cast(x, one_of(integer_types()));
      Gen amount;
      if (chance(0.5)) {
        static const std::vector<int> amounts = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100};
        const int v = one_of(amounts);
        amount = typed(std::to_string(v), DType::kI32, v, v, true);
        amount.literal = amount.weak = true;
      } else {
        amount = int_leaf(ctx);
        if (amount.type == DType::kBool) amount = cast(amount, DType::kI8);
        if (amount.weak) amount = cast(amount, one_of(integer_types()));
      }
      const auto [lo, hi] = range_in(x, x.type);
      const bool left = chance(0.5);
      const std::string text = operand(x) + (left ? " << " : " >> ") + operand(amount);
      if (left) return typed(text, x.type, type_lo(x.type), type_hi(x.type), false);
      return typed(text, x.type, std::min(lo, lo < 0 ? -1.0 : 0.0), std::max(hi, 0.0), false);
    }
    default: {
      // A conversion to another integer type (wraps) or to bool (!= 0).
      if (a.weak) return a;
      return cast(a, chance(0.15) ? DType::kBool : one_of(integer_types()));
    }
  }
}

}  // namespace kiln::e2e
