// Typing of a statement's right side (kiln/ir/statement.h): promote_types(), weak literals.
//
// A subexpression made only of number literals is "weak": its type is not decided until it
// meets a typed operand (or a cast, or the target). Then it is settled (settled_literal_type)
// and each op inside is retyped by op_result_type(). While weak, a literal's provisional type
// records which kind it is (i32 for an integer literal, f32 for a float literal). `true` and
// `false` are bool, not weak.
#include <cfloat>
#include <cmath>
#include <string>

#include "ir/statement_internal.h"
#include "kiln/ir/printer.h"

namespace kiln::ir::internal {

namespace {

std::string number_text(double v) { return format_number(v, false); }

// The type a weak literal takes in a context of type `context`: an integer one the context's
// type (i32 next to a bool), a float one the context's float type (f32 next to an integer or
// bool); in an f16 or bf16 context both are f32, as values of those types are computed in f32.
DType settled_literal_type(bool is_float, DType context) {
  if (is_narrow_float(context)) return DType::kF32;
  if (is_float) return is_float_type(context) ? context : DType::kF32;
  return context == DType::kBool ? DType::kI32 : context;
}

std::string type_names(const std::vector<DType>& types) {
  std::string out;
  for (DType t : types) out += (out.empty() ? "" : " and ") + std::string(dtype_name(t));
  return out;
}

}  // namespace

void Completer::settle(const ExprRef& ref, DType context) {
  if (!ref || !weak_.count(ref.get())) return;
  weak_.erase(ref.get());
  // Every weak node was made by this completer as a non-const Expr.
  Expr& e = const_cast<Expr&>(*ref);
  if (e.kind == Expr::Kind::kLiteral) {
    const bool is_float = e.type != DType::kI32;
    e.type = settled_literal_type(is_float, context);
    if (!is_float_type(e.type) && !integer_value_fits(e.type, e.literal)) {
      const std::string type(dtype_name(e.type));
      error(e.loc, "integer literal " + number_text(e.literal) + " does not fit in " + type +
                       (e.type == DType::kI32 ? "; write it as a float (with '.') if it is meant as one"
                                              : ", the type of the operand beside it; cast that operand (i64(...), f32(...))"));
    } else if (e.type == DType::kF32 && std::isfinite(e.literal) && std::fabs(e.literal) > FLT_MAX) {
      error(e.loc, "literal " + number_text(e.literal) + " is out of range for f32; use f64(...)");
    }
    return;
  }
  // Bitwise ops and shifts of literals compute in an integer type: i32 beside a float or bool
  // (`x + ~3`), which the op around them then promotes. A shift's amount is i32.
  const bool integer_op = e.op == Op::kBitAnd || e.op == Op::kBitOr || e.op == Op::kBitXor ||
                          e.op == Op::kBitNot || e.op == Op::kShl || e.op == Op::kShr;
  const DType arg_context = integer_op && !is_integer_type(context) ? DType::kI32 : context;
  std::vector<DType> types;
  for (size_t i = 0; i < e.args.size(); ++i) {
    const bool amount = (e.op == Op::kShl || e.op == Op::kShr) && i == 1;
    settle(e.args[i], amount ? DType::kI32 : arg_context);
    types.push_back(e.args[i]->type);
  }
  // Literals alone always have a type (numbers, and ops on numbers: type_op refused the rest).
  e.type = op_result_type(e.op, types).value_or(context);
}

Completer::Typed Completer::type_op(const RawExpr& e) {
  if (static_cast<int>(e.args.size()) != op_arity(e.op)) {
    error(e.loc, "'" + std::string(op_name(e.op)) + "' takes " + std::to_string(op_arity(e.op)) +
                     " arguments, not " + std::to_string(e.args.size()));
    return {};
  }
  std::vector<Typed> args;
  bool ok = true;
  for (const RawExprRef& a : e.args) {
    if (!a) {
      error(e.loc, "missing operand of '" + std::string(op_name(e.op)) + "'");
      ok = false;
      args.push_back({});
      continue;
    }
    args.push_back(type_expr(*a));
    ok = ok && args.back().expr;
  }
  if (!ok) return {};
  // -literal is a literal.
  if (e.op == Op::kNeg && args[0].expr->kind == Expr::Kind::kLiteral && args[0].weak) {
    Expr& lit = *args[0].expr;
    lit.literal = lit.type == DType::kI32 && lit.literal == 0 ? 0.0 : -lit.literal;
    lit.loc = e.loc;
    return args[0];
  }
  auto out = std::make_shared<Expr>();
  out->kind = Expr::Kind::kOp;
  out->op = e.op;
  out->loc = e.loc;
  for (const Typed& a : args) out->args.push_back(a.expr);

  if (std::optional<DType> to = cast_target(e.op)) {
    const Expr& arg = *out->args[0];
    if (args[0].weak && arg.kind == Expr::Kind::kLiteral && arg.type == DType::kI32 && !is_float_type(*to) &&
        !integer_value_fits(*to, arg.literal)) {
      error(e.loc, std::string(dtype_name(*to)) + "(" + number_text(arg.literal) + "): " + number_text(arg.literal) +
                       " is not a " + std::string(dtype_name(*to)) + " value; a literal is cast only within its range");
      return {};
    }
    settle(out->args[0], *to);
    out->type = *to;
    return {out, false};
  }
  // The operands that decide the type: all, except select's condition and a shift's amount.
  const size_t first = e.op == Op::kSelect ? 1 : 0;
  const size_t last = e.op == Op::kShl || e.op == Op::kShr ? 1 : args.size();
  bool any_strong = false;
  DType strong = DType::kI32;
  for (size_t i = first; i < last; ++i) {
    if (args[i].weak) continue;
    if (any_strong) {
      std::optional<DType> t = promote_types(strong, args[i].expr->type);
      if (!t) {
        error(e.loc, "'" + std::string(op_name(e.op)) + "' of " + type_names({strong, args[i].expr->type}) +
                         ": u64 and a signed integer type have no common type; cast one of them (i64(...) or u64(...))");
        return {};
      }
      strong = *t;
    } else {
      strong = args[i].expr->type;
    }
    any_strong = true;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].weak) continue;
    if (i < first || i >= last) {
      settle(out->args[i], i < first ? DType::kBool : DType::kI32);  // a condition, an amount
    } else if (any_strong) {
      settle(out->args[i], strong);
    }
  }
  std::vector<DType> types;
  for (const ExprRef& a : out->args) types.push_back(a->type);
  std::optional<DType> type = op_result_type(e.op, types);
  if (!type) {
    const bool bitwise = e.op == Op::kBitAnd || e.op == Op::kBitOr || e.op == Op::kBitXor || e.op == Op::kBitNot;
    const bool shift = e.op == Op::kShl || e.op == Op::kShr;
    error(e.loc, "'" + std::string(op_name(e.op)) + "' does not apply to " + type_names(types) +
                     (bitwise ? ": it takes bool or integer operands (compare a float first, or cast it)"
                      : shift ? ": it takes integer operands (cast with i32(...) or another integer type)"
                              : ": u64 and a signed integer type have no common type; cast one of them"));
    return {};
  }
  out->type = *type;
  if (!any_strong) weak_.insert(out.get());
  return {out, !any_strong};
}

Completer::Typed Completer::type_expr(const RawExpr& e) {
  switch (e.kind) {
    case RawExpr::Kind::kNumber: {
      if (!std::isfinite(e.number)) {
        // Text spells these as the predeclared names (kName below); a built program must not
        // hold one where the name means something else, or its text would read that instead.
        const std::string spelled(predeclared_name(e.number));
        if (!e.is_float) {
          error(e.loc, "an integer literal must be a finite number");
          return {};
        }
        if (index_names_.count(spelled) || find(spelled) || size_number(spelled) >= 0) {
          error(e.loc, "the literal " + spelled + " cannot be used where '" + spelled +
                           "' names a tensor, const, size or index; rename that");
          return {};
        }
      }
      auto lit = std::make_shared<Expr>();
      lit->kind = Expr::Kind::kLiteral;
      lit->literal = !e.is_float && e.number == 0 ? 0.0 : e.number;
      lit->type = e.is_float ? DType::kF32 : DType::kI32;  // provisional, see settle()
      lit->loc = e.loc;
      weak_.insert(lit.get());
      return {lit, true};
    }
    case RawExpr::Kind::kName: {
      auto out = std::make_shared<Expr>();
      out->loc = e.loc;
      auto it = index_number_.find(e.name);
      if (it != index_number_.end() && index_names_.count(e.name)) {
        out->kind = Expr::Kind::kIndex;
        out->index = it->second;
        out->type = DType::kI32;
        return {out, false};
      }
      if (e.name == "true" || e.name == "false") {  // keywords: nothing declared hides them
        out->kind = Expr::Kind::kLiteral;
        out->type = DType::kBool;
        out->literal = e.name == "true" ? 1 : 0;
        return {out, false};
      }
      const TensorNode* node = find(e.name);
      if (!node && size_number(e.name) >= 0) {
        out->kind = Expr::Kind::kSize;  // language version 2: a size's value, as i32
        out->index = size_number(e.name);
        out->type = DType::kI32;
        return {out, false};
      }
      if (!node && predeclared_literal(e.name)) {
        // `inf` or `nan`: a float literal, weak like any other (nothing declared hides it).
        RawExpr literal = e;
        literal.kind = RawExpr::Kind::kNumber;
        literal.number = *predeclared_literal(e.name);
        literal.is_float = true;
        return type_expr(literal);
      }
      if (!node) {
        error(e.loc, "unknown name '" + e.name +
                         "': it is not a declared tensor, const or size, nor an index of this statement "
                         "(an index must appear in a subscript)");
        return {};
      }
      if (!visible(node)) {
        report_later(node, e.loc);
        return {};
      }
      if (!node->is_scalar()) {
        error(e.loc, subscript_count_message(*node, 0) +
                         (predeclared_literal(e.name) ? " (this declaration hides the literal " + e.name + "; rename it)" : ""));
        return {};
      }
      out->kind = Expr::Kind::kTensor;
      out->node = position(node);
      out->type = node->dtype;
      return {out, false};
    }
    case RawExpr::Kind::kTensor:
    case RawExpr::Kind::kMerge: {
      auto it = refs_.find(&e);
      if (it == refs_.end() || !it->second.node) return {};
      const Ref& ref = it->second;
      auto out = std::make_shared<Expr>();
      out->kind = e.kind == RawExpr::Kind::kMerge ? Expr::Kind::kMerge : Expr::Kind::kTensor;
      out->node = position(ref.node);
      out->type = ref.node->dtype;
      out->loc = e.loc;
      for (const NamedAffine& a : ref.subs) {
        if (!a.ok) return {};
        Affine affine;
        affine.offset = a.offset;
        if (!a.gathers.empty()) {
          ExprRef gathered = type_gather(a, ref.node->name);
          if (!gathered) return {};
          affine.gather = static_cast<int>(out->args.size());
          out->args.push_back(std::move(gathered));
        }
        for (const NamedTerm& t : a.terms) {
          auto number = index_number_.find(t.name);
          if (number == index_number_.end()) {
            error(t.loc, "internal error: index '" + t.name + "' has no number");
            return {};
          }
          affine.terms.push_back({number->second, t.coeff});
        }
        out->subscripts.push_back(std::move(affine));
      }
      return {out, false};
    }
    case RawExpr::Kind::kReduce:
      return type_inner_reduction(e);
    case RawExpr::Kind::kOp:
      return type_op(e);
  }
  return {};
}

ExprRef Completer::type_gather(const NamedAffine& a, const std::string& tensor) {
  ExprRef sum;
  for (const auto& [term, negative] : a.gathers) {
    Typed t = type_expr(*term);
    if (!t.expr) return nullptr;
    if (t.weak) settle(t.expr, DType::kI32);
    if (!is_integer_type(t.expr->type)) {
      error(term->loc, "a subscript of '" + tensor + "' reads a " + std::string(dtype_name(t.expr->type)) +
                           " value; a gathered subscript reads integer values (convert with i32(...))");
      return nullptr;
    }
    // Gathers add in i32, or in i64 for the types i32 cannot hold (lowering adds in i64).
    const DType sum_type = dtype_bits(t.expr->type) < 32 || t.expr->type == DType::kI32 ? DType::kI32 : DType::kI64;
    if (t.expr->type != sum_type) {
      auto cast = std::make_shared<Expr>();
      cast->kind = Expr::Kind::kOp;
      cast->op = cast_op(sum_type);
      cast->type = sum_type;
      cast->loc = t.expr->loc;
      cast->args = {t.expr};
      t.expr = cast;
    }
    if (sum && sum->type != t.expr->type) {
      error(term->loc, "a subscript of '" + tensor + "' adds gathered values of types " +
                           type_names({sum->type, t.expr->type}) + "; cast them to one type");
      return nullptr;
    }
    auto op = std::make_shared<Expr>();
    op->kind = Expr::Kind::kOp;
    op->type = t.expr->type;
    op->loc = term->loc;
    if (!sum) {
      if (!negative) {
        sum = t.expr;
        continue;
      }
      op->op = Op::kNeg;
      op->args = {t.expr};
    } else {
      op->op = negative ? Op::kSub : Op::kAdd;
      op->args = {sum, t.expr};
    }
    sum = op;
  }
  return sum;
}

ExprRef Completer::type_rhs(const RawExpr& rhs, DType target_type) {
  Typed t = type_expr(rhs);
  if (!t.expr) return nullptr;
  if (t.weak) settle(t.expr, target_type);
  return t.expr;
}

}  // namespace kiln::ir::internal
