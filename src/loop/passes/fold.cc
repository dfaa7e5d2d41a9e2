// Constant folding with the reference's own op semantics (kiln/loop/op_eval.h), exact identities,
// and integer sums in a canonical form (a sum of terms times coefficients plus one constant),
// which combines the constant parts of offsets that lowering builds piece by piece.
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kiln/loop/op_eval.h"
#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"

namespace kiln::ir {

namespace {


bool is_const(const LExprRef& e) { return e && e->kind == LExpr::Kind::kConst; }

// Whether `e` is a constant that evaluates to one (in its type).
bool is_one(const LExprRef& e) {
  if (!is_const(e)) return false;
  const Scalar v = const_scalar(e->type, e->value);
  return is_float_type(e->type) ? v.f == 1.0 : v.i == 1;
}

// A value modulo 2^bits of an integer type, read signed (two's complement, from the type's
// lowest bits): -1 for all ones in u8 as in i8. A coefficient or constant that reads negative is
// printed subtracted (x - 1, not x + 255), whatever the type's signedness.
int64_t signed_bits(DType type, uint64_t v) {
  const int shift = 64 - dtype_bits(type);
  return static_cast<int64_t>(v << shift) >> shift;
}

// An integer expression as constant + sum(coefficient * term), all modulo 2^bits.
struct Linear {
  uint64_t constant = 0;
  std::vector<std::pair<uint64_t, LExprRef>> terms;  // distinct terms, in first-seen order
};

// Integers only: arithmetic on bool (which op_eval keeps 0 or 1) is no ring.
bool is_linear_op(const LExprRef& e, DType type) {
  if (!e || e->kind != LExpr::Kind::kOp || e->type != type || !is_integer_type(type)) return false;
  switch (e->op) {
    case Op::kAdd:
    case Op::kSub:
      return e->args.size() == 2;
    case Op::kNeg:
      return e->args.size() == 1;
    case Op::kMul:
      return e->args.size() == 2 && (is_const(e->args[0]) || is_const(e->args[1]));
    default:
      return false;
  }
}

void linearize(const LExprRef& e, uint64_t scale, DType type, Linear* out) {
  if (is_const(e) && e->type == type) {
    out->constant += scale * static_cast<uint64_t>(const_scalar(type, e->value).i);
    return;
  }
  if (is_linear_op(e, type)) {
    switch (e->op) {
      case Op::kAdd:
        linearize(e->args[0], scale, type, out);
        linearize(e->args[1], scale, type, out);
        return;
      case Op::kSub:
        linearize(e->args[0], scale, type, out);
        linearize(e->args[1], uint64_t{0} - scale, type, out);
        return;
      case Op::kNeg:
        linearize(e->args[0], uint64_t{0} - scale, type, out);
        return;
      default: {  // kMul by a constant
        const bool left = is_const(e->args[0]);
        const LExprRef& k = e->args[left ? 0 : 1];
        const uint64_t c = static_cast<uint64_t>(const_scalar(type, k->value).i);
        linearize(e->args[left ? 1 : 0], scale * c, type, out);
        return;
      }
    }
  }
  for (auto& [coeff, term] : out->terms) {
    if (same_expr(term.get(), e.get())) {
      coeff += scale;
      return;
    }
  }
  out->terms.emplace_back(scale, e);
}

// An integer constant of `type` holding `v` read in the type (its low bits, a u64 unsigned), or
// null when a 64-bit value has no exact double.
LExprRef int_const(DType type, int64_t v) {
  double value = 0;
  Scalar s;
  s.i = is_unsigned_type(type) && type != DType::kU64
            ? static_cast<int64_t>(static_cast<uint64_t>(v) & ((uint64_t{1} << dtype_bits(type)) - 1))
            : signed_bits(type, static_cast<uint64_t>(v));
  if (!scalar_to_const(type, s, &value)) return nullptr;
  return lconst(type, value);
}

// The canonical form of an integer add / sub / neg / multiply-by-constant tree: the terms with a
// nonzero coefficient in first-seen order (the first positive one leading), each `t` or
// `t * c`, then `+ k` or `- k`. Null when a constant cannot be written (huge i64 values).
LExprRef rebuild(const Linear& lin, DType type) {
  const int64_t min = signed_bits(type, uint64_t{1} << (dtype_bits(type) - 1));  // the least signed value
  struct Piece {
    bool negative;
    LExprRef expr;
  };
  std::vector<Piece> pieces;
  for (const auto& [raw, term] : lin.terms) {
    const int64_t c = signed_bits(type, raw);
    if (c == 0) continue;
    const bool negative = c < 0 && c != min;
    const int64_t magnitude = negative ? -c : c;
    LExprRef piece = term;
    if (magnitude != 1) {
      LExprRef k = int_const(type, magnitude);
      if (!k) return nullptr;
      piece = lop(Op::kMul, type, {term, k});
    }
    pieces.push_back({negative, std::move(piece)});
  }
  int64_t constant = signed_bits(type, lin.constant);
  if (pieces.empty()) return int_const(type, constant);
  // Lead with the first positive piece; a sum of only negative ones starts from the constant.
  LExprRef acc;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].negative) {
      acc = pieces[i].expr;
      pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (!acc) {
    if (constant != 0) {
      LExprRef k = int_const(type, constant);
      if (!k) return nullptr;
      acc = lop(Op::kSub, type, {k, pieces.front().expr});
      constant = 0;
    } else {
      acc = lop(Op::kNeg, type, {pieces.front().expr});
    }
    pieces.erase(pieces.begin());
  }
  for (Piece& p : pieces) {
    acc = lop(p.negative ? Op::kSub : Op::kAdd, type, {acc, std::move(p.expr)});
  }
  if (constant != 0) {
    const bool subtract = constant < 0 && constant != min;
    LExprRef k = int_const(type, subtract ? -constant : constant);
    if (!k) return nullptr;
    acc = lop(subtract ? Op::kSub : Op::kAdd, type, {acc, k});
  }
  return acc;
}

// One node whose operands are already folded.
LExprRef fold(const LExprRef& e) {
  if (e->kind != LExpr::Kind::kOp) return e;
  const std::vector<LExprRef>& args = e->args;
  if (static_cast<int>(args.size()) != op_arity(e->op)) return e;  // malformed: left alone
  if (e->op == Op::kSelect && is_const(args[0])) {
    return scalar_truthy(args[0]->type, const_scalar(args[0]->type, args[0]->value)) ? args[1]
                                                                                      : args[2];
  }
  bool all_const = true;
  for (const LExprRef& a : args) all_const = all_const && is_const(a);
  if (all_const) {
    Scalar values[3];
    DType types[3];
    for (size_t i = 0; i < args.size(); ++i) {
      values[i] = const_scalar(args[i]->type, args[i]->value);
      types[i] = args[i]->type;
    }
    const Scalar r = eval_op(e->op, e->type, std::span<const DType>(types, args.size()),
                             std::span<const Scalar>(values, args.size()));
    // An f16 / bf16 value is computed in f32 and rounded only where it is stored or cast, but a
    // constant of its type holds a rounded value: fold only what the type holds exactly.
    if (is_narrow_float(e->type) && round_float(e->type, r.f) != r.f) return e;
    double value = 0;
    if (scalar_to_const(e->type, r, &value)) return lconst(e->type, value);
    return e;
  }
  if (!is_float_type(e->type)) {
    if (is_linear_op(e, e->type)) {
      Linear lin;
      linearize(e, 1, e->type, &lin);
      if (LExprRef canonical = rebuild(lin, e->type)) return canonical;
    }
    if (e->op == Op::kDiv && is_one(args[1])) return args[0];
    return e;
  }
  // Floats: only identities exact for every value, NaN, infinities and -0.0 included.
  if (e->op == Op::kMul && is_one(args[1])) return args[0];
  if (e->op == Op::kMul && is_one(args[0])) return args[1];
  if (e->op == Op::kDiv && is_one(args[1])) return args[0];
  // x^2 is x * x rounded once (NaN, infinities and -0.0 alike), without a call to pow: a
  // LayerNorm's variance as PyTorch exports it squares every element with Pow.
  if (e->op == Op::kPow && is_const(args[1]) && args[1]->value == 2.0) return lop(Op::kMul, e->type, {args[0], args[0]});
  return e;
}

// A body with `if`s of constant condition replaced by their statements or dropped.
std::vector<LStmtRef> fold_ifs(const std::vector<LStmtRef>& body);

LStmtRef fold_ifs(const LStmtRef& s) {
  if (!s) return s;
  return internal::with_body(s, fold_ifs(s->body));
}

std::vector<LStmtRef> fold_ifs(const std::vector<LStmtRef>& body) {
  std::vector<LStmtRef> out;
  out.reserve(body.size());
  for (const LStmtRef& child : body) {
    LStmtRef s = fold_ifs(child);
    if (s && s->kind == LStmt::Kind::kIf && is_const(s->cond)) {
      // `if` binds nothing, so its statements can join the enclosing body.
      if (scalar_truthy(s->cond->type, const_scalar(s->cond->type, s->cond->value))) {
        out.insert(out.end(), s->body.begin(), s->body.end());
      }
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

void fold_constants(Kernel& kernel) {
  LStmtRef body = internal::rewrite_stmt_exprs(kernel.body, fold);
  if (!body) return;
  // The body itself may be an `if` of constant condition.
  std::vector<LStmtRef> top = fold_ifs(std::vector<LStmtRef>{body});
  kernel.body = top.size() == 1 ? top[0] : lblock(std::move(top));
}

}  // namespace kiln::ir
