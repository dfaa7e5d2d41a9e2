// Statement completion, subscripts (kiln/ir/statement.h): a subscript's raw expression becomes
// an affine form sum(coeff * index) + offset; const scalars in subscripts are folded in.
#include <algorithm>
#include <cmath>
#include <string>

#include "ir/statement_internal.h"

namespace kiln::ir::internal {

namespace {
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53: integers above lose precision
}  // namespace

std::optional<int64_t> Completer::const_value(const TensorNode* node, SourceLoc loc) {
  if (!visible(node)) {
    report_later(node, loc);
    return std::nullopt;
  }
  if (!node->is_scalar()) {
    error(loc, "const '" + node->name + "' has " + dims_text(node->dims.size()) +
                   "; only a scalar integer const can be used in a subscript or bound");
    return std::nullopt;
  }
  double v = node->init.a;
  if (node->init.kind != Init::Kind::kValue || v != std::trunc(v) || std::fabs(v) > kMaxExactInteger) {
    error(loc, "const '" + node->name + "' is not an integer; subscripts and bounds are integers");
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

NamedAffine affine_form(const RawExpr& e, const AffineNames& names, const AffineErrors& error,
                        std::string_view what, std::string_view rule) {
  NamedAffine a;
  a.loc = e.loc;
  auto fail = [&](std::string message) {
    error(e.loc, std::move(message));
    a.ok = false;
    return a;
  };
  const std::string w(what), r(rule);
  switch (e.kind) {
    case RawExpr::Kind::kNumber:
      if (e.is_float) return fail("a " + w + " must be an integer, not a float literal; " + r);
      if (!(std::fabs(e.number) <= kMaxExactInteger)) return fail("integer in a " + w + " is too large");
      a.offset = static_cast<int64_t>(e.number);
      return a;
    case RawExpr::Kind::kName:
      return names(e);
    case RawExpr::Kind::kTensor:
    case RawExpr::Kind::kMerge:
      return fail("a tensor value cannot be used in a " + w + " (no data-dependent indexing); " + r);
    case RawExpr::Kind::kReduce:
      return fail("a reduction cannot be used in a " + w + "; " + r);
    case RawExpr::Kind::kOp:
      break;
  }
  for (const RawExprRef& arg : e.args) {
    if (!arg) return fail("missing operand in a " + w);
  }
  if (e.op == Op::kNeg && e.args.size() == 1) {
    a = affine_form(*e.args[0], names, error, what, rule);
    if (a.ok && !scale_affine(a, -1)) return fail(w + " arithmetic overflows");
    a.loc = e.loc;
    return a;
  }
  if ((e.op == Op::kAdd || e.op == Op::kSub || e.op == Op::kMul) && e.args.size() == 2) {
    NamedAffine l = affine_form(*e.args[0], names, error, what, rule);
    NamedAffine rr = affine_form(*e.args[1], names, error, what, rule);
    if (!l.ok || !rr.ok) {
      a.ok = false;
      return a;
    }
    if (e.op == Op::kMul) {
      if (!l.terms.empty() && !rr.terms.empty()) {
        // A bound's names may be sizes or (a triangular bound) indices.
        const std::string term = what == "subscript" ? "index " : what == "bound" ? "" : "size ";
        return fail(w + " is not affine: it multiplies " + term + "'" + l.terms[0].name + "' by " + term + "'" +
                    rr.terms[0].name + "'; " + r);
      }
      if (l.terms.empty()) std::swap(l, rr);
      // l * constant rr
      if (!scale_affine(l, rr.offset)) return fail(w + " arithmetic overflows");
      l.loc = e.loc;
      return l;
    }
    if (e.op == Op::kSub && !scale_affine(rr, -1)) return fail(w + " arithmetic overflows");
    if (l.terms.size() + rr.terms.size() > kMaxStatementIndices) {
      return fail("a " + w + " with more than " + std::to_string(kMaxStatementIndices) + " terms is not supported");
    }
    for (const NamedTerm& t : rr.terms) {
      auto it = std::find_if(l.terms.begin(), l.terms.end(), [&](const NamedTerm& u) { return u.name == t.name; });
      if (it == l.terms.end()) {
        l.terms.push_back(t);
      } else if (__builtin_add_overflow(it->coeff, t.coeff, &it->coeff)) {
        return fail(w + " arithmetic overflows");
      }
    }
    if (__builtin_add_overflow(l.offset, rr.offset, &l.offset)) return fail(w + " arithmetic overflows");
    l.loc = e.loc;
    return l;
  }
  if (e.op == Op::kDiv) return fail("a " + w + " cannot divide; " + r);
  return fail("'" + std::string(op_name(e.op)) + "' cannot be used in a " + w + "; " + r);
}

SizeExpr size_expr_of(const NamedAffine& a, const std::vector<SizeDecl>& sizes) {
  SizeExpr e = SizeExpr::constant(a.offset);
  for (const NamedTerm& t : a.terms) {
    if (t.coeff != 0) e.terms.push_back({size_number(sizes, t.name), t.coeff});
  }
  std::sort(e.terms.begin(), e.terms.end());
  return e;
}

bool scale_affine(NamedAffine& a, int64_t factor) {
  for (NamedTerm& t : a.terms) {
    if (__builtin_mul_overflow(t.coeff, factor, &t.coeff)) return false;
  }
  return !__builtin_mul_overflow(a.offset, factor, &a.offset);
}

NamedAffine Completer::affine(const RawExpr& e) {
  const char* kRule =
      "subscripts are affine: indices, integers and integer consts combined with +, - and "
      "multiplication by an integer";
  auto name = [&](const RawExpr& n) {
    NamedAffine a;
    a.loc = n.loc;
    const TensorNode* node = find(n.name);
    if (node && node->role == Role::kConst) {
      std::optional<int64_t> v = const_value(node, n.loc);
      if (!v) {
        a.ok = false;
        return a;
      }
      a.offset = *v;
      return a;
    }
    if (node) {
      error(n.loc, "'" + n.name + "' is a tensor, so it cannot be an index; " + std::string(kRule) +
                       " (give the index another name)");
      a.ok = false;
      return a;
    }
    if (size_number(n.name) >= 0) {
      error(n.loc, "size '" + n.name + "' cannot be used in a subscript; an index ranges over it where it "
                       "stands alone in a dimension of size " + n.name + " (or bound one: `where k < " + n.name + "`)");
      a.ok = false;
      return a;
    }
    a.terms.push_back({n.name, 1, n.loc});
    return a;
  };
  return affine_form(e, name, [&](SourceLoc loc, std::string message) { error(loc, std::move(message)); },
                     "subscript", kRule);
}

namespace {

bool reads_tensor(const RawExpr& e) {
  if (e.kind == RawExpr::Kind::kTensor || e.kind == RawExpr::Kind::kMerge) return true;
  return std::any_of(e.args.begin(), e.args.end(), [](const RawExprRef& a) { return a && reads_tensor(*a); });
}

// The terms of `e`'s + / - chain (unary minus included), each with whether it is subtracted.
void chain_terms(const RawExpr& e, bool negative, std::vector<std::pair<const RawExpr*, bool>>* out) {
  const bool binary = (e.op == Op::kAdd || e.op == Op::kSub) && e.args.size() == 2 && e.args[0] && e.args[1];
  if (e.kind == RawExpr::Kind::kOp && binary) {
    chain_terms(*e.args[0], negative, out);
    chain_terms(*e.args[1], e.op == Op::kSub ? !negative : negative, out);
  } else if (e.kind == RawExpr::Kind::kOp && e.op == Op::kNeg && e.args.size() == 1 && e.args[0]) {
    chain_terms(*e.args[0], !negative, out);
  } else {
    out->push_back({&e, negative});
  }
}

}  // namespace

NamedAffine Completer::subscript(const RawExpr* e, SourceLoc fallback) {
  if (!e) {
    error(fallback, "missing subscript");
    NamedAffine a;
    a.ok = false;
    return a;
  }
  NamedAffine a;
  if (!reads_tensor(*e)) {
    a = affine(*e);
  } else {
    // A gather (language version 2): the terms that read tensors are values; the rest, affine.
    std::vector<std::pair<const RawExpr*, bool>> terms, gathers;
    chain_terms(*e, false, &terms);
    RawExprRef rest = raw_number(0, false, e->loc);
    for (const auto& [term, negative] : terms) {
      if (reads_tensor(*term)) {
        gathers.push_back({term, negative});
      } else {
        rest = raw_op(negative ? Op::kSub : Op::kAdd, {rest, std::make_shared<RawExpr>(*term)}, term->loc);
      }
    }
    a = affine(*rest);
    a.gathers = std::move(gathers);
  }
  a.loc = e->loc;
  std::erase_if(a.terms, [](const NamedTerm& t) { return t.coeff == 0; });
  return a;
}

}  // namespace kiln::ir::internal
