// Typing of a statement's right side (kiln/ir/statement.h): i32 < f32 < f64, weak literals.
//
// A subexpression made only of literals is "weak": its type is not decided until it meets a
// typed operand (or a cast, or the target). Then it is settled: an integer literal takes the
// context type, a float literal f32 unless the context is f64, and each op inside is retyped by
// op_result_type(). While weak, a literal's provisional type records which kind it is (i32 for
// an integer literal, f32 for a float literal).
#include <cfloat>
#include <cmath>
#include <string>

#include "ir/statement_internal.h"
#include "kiln/ir/printer.h"

namespace kiln::ir::internal {

namespace {

std::string number_text(double v) { return format_number(v, false); }

bool is_cast(Op op) { return op == Op::kCastF32 || op == Op::kCastF64 || op == Op::kCastI32; }

DType cast_type(Op op) {
  return op == Op::kCastF32 ? DType::kF32 : op == Op::kCastF64 ? DType::kF64 : DType::kI32;
}

}  // namespace

void Completer::settle(const ExprRef& ref, DType context) {
  if (!ref || !weak_.count(ref.get())) return;
  weak_.erase(ref.get());
  // Every weak node was made by this completer as a non-const Expr.
  Expr& e = const_cast<Expr&>(*ref);
  if (e.kind == Expr::Kind::kLiteral) {
    bool is_float = e.type != DType::kI32;
    e.type = !is_float ? context : context == DType::kF64 ? DType::kF64 : DType::kF32;
    if (e.type == DType::kI32 && (e.literal < -2147483648.0 || e.literal > 2147483647.0)) {
      error(e.loc, "integer literal " + number_text(e.literal) +
                       " does not fit in i32; write it as a float (with '.') if it is meant as one");
    } else if (e.type == DType::kF32 && std::isfinite(e.literal) && std::fabs(e.literal) > FLT_MAX) {
      error(e.loc, "literal " + number_text(e.literal) + " is out of range for f32; use f64(...)");
    }
    return;
  }
  std::vector<DType> types;
  for (const ExprRef& a : e.args) {
    settle(a, context);
    types.push_back(a->type);
  }
  e.type = op_result_type(e.op, types);
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

  if (is_cast(e.op)) {
    settle(out->args[0], cast_type(e.op));
    out->type = cast_type(e.op);
    return {out, false};
  }
  // The operands that decide the type: all, except select's condition.
  const size_t first = e.op == Op::kSelect ? 1 : 0;
  bool any_strong = false;
  DType strong = DType::kI32;
  for (size_t i = first; i < args.size(); ++i) {
    if (args[i].weak) continue;
    strong = any_strong ? promote(strong, args[i].expr->type) : args[i].expr->type;
    any_strong = true;
  }
  if (any_strong) {
    for (const ExprRef& a : out->args) settle(a, strong);
  }
  std::vector<DType> types;
  for (const ExprRef& a : out->args) types.push_back(a->type);
  out->type = op_result_type(e.op, types);
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
    if (t.expr->type != DType::kI32) {
      error(term->loc, "a subscript of '" + tensor + "' reads a " + std::string(dtype_name(t.expr->type)) +
                           " value; a gathered subscript reads i32 values (convert with i32(...))");
      return nullptr;
    }
    auto op = std::make_shared<Expr>();
    op->kind = Expr::Kind::kOp;
    op->type = DType::kI32;
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
