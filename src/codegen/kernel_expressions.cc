// Pass 2 of the kernel emitter (kernel_emitter.h), expressions: conversions, integer arithmetic
// printed plainly where its range allows and through the wrapping helpers elsewhere, conditions
// and every op of the loop IR.
#include <limits>
#include <algorithm>

#include "codegen/kernel_emitter.h"
#include "kiln/ir/sizes.h"

namespace kiln::codegen::internal {

Result<Code> KernelEmitter::offset(const LExprRef& e) {
  KILN_ASSIGN_OR_RETURN(Code code, expr(e));
  return convert(code, e->type, DType::kI64);
}

Code KernelEmitter::convert(const Code& code, DType from, DType to) {
  if (from == to) return code;
  const std::string cast = "(" + std::string(tname(to)) + ")";
  if (is_float(to)) {
    // Integer to float rounds to nearest; f64 to f32 likewise (to infinity beyond the range).
    return {cast + operand(code, kPrecUnary), kPrecUnary};
  }
  if (!is_float(from)) {
    // Integer to integer: exact where the range fits, else saturating (to i32).
    if (fits(code.range.lo, code.range.hi, to)) {
      if (code.range.lo == code.range.hi) return int_const(code.range.lo, to);
      Code out{cast + operand(code, kPrecUnary), kPrecUnary};
      out.range = code.range;
      return out;
    }
    ++range_fallbacks_;
    Code out = call(helpers_.use("kiln_i64_to_i32"), {code});
    out.range = {std::max(code.range.lo, type_range(to).lo), std::min(code.range.hi, type_range(to).hi)};
    return out;
  }
  // Float to integer: truncating, saturating, NaN -> 0.
  Code out = call(helpers_.use("kiln_" + std::string(ir::dtype_name(from)) + "_to_" +
                               std::string(ir::dtype_name(to))),
                  {code});
  out.range = type_range(to);
  return out;
}

Code KernelEmitter::int_arith(Op op, Code a, Code b, DType t) {
  // Identities (exact for integers, wrapping included): x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1.
  auto is_const = [](const Code& c, int64_t v) { return c.range.lo == v && c.range.hi == v; };
  if ((op == Op::kAdd && is_const(a, 0)) || (op == Op::kMul && is_const(a, 1))) return b;
  if (((op == Op::kAdd || op == Op::kSub) && is_const(b, 0)) ||
      ((op == Op::kMul || op == Op::kDiv) && is_const(b, 1))) {
    return a;
  }
  const Wide alo = a.range.lo, ahi = a.range.hi, blo = b.range.lo, bhi = b.range.hi;
  const char* name = op == Op::kAdd ? "add" : op == Op::kSub ? "sub" : op == Op::kMul ? "mul" : "div";
  bool plain = false;
  Wide lo = 0, hi = 0;
  switch (op) {
    case Op::kAdd:
      lo = alo + blo, hi = ahi + bhi;
      plain = fits(lo, hi, t);
      break;
    case Op::kSub:
      lo = alo - bhi, hi = ahi - blo;
      plain = fits(lo, hi, t);
      break;
    case Op::kMul: {
      const Wide c[4] = {alo * blo, alo * bhi, ahi * blo, ahi * bhi};
      lo = std::min({c[0], c[1], c[2], c[3]});
      hi = std::max({c[0], c[1], c[2], c[3]});
      plain = fits(lo, hi, t);
      break;
    }
    case Op::kDiv: {
      // Plain C division when the divisor is never 0 and MIN / -1 cannot happen; then the
      // quotient's extremes are at the corners (the divisor keeps one sign).
      const bool nonzero = blo > 0 || bhi < 0;
      const bool min_by_minus_one = blo <= -1 && bhi >= -1 && alo == type_range(t).lo;
      plain = nonzero && !min_by_minus_one;
      if (plain) {
        const Wide c[4] = {alo / blo, alo / bhi, ahi / blo, ahi / bhi};
        lo = std::min({c[0], c[1], c[2], c[3]});
        hi = std::max({c[0], c[1], c[2], c[3]});
      }
      break;
    }
    default:
      break;
  }
  if (!plain) {
    ++range_fallbacks_;
    Code out = call(helper(name, t), {a, b});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);  // folded
  if ((op == Op::kAdd || op == Op::kSub) && b.range.lo == b.range.hi && b.range.lo < 0 &&
      b.range.lo > type_range(t).lo) {
    // x + -1 reads better as x - 1 (the same value).
    op = op == Op::kAdd ? Op::kSub : Op::kAdd;
    const bool narrow = b.narrow;
    b = int_const(-b.range.lo, t);
    b.narrow = narrow;
  }
  if (a.narrow && b.narrow) a = {"(" + std::string(tname(t)) + ")" + operand(a, kPrecUnary), kPrecUnary};
  const int prec = op == Op::kAdd || op == Op::kSub ? kPrecAdditive : kPrecMultiplicative;
  Code out = infix(a, ir::op_name(op), b, prec);
  out.range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  return out;
}

Code KernelEmitter::int_neg(const Code& a, DType t) {
  const Wide lo = -static_cast<Wide>(a.range.hi), hi = -static_cast<Wide>(a.range.lo);
  if (!fits(lo, hi, t)) {
    ++range_fallbacks_;
    Code out = call(helper("neg", t), {a});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);
  Code out = negate(a);
  out.range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  return out;
}

Result<Code> KernelEmitter::condition(const LExprRef& c) {
  if (c->kind == LExpr::Kind::kOp && ir::is_comparison(c->op)) {
    // (T)(a < b) != 0 is a < b.
    KILN_ASSIGN_OR_RETURN(Code a, expr(c->args[0]));
    KILN_ASSIGN_OR_RETURN(Code b, expr(c->args[1]));
    DType t = ir::promote(c->args[0]->type, c->args[1]->type);
    a = convert(a, c->args[0]->type, t);
    b = convert(b, c->args[1]->type, t);
    int prec = c->op == Op::kEq || c->op == Op::kNe ? kPrecEquality : kPrecRelational;
    return infix(a, ir::op_name(c->op), b, prec);
  }
  KILN_ASSIGN_OR_RETURN(Code x, expr(c));
  return infix(x, "!=", literal(0, c->type, d_), kPrecEquality);
}

Result<Code> KernelEmitter::expr(const LExprRef& e) {
  switch (e->kind) {
    case LExpr::Kind::kConst:
      return literal(e->value, e->type, d_);
    case LExpr::Kind::kVar: {
      const std::optional<int64_t>& extent = var_extent_[e->var];
      if (!extent) {
        return error("loop variable v" + std::to_string(e->var) + " is used outside its loop");
      }
      Code v{var_name(e->var), kPrecPrimary};
      v.range = {0, std::max<int64_t>(0, *extent - 1)};
      return convert(v, DType::kI64, e->type);
    }
    case LExpr::Kind::kSize: {
      // Declared at the kernel's start from its push constants (kernel_statements.cc).
      printed_sizes_.insert(e->size);
      Code v{"kiln_size" + std::to_string(e->size), kPrecPrimary};
      v.range = {0, size_hi_};  // what the runtime lets a size be, or what sized_body tested
      return v;
    }
    case LExpr::Kind::kLoad: {
      const BindingInfo& b = bindings_[binding_of_node_.at(e->node)];
      KILN_ASSIGN_OR_RETURN(Code at, offset(e->offset));
      Code out{b.var + "[" + at.text + "]", kPrecPrimary};
      out.range = type_range(e->type);
      return out;
    }
    case LExpr::Kind::kLocalLoad: {
      const std::optional<DType>& type = local_in_scope_[e->local];
      if (!type) return error("loads local l" + std::to_string(e->local) + " outside its scope");
      if (*type != e->type) {
        return error("loads local l" + std::to_string(e->local) + " (" +
                     std::string(ir::dtype_name(*type)) + ") as " + std::string(ir::dtype_name(e->type)));
      }
      KILN_ASSIGN_OR_RETURN(Code at, offset(e->offset));
      Code out{local_name(e->local) + "[" + at.text + "]", kPrecPrimary};
      out.range = type_range(e->type);
      return out;
    }
    case LExpr::Kind::kOp:
      return op(*e);
  }
  return error("unknown expression kind");
}

// exp, log, ... of a float type.
Code KernelEmitter::unary_float(Op op, const Code& x, DType t) {
  switch (op) {
    case Op::kExp:
    case Op::kLog:
    case Op::kTanh:
    case Op::kErf: {
      const std::string_view name = op == Op::kExp ? "exp" : op == Op::kLog ? "log" : op == Op::kTanh ? "tanh" : "erf";
      if (t == DType::kF32 && d_.own_math_f32()) return call(helper(name, t), {x});
      return call(d_.math_function(name, t), {x});
    }
    case Op::kSqrt: return call(d_.math_function("sqrt", t), {x});
    case Op::kSin: return call(d_.math_function("sin", t), {x});
    case Op::kCos: return call(d_.math_function("cos", t), {x});
    case Op::kFloor: return call(d_.math_function("floor", t), {x});
    case Op::kCeil: return call(d_.math_function("ceil", t), {x});
    case Op::kAbs: return call(d_.math_function("fabs", t), {x});
    case Op::kRsqrt: return call(helper("rsqrt", t), {x});
    case Op::kSigmoid: return call(helper("sigmoid", t), {x});
    case Op::kRelu: return call(helper("relu", t), {x});
    case Op::kNeg: return negate(x);
    default: return x;
  }
}

Result<Code> KernelEmitter::op(const LExpr& e) {
  const DType t = e.type;
  if (e.op == Op::kSelect) {
    // Only the chosen operand is evaluated (C's ?:), so a guarded load is safe.
    KILN_ASSIGN_OR_RETURN(Code c, condition(e.args[0]));
    KILN_ASSIGN_OR_RETURN(Code a, expr(e.args[1]));
    KILN_ASSIGN_OR_RETURN(Code b, expr(e.args[2]));
    a = convert(a, e.args[1]->type, t);
    b = convert(b, e.args[2]->type, t);
    Code out{operand(c, kPrecCond + 1) + " ? " + operand(a, kPrecCond + 1) + " : " +
                 operand(b, kPrecCond),
             kPrecCond};
    out.range = {std::min(a.range.lo, b.range.lo), std::max(a.range.hi, b.range.hi)};
    out.narrow = a.narrow && b.narrow;
    return out;
  }
  std::vector<Code> raw;
  for (const LExprRef& arg : e.args) {
    KILN_ASSIGN_OR_RETURN(Code code, expr(arg));
    raw.push_back(std::move(code));
  }
  // Operand i converted to type `to` (operands normally have the op's type already).
  auto arg = [&](size_t i, DType to) { return convert(raw[i], e.args[i]->type, to); };
  auto with_range = [](Code code, Range range) {
    code.range = range;
    return code;
  };

  switch (e.op) {
    case Op::kCastF32:
    case Op::kCastF64:
    case Op::kCastI32: {
      DType target = e.op == Op::kCastF32 ? DType::kF32 : e.op == Op::kCastF64 ? DType::kF64 : DType::kI32;
      return convert(arg(0, target), target, t);
    }
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv: {
      Code a = arg(0, t), b = arg(1, t);
      if (!is_float(t)) return int_arith(e.op, a, b, t);
      int prec = e.op == Op::kAdd || e.op == Op::kSub ? kPrecAdditive : kPrecMultiplicative;
      return infix(a, ir::op_name(e.op), b, prec);
    }
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe:
    case Op::kEq:
    case Op::kNe: {
      // 1 or 0 in the result type; compared in the operands' (promoted) type.
      DType ct = ir::promote(e.args[0]->type, e.args[1]->type);
      int prec = e.op == Op::kEq || e.op == Op::kNe ? kPrecEquality : kPrecRelational;
      Code cmp = infix(arg(0, ct), ir::op_name(e.op), arg(1, ct), prec);
      return with_range(Code{"(" + std::string(tname(t)) + ")(" + cmp.text + ")", kPrecUnary},
                        Range{0, 1});
    }
    case Op::kMax:
    case Op::kMin: {
      Code a = arg(0, t), b = arg(1, t);
      bool max = e.op == Op::kMax;
      Range r = max ? Range{std::max(a.range.lo, b.range.lo), std::max(a.range.hi, b.range.hi)}
                    : Range{std::min(a.range.lo, b.range.lo), std::min(a.range.hi, b.range.hi)};
      return with_range(call(helper(max ? "max" : "min", t), {a, b}), r);
    }
    case Op::kPow: {
      if (is_float(t)) return call(d_.math_function("pow", t), {arg(0, t), arg(1, t)});
      // Integers: computed in f64 and cast back.
      Code p = call(d_.math_function("pow", DType::kF64), {arg(0, DType::kF64), arg(1, DType::kF64)});
      return convert(p, DType::kF64, t);
    }
    case Op::kFma: {
      Code a = arg(0, t), b = arg(1, t), c = arg(2, t);
      if (!is_float(t)) return int_arith(Op::kAdd, int_arith(Op::kMul, a, b, t), c, t);
      // Floats: the fused operation (loop.h allows rounding once), as the optimizer asked.
      return call(d_.math_function("fma", t), {a, b, c});
    }
    case Op::kNeg: {
      Code x = arg(0, t);
      return is_float(t) ? negate(x) : int_neg(x, t);
    }
    case Op::kAbs:
    case Op::kRelu:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kSin:
    case Op::kCos:
    case Op::kErf: {
      Code x = arg(0, t);
      if (is_float(t)) return unary_float(e.op, x, t);
      if (e.op == Op::kFloor || e.op == Op::kCeil) return x;  // identity on integers
      if (e.op == Op::kAbs) {
        Range r = x.range.lo >= 0 ? x.range : type_range(t);
        return with_range(call(helper("abs", t), {x}), r);
      }
      if (e.op == Op::kRelu) {
        return with_range(call(helper("relu", t), {x}),
                          Range{std::max<int64_t>(x.range.lo, 0), std::max<int64_t>(x.range.hi, 0)});
      }
      // Other math of integers: computed in f64 and cast back (saturating, NaN -> 0).
      Code f = unary_float(e.op, convert(x, t, DType::kF64), DType::kF64);
      return convert(f, DType::kF64, t);
    }
    case Op::kSelect:
      break;  // above
  }
  return error("unknown op");
}

}  // namespace kiln::codegen::internal
