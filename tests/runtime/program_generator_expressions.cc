// The random program generator (program_generator.h): expressions, each with a bound on its
// magnitude, exact where discontinuous operations see them.
#include "runtime/program_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace kiln::e2e {

using ir::DType;
using ir::Role;

Gen ProgramGenerator::atom(std::string text, double bound, bool literal) {
  return Gen{std::move(text), bound, literal, true};
}

Gen ProgramGenerator::binary(const Gen& a, const std::string& op, const Gen& b, double bound) {
  return Gen{operand(a) + " " + op + " " + operand(b), bound, a.literal && b.literal, false};
}

Gen ProgramGenerator::call(const std::string& f, const std::vector<Gen>& args, double bound) {
  std::string text = f + "(";
  bool literal = true;
  for (size_t i = 0; i < args.size(); ++i) {
    text += (i ? ", " : "") + args[i].text;
    literal = literal && args[i].literal;
  }
  return Gen{text + ")", bound, literal, true};
}

Gen ProgramGenerator::shape_bound(const Gen& e, double limit) {
  if (e.bound <= limit) return e;
  Gen squashed = call(chance(0.8) ? "tanh" : "sin", {e}, 1);
  if (limit >= 1) return squashed;
  return binary(atom(format_number(limit), limit, true), "*", squashed, limit);
}

Gen ProgramGenerator::float_input(StatementCtx& ctx) {
  std::vector<const GenTensor*> floats, ints, narrow;
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput && t.is_float()) floats.push_back(&t);
    if (t.role == Role::kInput && !t.is_float() && !t.wide) ints.push_back(&t);
  }
  for (const GenTensor* t : readable(ctx, true, true)) {
    if (t->narrow_exact) narrow.push_back(t);
  }
  if (!narrow.empty() && chance(0.25)) return atom(reference(ctx, *one_of(narrow), false), kNarrowExactBound);
  if (!floats.empty()) return atom(reference(ctx, *one_of(floats), false), 1);
  const GenTensor& t = *one_of(ints);
  Gen read = int_read(ctx, t, false);
  if (t.dtype == DType::kI32) return read;
  return call("f32", {read}, read.bound);  // i8 * 8 would wrap
}

Gen ProgramGenerator::negate(const Gen& a) {
  std::string inner = operand(a);
  if (!inner.empty() && inner[0] == '-') inner = "(" + inner + ")";
  return Gen{"-" + inner, a.bound, a.literal, false};
}

Gen ProgramGenerator::condition(StatementCtx& ctx, int depth) {
  switch (pick(5)) {
    case 0: return int_expr(ctx, depth);  // any integer type: non-zero is true
    case 1: return truth(ctx, depth);
    default: return truth(ctx, 0);
  }
}

Gen ProgramGenerator::truth(StatementCtx& ctx, int depth) {
  static const std::vector<std::string> cmp = {"<", "<=", ">", ">=", "==", "!="};
  auto boolean = [](Gen g) {
    g.type = DType::kBool, g.lo = 0, g.hi = 1, g.bound = 1;
    return g;
  };
  switch (pick(depth > 0 ? 7 : 5)) {
    case 0: {
      Gen a = int_expr(ctx, depth);
      Gen b = int_expr(ctx, depth);
      const std::string op = one_of(cmp);
      return int_binary(a, op, b);
    }
    case 1: {
      Gen x = float_input(ctx);
      const std::string op = one_of(cmp);
      Gen literal = atom(one_of(std::vector<std::string>{"0", "0.25", "-0.5"}), 1, true);
      return boolean(binary(x, op, literal, 1));
    }
    case 2: {
      Gen x = float_input(ctx);
      const std::string op = one_of(cmp);
      Gen y = float_input(ctx);
      return boolean(binary(x, op, y, 1));
    }
    case 3: {
      // A bool tensor, or a bool literal.
      std::vector<const GenTensor*> bools;
      for (const GenTensor* t : readable(ctx, false, true)) {
        if (t->dtype == DType::kBool) bools.push_back(t);
      }
      if (!bools.empty()) return int_read(ctx, *one_of(bools), false);
      const bool v = chance(0.5);
      Gen g = typed(v ? "true" : "false", DType::kBool, v, v, true);
      g.literal = true;
      return g;
    }
    case 4: {
      Gen x = float_input(ctx);
      Gen zero = atom("0", 0, true);
      return boolean(binary(x, one_of(cmp), zero, 1));
    }
    case 5: {
      // & | ^ of bools are the logical operators.
      Gen a = truth(ctx, depth - 1);
      Gen b = truth(ctx, depth - 1);
      const std::string op = one_of(std::vector<std::string>{"&", "|", "^"});
      return int_binary(a, op, b);
    }
    default: {
      Gen a = truth(ctx, depth - 1);
      return typed("~" + operand(a), DType::kBool, 0, 1, false);
    }
  }
}

Gen ProgramGenerator::exact_float(StatementCtx& ctx) {
  switch (pick(4)) {
    case 0: return truth(ctx, 1);
    case 1: {
      Gen x = float_input(ctx);
      Gen scaled = binary(x, "*", atom(one_of(std::vector<std::string>{"2", "4", "8", "0.5"}), 8, true), 8 * x.bound);
      return call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
    }
    case 2: {
      Gen x = float_input(ctx);
      Gen c = condition(ctx, 1);
      return call("select", {c, x, atom("0.5", 0.5, true)}, x.bound);
    }
    default: {
      // Rounding an exact value to f16 / bf16 rounds alike everywhere. (Every Gen made is
      // used: making one marks the indices it reads as used.)
      Gen v;
      switch (pick(3)) {
        case 0: v = float_input(ctx); break;
        case 1: {
          Gen x = float_input(ctx);
          v = binary(x, "*", atom(one_of(std::vector<std::string>{"0.5", "2", "4", "8"}), 8, true), 8 * x.bound);
          break;
        }
        default: {
          // An integer (through f32), its low byte where it could overflow f16.
          v = int_expr(ctx, 1);
          if (v.bound > 65504) {
            Gen mask = typed("255", DType::kI32, 255, 255, true);
            mask.literal = mask.weak = true;
            v = int_binary(v, "&", mask);
          }
          break;
        }
      }
      const DType to = chance(0.5) ? DType::kF16 : DType::kBF16;
      Gen out = call(std::string(ir::dtype_name(to)), {v}, v.bound);
      out.type = to;
      return out;
    }
  }
}

Gen ProgramGenerator::narrow_exact_value(StatementCtx& ctx) {
  Gen e = chance(0.25) ? int_expr(ctx, 1) : exact_float(ctx);
  if (e.bound <= kNarrowExactBound) return e;
  // Kept within the bound exactly: the low bits of an integer, a float clamped.
  if (e.is_int()) {
    Gen mask = typed("15", DType::kI32, 15, 15, true);
    mask.literal = mask.weak = true;
    return int_binary(e, "&", mask);
  }
  return call("min", {call("max", {e, atom("-16", 16, true)}, kNarrowExactBound), atom("16", 16, true)}, kNarrowExactBound);
}

Index* ProgramGenerator::value_index(StatementCtx& ctx) {
  std::vector<Index*> candidates;
  for (Index& index : ctx.indices) {
    if (index.in_subscript) candidates.push_back(&index);
  }
  if (candidates.empty()) return nullptr;
  return one_of(candidates);
}

Gen ProgramGenerator::squash(const std::string& ref) {
  switch (pick(3)) {
    case 0: return call("tanh", {atom(ref, INFINITY)}, 1);
    case 1: return call("sigmoid", {atom(ref, INFINITY)}, 1);
    default: return call("tanh", {binary(atom(ref, INFINITY), "*", atom("0.5", 0.5, true), INFINITY)}, 1);
  }
}

Gen ProgramGenerator::float_leaf(StatementCtx& ctx) {
  if (const GenTensor* t = ctx.must_read) {
    ctx.must_read = nullptr;
    return atom(reference(ctx, *t, false), t->narrow_exact ? kNarrowExactBound : 2);
  }
  std::vector<const GenTensor*> floats = readable(ctx, true, false);
  const int kind = pick(12);
  if (kind < 6 && !floats.empty()) {
    // Prefer the target itself now and then (a read at a shifted point).
    const GenTensor* t = one_of(floats);
    if (ctx.target->is_wide_float() && chance(0.15)) t = ctx.target;
    const bool self = t == ctx.target && chance(0.7);
    std::string ref = reference(ctx, *t, self);
    if (t->role == Role::kConst) return atom(ref, std::fabs(t->value));
    if (t->role == Role::kInput) return atom(ref, 1);
    if (t->narrow_exact) return atom(ref, kNarrowExactBound);
    if (t->bounded) return atom(ref, 2);
    return squash(ref);
  }
  switch (kind) {
    case 6:
    case 7: {
      static const std::vector<std::pair<std::string, double>> literals = {
          {"0.5", 0.5}, {"0.25", 0.25}, {"1.5", 1.5}, {"2", 2}, {"3", 3}, {"0.75", 0.75},
          {"1e-1", 0.1}, {"2.5E-1", 0.25}, {"1.0", 1}, {"0.125", 0.125}};
      auto [text, bound] = one_of(literals);
      return atom(text, bound, true);
    }
    case 8:
      if (Index* index = value_index(ctx)) {
        if (chance(0.5)) return atom(index->name, double(index->extent));
        return binary(call("f32", {atom(index->name, double(index->extent))}, double(index->extent)), "*",
                      atom("0.25", 0.25, true), double(index->extent) * 0.25);
      }
      return atom("0.5", 0.5, true);
    case 9: return int_as_float(int_expr(ctx, 2));
    case 10: {
      // Integer and bool tensors: inputs as they are, others (any value) squashed.
      std::vector<const GenTensor*> ints = readable(ctx, false, false);
      if (!ints.empty()) return int_as_float(int_read(ctx, *one_of(ints), false));
      return float_input(ctx);
    }
    default: {
      Gen e = exact_float(ctx);
      return e;
    }
  }
}

Gen ProgramGenerator::float_expr(StatementCtx& ctx, int depth) {
  if (depth <= 0 || chance(0.3)) return float_leaf(ctx);
  Gen a = float_expr(ctx, depth - 1);
  auto second = [&] {
    Gen b = float_expr(ctx, depth - 1);
    for (int tries = 0; a.literal && b.literal && tries < 8; ++tries) b = float_leaf(ctx);
    if (a.literal && b.literal) b = nonliteral_float(ctx);
    return b;
  };
  Gen out;
  switch (pick(27)) {
    case 26: {
      // Not in the row block, whose statements are there to be fused row by row.
      Gen r = ctx.row_mode || !inner_reductions_ ? float_leaf(ctx) : shape_bound(inner_reduction(ctx, 0), 2);
      out = binary(a, chance(0.5) ? "+" : "*", r, a.bound * 2 + 2);
      break;
    }
    case 0: case 1: { Gen b = second(); out = binary(a, "+", b, a.bound + b.bound); break; }
    case 2: case 3: { Gen b = second(); out = binary(a, "-", b, a.bound + b.bound); break; }
    case 4: case 5: { Gen b = second(); out = binary(a, "*", b, a.bound * b.bound); break; }
    case 6: {
      Gen b = shape_bound(second(), 4);
      Gen denominator = binary(atom("1", 1, true), "+", binary(b, "*", b, 16), 17);
      out = binary(a, "/", denominator, a.bound);
      break;
    }
    case 7: out = negate(a); break;
    case 8: {
      Gen x = a.bound <= 3 ? a : call("tanh", {a}, 1);
      out = call("exp", {x}, std::exp(x.bound));
      break;
    }
    case 9: {
      Gen inner = binary(call("abs", {a}, a.bound), "+", atom("1", 1, true), a.bound + 1);
      out = call("log", {inner}, std::log(a.bound + 1) + 1e-9);
      break;
    }
    case 10: out = call("sqrt", {call("abs", {a}, a.bound)}, std::sqrt(a.bound) + 1e-9); break;
    case 11: {
      Gen inner = binary(call("abs", {a}, a.bound), "+", atom("1", 1, true), a.bound + 1);
      out = call("rsqrt", {inner}, 1);
      break;
    }
    case 12: out = call("tanh", {a}, 1); break;
    case 13: out = call("sigmoid", {a}, 1); break;
    case 14: out = call("relu", {a}, a.bound); break;
    case 15: out = call("abs", {a}, a.bound); break;
    case 16: out = call(chance(0.5) ? "sin" : "erf", {a}, 1); break;
    case 17: out = call("cos", {a}, 1); break;
    case 18: { Gen b = second(); out = call(chance(0.5) ? "max" : "min", {a, b}, std::max(a.bound, b.bound)); break; }
    case 19: {
      Gen base = binary(call("sigmoid", {a}, 1), "+", atom("0.5", 0.5, true), 1.5);
      Gen exponent = shape_bound(second(), 2);
      out = call("pow", {base, exponent}, 4);
      break;
    }
    case 20: { Gen b = second(); out = call("select", {condition(ctx, 1), a, b}, std::max(a.bound, b.bound)); break; }
    case 21: out = call(chance(0.5) ? "f64" : "f32", {a}, a.bound); break;
    case 22: {
      Gen e = exact_float(ctx);
      out = binary(a, "*", e, a.bound * e.bound);
      break;
    }
    case 23: {
      // floor / ceil of an exact value, scaled back.
      Gen x = float_input(ctx);
      Gen scaled = binary(x, "*", atom("4", 4, true), 4 * x.bound);
      Gen f = call(chance(0.5) ? "floor" : "ceil", {scaled}, 4 * x.bound + 1);
      out = binary(a, "+", binary(f, "*", atom("0.25", 0.25, true), x.bound + 1), a.bound + x.bound + 1);
      break;
    }
    default: {
      // Precedence: A * B + C without parentheses around the product.
      Gen b = second(), c = float_expr(ctx, depth - 1);
      if (c.literal) c = nonliteral_float(ctx);
      out = Gen{operand(a) + " * " + operand(b) + " + " + operand(c), a.bound * b.bound + c.bound, false, false};
      break;
    }
  }
  if (out.bound > 8) out = call("tanh", {out}, 1);
  return out;
}

Gen ProgramGenerator::inner_reduction(StatementCtx& ctx, int nesting) {
  std::vector<const GenTensor*> inputs, ints;
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput && t.is_float() && t.rank() > 0) inputs.push_back(&t);
    if (t.role == Role::kInput && !t.is_float() && !t.wide && t.rank() > 0) ints.push_back(&t);
  }
  // Now and then one of an integer or bool input (accumulated in i64 / u64 or f64).
  if (!ints.empty() && (inputs.empty() || chance(0.25))) inputs = ints;
  if (inputs.empty()) return float_input(ctx);
  const GenTensor& t = *one_of(inputs);
  const std::string fresh = "u" + std::to_string(fresh_indices_++);
  const int along = pick(t.rank());
  std::string read = t.name + "[";
  for (int d = 0; d < t.rank(); ++d) {
    std::string sub = d == along ? fresh : "0";
    if (d != along) {
      // A target index of the same size keeps the reduction per target point.
      for (const Index& index : ctx.indices) {
        if (index.target && index.extent == t.dims[static_cast<size_t>(d)] && chance(0.6)) sub = index.name;
      }
    }
    read += (d ? ", " : "") + sub;
  }
  read += "]";
  const int64_t extent = t.dims[static_cast<size_t>(along)];
  // argmax / argmin (an i32 temporary, -1 for no point) of the exact read alone.
  auto position = [&] {
    const std::string f = chance(0.5) ? "argmax" : "argmin";
    return int_as_float(typed(f + "(" + read + ")", DType::kI32, -1, double(extent - 1), true));
  };
  if (!t.is_float()) {
    // sum and prod accumulate in i64 (u64 for unsigned types), mean in f64, max and min keep
    // the type.
    const double lo = ir::is_unsigned_type(t.dtype) || t.dtype == DType::kBool ? 0 : -8;
    const double hi = t.dtype == DType::kBool ? 1 : ir::is_unsigned_type(t.dtype) ? 16 : 8;
    const DType wide = ir::is_unsigned_type(t.dtype) ? DType::kU64 : DType::kI64;
    const double n = static_cast<double>(extent);
    switch (pick(6)) {
      case 0: return int_as_float(typed("sum(" + read + ")", wide, lo * n, hi * n, true));
      case 1: return call("mean", {atom(read, hi)}, hi);
      case 2: return int_as_float(typed("max(" + read + ")", t.dtype, lo, hi, true));
      case 3: return int_as_float(typed("min(" + read + ")", t.dtype, lo, hi, true));
      case 4: {
        const double most = std::pow(hi, n);  // |product| <= 16^extent
        return int_as_float(typed("prod(" + read + ")", wide, lo < 0 ? -most : 0, most, true));
      }
      default: return position();
    }
  }
  Gen arg = atom(read, 1);
  const bool nested = nesting == 0 && chance(0.3);
  if (nested) {
    Gen inner = shape_bound(inner_reduction(ctx, 1), 1);
    arg = binary(arg, one_of(std::vector<std::string>{"-", "*", "+"}), inner, 2);
  }
  switch (pick(nested ? 5 : 6)) {
    case 0: return call("sum", {arg}, arg.bound * static_cast<double>(extent));
    case 1: return call("mean", {arg}, arg.bound);
    case 2: return call("max", {arg}, arg.bound);
    case 3: return call("min", {arg}, arg.bound);
    case 4: return call("prod", {shape_bound(arg, 1)}, 1);
    default: return position();
  }
}

}  // namespace kiln::e2e
