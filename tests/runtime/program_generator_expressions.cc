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
  std::vector<const GenTensor*> floats, ints;
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput) (t.is_float() ? floats : ints).push_back(&t);
  }
  if (!floats.empty()) return atom(reference(ctx, *one_of(floats), false), 1);
  return atom(reference(ctx, *one_of(ints), false), 8);
}

Gen ProgramGenerator::nonliteral_int(StatementCtx& ctx) {
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput && !t.is_float()) return atom(reference(ctx, t, false), 8);
  }
  return call("i32", {call("floor", {binary(float_input(ctx), "*", atom("4", 4, true), 4)}, 4)}, 4);
}

Gen ProgramGenerator::negate(const Gen& a) {
  std::string inner = operand(a);
  if (!inner.empty() && inner[0] == '-') inner = "(" + inner + ")";
  return Gen{"-" + inner, a.bound, a.literal, false};
}

Gen ProgramGenerator::condition(StatementCtx& ctx, int depth) {
  static const std::vector<std::string> cmp = {"<", "<=", ">", ">=", "==", "!="};
  switch (pick(4)) {
    case 0: {
      Gen a = int_expr(ctx, depth), b = int_expr(ctx, depth);
      return binary(a, one_of(cmp), b, 1);
    }
    case 1: {
      Gen x = float_input(ctx);
      return binary(x, one_of(cmp), atom(one_of(std::vector<std::string>{"0", "0.25", "-0.5"}), 1, true), 1);
    }
    case 2: return binary(float_input(ctx), one_of(cmp), float_input(ctx), 1);
    default: return int_expr(ctx, depth);
  }
}

Gen ProgramGenerator::exact_float(StatementCtx& ctx) {
  switch (pick(3)) {
    case 0: return condition(ctx, 1);
    case 1: {
      Gen x = float_input(ctx);
      Gen scaled = binary(x, "*", atom(one_of(std::vector<std::string>{"2", "4", "8", "0.5"}), 8, true), 8 * x.bound);
      return call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
    }
    default: {
      Gen x = float_input(ctx);
      return call("select", {condition(ctx, 1), x, atom("0.5", 0.5, true)}, 1);
    }
  }
}

Gen ProgramGenerator::int_expr(StatementCtx& ctx, int depth) {
  if (depth <= 0 || chance(0.35)) {
    std::vector<const GenTensor*> ints = readable(ctx, false, true);
    switch (pick(6)) {
      case 0:
      case 1:
        if (!ints.empty()) {
          const GenTensor& t = *one_of(ints);
          const bool self = &t == ctx.target && chance(0.5);
          return atom(reference(ctx, t, self), t.role == Role::kInput ? 8 : INFINITY);
        }
        [[fallthrough]];
      case 2: return atom(std::to_string(pick(6)), 5, true);
      case 3:
        if (Index* index = value_index(ctx)) return atom(index->name, double(index->extent));
        return atom("3", 3, true);
      case 4: {
        Gen x = float_input(ctx);
        Gen scaled = binary(x, "*", atom(one_of(std::vector<std::string>{"2", "4", "8"}), 8, true), 8 * x.bound);
        if (chance(0.5)) scaled = call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
        return call("i32", {scaled}, 8 * x.bound + 1);
      }
      default: return call("i32", {condition(ctx, 0)}, 1);
    }
  }
  Gen a = int_expr(ctx, depth - 1);
  auto second = [&] {
    Gen b = int_expr(ctx, depth - 1);
    for (int tries = 0; a.literal && b.literal && tries < 8; ++tries) b = int_expr(ctx, depth - 1);
    if (a.literal && b.literal) b = nonliteral_int(ctx);
    return b;
  };
  switch (pick(12)) {
    case 0: { Gen b = second(); return binary(a, "+", b, a.bound + b.bound); }
    case 1: { Gen b = second(); return binary(a, "-", b, a.bound + b.bound); }
    case 2: { Gen b = second(); return binary(a, "*", b, a.bound * b.bound); }
    case 3: { Gen b = second(); return binary(a, "/", b, a.bound); }
    case 4: return negate(a);
    case 5: return call("abs", {a}, a.bound);
    case 6: return call("relu", {a}, a.bound);
    case 7: { Gen b = second(); return call(chance(0.5) ? "max" : "min", {a, b}, std::max(a.bound, b.bound)); }
    case 8: { Gen b = second(); return call("select", {condition(ctx, depth - 1), a, b}, std::max(a.bound, b.bound)); }
    case 9: { Gen b = second(); return binary(a, one_of(std::vector<std::string>{"<", ">=", "!="}), b, 1); }
    case 10: return call("pow", {a, atom("2", 2, true)}, a.bound * a.bound);
    default: return call(chance(0.5) ? "floor" : "ceil", {a}, a.bound);
  }
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
    return atom(reference(ctx, *t, false), 2);
  }
  std::vector<const GenTensor*> floats = readable(ctx, true, false);
  const int kind = pick(12);
  if (kind < 6 && !floats.empty()) {
    // Prefer the target itself now and then (a read at a shifted point).
    const GenTensor* t = one_of(floats);
    if (ctx.target->is_float() && chance(0.15)) t = ctx.target;
    const bool self = t == ctx.target && chance(0.7);
    std::string ref = reference(ctx, *t, self);
    if (t->role == Role::kConst) return atom(ref, std::fabs(t->value));
    if (t->role == Role::kInput) return atom(ref, 1);
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
    case 9: {
      Gen e = int_expr(ctx, 2);
      if (e.bound <= 16) return e;
      return call("tanh", {binary(call("f32", {e}, INFINITY), "*", atom("0.125", 0.125, true), INFINITY)}, 1);
    }
    case 10: {
      // Non-input i32 tensors: squashed.
      std::vector<const GenTensor*> ints = readable(ctx, false, false);
      if (!ints.empty()) {
        const GenTensor& t = *one_of(ints);
        std::string ref = reference(ctx, t, false);
        if (t.role == Role::kInput) return atom(ref, 8);
        return call("tanh", {binary(call("f32", {atom(ref, INFINITY)}, INFINITY), "*", atom("0.125", 0.125, true), INFINITY)}, 1);
      }
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
    case 22: out = binary(a, "*", exact_float(ctx), a.bound * 9); break;
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
  std::vector<const GenTensor*> inputs;
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kInput && t.is_float() && t.rank() > 0) inputs.push_back(&t);
  }
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
  Gen arg = atom(read, 1);
  if (nesting == 0 && chance(0.3)) {
    Gen nested = shape_bound(inner_reduction(ctx, 1), 1);
    arg = binary(arg, one_of(std::vector<std::string>{"-", "*", "+"}), nested, 2);
  }
  const int64_t extent = t.dims[static_cast<size_t>(along)];
  switch (pick(5)) {
    case 0: return call("sum", {arg}, arg.bound * static_cast<double>(extent));
    case 1: return call("mean", {arg}, arg.bound);
    case 2: return call("max", {arg}, arg.bound);
    case 3: return call("min", {arg}, arg.bound);
    default: return call("prod", {shape_bound(arg, 1)}, 1);
  }
}

}  // namespace kiln::e2e
