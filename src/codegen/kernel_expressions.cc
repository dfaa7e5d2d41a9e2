// Pass 2 of the kernel emitter (kernel_emitter.h), expressions: conversions, integer arithmetic
// printed plainly where its range allows and through the wrapping helpers elsewhere, conditions
// and every op of the loop IR.
#include <algorithm>
#include <limits>
#include <optional>

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
  if (!is_float(from) && !is_float(to) && tname(from) == tname(to) && fits(code.range.lo, code.range.hi, to)) {
    return code;  // one C type (bool and u8), and the value is one of both
  }
  if (to == DType::kBool) {
    // != 0 (NaN too); a value already 0 or 1 is itself.
    if (!is_float(from) && code.range.lo >= 0 && code.range.hi <= 1) {
      Code out{cast + operand(code, kPrecUnary), kPrecUnary};
      out.range = code.range;
      return out;
    }
    Code out{cast + "(" + infix(code, "!=", literal(0, from, d_), kPrecEquality).text + ")", kPrecUnary};
    out.range = {0, 1};
    return out;
  }
  if (ir::is_narrow_float(to)) {
    // Rounded to nearest even: integers through f32 (what op_eval does), f64 directly.
    if (from == DType::kF64) return call(helpers_.use("kiln_round_" + std::string(ir::dtype_name(to)) + "_f64"), {code});
    if (!is_float(from)) return round_narrow_float(convert(code, from, DType::kF32), to);
    return round_narrow_float(code, to);
  }
  if (is_float(to)) {
    // Integer to float rounds to nearest; f64 to f32 likewise (to infinity beyond the range);
    // an f16 / bf16 value is a float already.
    if (computed_in(from) == computed_in(to)) return code;
    return {cast + operand(code, kPrecUnary), kPrecUnary};
  }
  if (!is_float(from)) {
    // Integer to integer wraps, which C's conversion does (to signed types: as every compiler
    // kiln supports defines it). Where the range fits, the value stays and so does its range.
    if (fits(code.range.lo, code.range.hi, to)) {
      if (code.range.lo == code.range.hi) return int_const(code.range.lo, to);
      Code out{cast + operand(code, kPrecUnary), kPrecUnary};
      out.range = code.range;
      return out;
    }
    Code out{cast + operand(code, kPrecUnary), kPrecUnary};
    out.range = type_range(to);
    return out;
  }
  // Float to integer: truncating, saturating, NaN -> 0.
  Code out = call(helpers_.use("kiln_" + std::string(ir::dtype_name(computed_in(from))) + "_to_" +
                               std::string(ir::dtype_name(to))),
                  {code});
  out.range = type_range(to);
  return out;
}

Result<Code> KernelEmitter::narrow_float_stored(const LExprRef& value) {
  const DType type = value->type;
  if (!ir::is_narrow_float(type) || value->kind != LExpr::Kind::kOp || value->op != ir::cast_op(type)) {
    return expr(value);
  }
  // A cast to f16 / bf16 that the store rounds anyway: the operand as a float that rounds to the
  // same (from f64 rounded to odd, so that it rounds once; lowering casts every f16 result so).
  const LExprRef& from = value->args[0];
  KILN_ASSIGN_OR_RETURN(Code x, expr(from));
  if (from->type == DType::kF64) return call(helpers_.use("kiln_f64_odd_f32"), {x});
  return convert(x, from->type, DType::kF32);
}

Code KernelEmitter::round_narrow_float(const Code& x, DType type) {
  return call(helpers_.use("kiln_round_" + std::string(ir::dtype_name(type))), {x});
}

Code KernelEmitter::load_element(const BindingInfo& b, DType type, const Code& index) {
  Code element{b.var + "[" + index.text + "]", kPrecPrimary};
  switch (type) {
    case DType::kBool: {
      // Memory may hold any byte: a value is 0 or 1 (op_eval's load_scalar).
      Code out{"(" + std::string(tname(type)) + ")(" + element.text + " != 0)", kPrecUnary};
      out.range = {0, 1};
      return out;
    }
    case DType::kF16:
      if (d_.half_loads()) return {"vload_half(" + index.text + ", " + b.var + ")", kPrecPrimary};
      return call(helpers_.use("kiln_f16_value"), {element});
    case DType::kBF16:
      return call(helpers_.use("kiln_bf16_value"), {element});
    default:
      element.range = type_range(type);
      return element;
  }
}

std::string KernelEmitter::store_element(const BindingInfo& b, DType type, const Code& index, const Code& value) {
  if (type == DType::kF16 && d_.half_loads()) return "vstore_half_rte(" + value.text + ", " + index.text + ", " + b.var + ");";
  std::string stored = value.text;
  if (ir::is_narrow_float(type)) stored = call(helpers_.use("kiln_" + std::string(ir::dtype_name(type)) + "_bits"), {value}).text;
  return b.var + "[" + index.text + "] = " + stored + ";";
}

Code KernelEmitter::int_arith(Op op, Code a, Code b, DType t) {
  if (t == DType::kBool) {
    // op_eval keeps bool's results 0 or 1 (+ is or, - is xor, * and / are and): the i32 result
    // of the 0 / 1 operands, != 0.
    Code r = int_arith(op, a, b, DType::kI32);
    if (r.range.lo >= 0 && r.range.hi <= 1) return r;
    Code out{"(" + std::string(tname(t)) + ")(" + infix(r, "!=", int_const(0, DType::kI32), kPrecEquality).text + ")",
             kPrecUnary};
    out.range = {0, 1};
    return out;
  }
  // Identities (exact for integers, wrapping included): x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1.
  auto is_const = [](const Code& c, int64_t v) { return c.range.lo == v && c.range.hi == v; };
  if ((op == Op::kAdd && is_const(a, 0)) || (op == Op::kMul && is_const(a, 1))) return b;
  if (((op == Op::kAdd || op == Op::kSub) && is_const(b, 0)) ||
      ((op == Op::kMul || op == Op::kDiv) && is_const(b, 1))) {
    return a;
  }
  const bool is_unsigned = ir::is_unsigned_type(t);
  // u32 and u64 arithmetic wraps in C itself: + - * are always printed plain (their operands'
  // C types are the type's own: loads, casts and literals with a suffix).
  const bool wraps_in_c = t == DType::kU32 || t == DType::kU64;
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
      // quotient's extremes are at the corners (the divisor keeps one sign). A u64's range is of
      // its bits read signed, so its quotient's is unknown.
      const bool nonzero = blo > 0 || bhi < 0;
      const bool min_by_minus_one = !is_unsigned && blo <= -1 && bhi >= -1 && alo == type_range(t).lo;
      plain = nonzero && !min_by_minus_one;
      if (plain && t != DType::kU64) {
        const Wide c[4] = {alo / blo, alo / bhi, ahi / blo, ahi / bhi};
        lo = std::min({c[0], c[1], c[2], c[3]});
        hi = std::max({c[0], c[1], c[2], c[3]});
      } else if (plain) {
        lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      }
      break;
    }
    default:
      break;
  }
  if (!plain && wraps_in_c && op != Op::kDiv) {
    plain = true;
    lo = type_range(t).lo, hi = type_range(t).hi;
  }
  if (!plain) {
    ++range_fallbacks_;
    Code out = call(helper(name, t), {a, b});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);  // folded
  if ((op == Op::kAdd || op == Op::kSub) && b.range.lo == b.range.hi && b.range.lo < 0 &&
      b.range.lo > type_range(t).lo && !is_unsigned) {
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
  if (t == DType::kBool) return a;  // op_eval: -x != 0 is x
  const Wide lo = -static_cast<Wide>(a.range.hi), hi = -static_cast<Wide>(a.range.lo);
  if (!fits(lo, hi, t)) {
    ++range_fallbacks_;
    Code out = call(helper("neg", t), {a});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);
  Code out = negate(a);  // of a u64: C's unsigned negation, which wraps
  out.range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  return out;
}

Code KernelEmitter::bitwise(Op op, const Code& a, const Code& b, DType t) {
  const std::string type(tname(t));
  Code out;
  if (op == Op::kBitNot) {
    // bool: logical; an integer: all bits (C's ~ of a promoted narrow value, cast back).
    out = t == DType::kBool ? Code{"(" + type + ")(" + operand(a, kPrecEquality) + " == 0)", kPrecUnary}
                            : Code{"(" + type + ")~" + operand(a, kPrecUnary), kPrecUnary};
  } else {
    const std::string_view symbol = op == Op::kBitAnd ? "&" : op == Op::kBitOr ? "|" : "^";
    // Operands of at least a shift's precedence, so that no comparison or other bitwise
    // operator goes unparenthesized (C's precedence of & | ^ surprises, and GCC warns).
    const std::string text = operand(a, kPrecShift) + " " + std::string(symbol) + " " + operand(b, kPrecShift);
    out = ir::dtype_size(t) < 4 ? Code{"(" + type + ")(" + text + ")", kPrecUnary} : Code{"(" + text + ")", kPrecPrimary};
  }
  out.range = type_range(t);
  return out;
}

Code KernelEmitter::shift(Op op, const Code& a, const Code& amount, DType t) {
  // The amount as i64: one of u64 at 2^63 or more reads negative, which shifts as far as it.
  Code out = call(helper(op == Op::kShl ? "shl" : "shr", t), {a, amount});
  out.range = type_range(t);
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
      // In a block of half_block_loop (kernel_half_blocks.cc), the iteration kiln_j of the block.
      Code v{e->var == block_var_ ? "(" + var_name(e->var) + " + kiln_j)" : var_name(e->var), kPrecPrimary};
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
      for (const auto& [load, block] : block_loads_) {
        if (ir::same_expr(load, e.get())) return Code{block + "[kiln_j]", kPrecPrimary};
      }
      const BindingInfo& b = bindings_[binding_of_node_.at(e->node)];
      KILN_ASSIGN_OR_RETURN(Code at, offset(e->offset));
      return load_element(b, e->type, at);
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

// exp, log, ... of a float type (f16 and bf16 in f32).
Code KernelEmitter::unary_float(Op op, const Code& x, DType type) {
  const DType t = computed_in(type);
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

  if (std::optional<DType> target = ir::cast_target(e.op)) {
    // The result's type is the cast's, except (i32 i64 X) (kiln/loop/loop.h).
    return convert(arg(0, *target), *target, t);
  }
  switch (e.op) {
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
      if (t == DType::kU64) r = type_range(t);  // an unsigned order, not the bits' signed one
      return with_range(call(helper(max ? "max" : "min", t), {a, b}), r);
    }
    case Op::kPow: {
      if (is_float(t)) return call(d_.math_function("pow", computed_in(t)), {arg(0, t), arg(1, t)});
      // Integers: computed in f64 and cast back.
      Code p = call(d_.math_function("pow", DType::kF64), {arg(0, DType::kF64), arg(1, DType::kF64)});
      return convert(p, DType::kF64, t);
    }
    case Op::kFma: {
      Code a = arg(0, t), b = arg(1, t), c = arg(2, t);
      if (!is_float(t)) return int_arith(Op::kAdd, int_arith(Op::kMul, a, b, t), c, t);
      // Floats: the fused operation (loop.h allows rounding once), as the optimizer asked.
      return call(d_.math_function("fma", computed_in(t)), {a, b, c});
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
      // abs and relu of bool and unsigned values are themselves.
      const bool is_signed = t != DType::kBool && !ir::is_unsigned_type(t);
      if ((e.op == Op::kAbs || e.op == Op::kRelu) && (!is_signed || x.range.lo >= 0)) return x;
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
    case Op::kBitNot:
    case Op::kBitAnd:
    case Op::kBitOr:
    case Op::kBitXor:
      if (is_float(t)) return error("op '" + std::string(ir::op_name(e.op)) + "' of " + std::string(ir::dtype_name(t)));
      return bitwise(e.op, arg(0, t), e.op == Op::kBitNot ? Code() : arg(1, t), t);
    case Op::kShl:
    case Op::kShr:
      if (!ir::is_integer_type(t) || !ir::is_integer_type(e.args[1]->type)) {
        return error("op '" + std::string(ir::op_name(e.op)) + "' of " + std::string(ir::dtype_name(t)) + " by " +
                     std::string(ir::dtype_name(e.args[1]->type)));
      }
      return shift(e.op, arg(0, t), arg(1, DType::kI64), t);
    default:
      break;  // select: above; casts: above
  }
  return error("unknown op");
}

}  // namespace kiln::codegen::internal
