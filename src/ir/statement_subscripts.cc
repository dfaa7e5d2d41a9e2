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

NamedAffine Completer::affine(const RawExpr& e) {
  NamedAffine a;
  a.loc = e.loc;
  auto fail = [&](std::string message) {
    error(e.loc, std::move(message));
    a.ok = false;
    return a;
  };
  const char* kRule =
      "subscripts are affine: indices, integers and integer consts combined with +, - and "
      "multiplication by an integer";
  switch (e.kind) {
    case RawExpr::Kind::kNumber:
      if (e.is_float) return fail("a subscript must be an integer, not a float literal; " + std::string(kRule));
      if (!(std::fabs(e.number) <= kMaxExactInteger)) return fail("integer in a subscript is too large");
      a.offset = static_cast<int64_t>(e.number);
      return a;
    case RawExpr::Kind::kName: {
      const TensorNode* node = find(e.name);
      if (node && node->role == Role::kConst) {
        std::optional<int64_t> v = const_value(node, e.loc);
        if (!v) {
          a.ok = false;
          return a;
        }
        a.offset = *v;
        return a;
      }
      if (node) {
        return fail("'" + e.name + "' is a tensor, so it cannot be an index; " + std::string(kRule) +
                    " (give the index another name)");
      }
      a.terms.push_back({e.name, 1, e.loc});
      return a;
    }
    case RawExpr::Kind::kTensor:
    case RawExpr::Kind::kMerge:
      return fail("a tensor value cannot be used in a subscript (no data-dependent indexing); " +
                  std::string(kRule));
    case RawExpr::Kind::kReduce:
      return fail("a reduction cannot be used in a subscript; " + std::string(kRule));
    case RawExpr::Kind::kOp:
      break;
  }
  for (const RawExprRef& arg : e.args) {
    if (!arg) return fail("missing operand in a subscript");
  }
  if (e.op == Op::kNeg && e.args.size() == 1) {
    a = affine(*e.args[0]);
    if (a.ok) a.ok = scale(a, -1, e.loc);
    a.loc = e.loc;
    return a;
  }
  if ((e.op == Op::kAdd || e.op == Op::kSub || e.op == Op::kMul) && e.args.size() == 2) {
    NamedAffine l = affine(*e.args[0]);
    NamedAffine r = affine(*e.args[1]);
    if (!l.ok || !r.ok) {
      a.ok = false;
      return a;
    }
    if (e.op == Op::kMul) {
      if (!l.terms.empty() && !r.terms.empty()) {
        return fail("subscript is not affine: it multiplies index '" + l.terms[0].name +
                    "' by index '" + r.terms[0].name + "'; " + kRule);
      }
      if (l.terms.empty()) std::swap(l, r);
      // l * constant r
      if (!scale(l, r.offset, e.loc)) return fail("subscript arithmetic overflows");
      l.loc = e.loc;
      return l;
    }
    if (e.op == Op::kSub && !scale(r, -1, e.loc)) return fail("subscript arithmetic overflows");
    if (l.terms.size() + r.terms.size() > kMaxStatementIndices) {
      return fail("a subscript with more than " + std::to_string(kMaxStatementIndices) +
                  " indices is not supported");
    }
    for (const NamedTerm& t : r.terms) {
      auto it = std::find_if(l.terms.begin(), l.terms.end(), [&](const NamedTerm& u) { return u.name == t.name; });
      if (it == l.terms.end()) {
        l.terms.push_back(t);
      } else if (__builtin_add_overflow(it->coeff, t.coeff, &it->coeff)) {
        return fail("subscript arithmetic overflows");
      }
    }
    if (__builtin_add_overflow(l.offset, r.offset, &l.offset)) return fail("subscript arithmetic overflows");
    l.loc = e.loc;
    return l;
  }
  if (e.op == Op::kDiv) return fail("a subscript cannot divide; " + std::string(kRule));
  return fail("'" + std::string(op_name(e.op)) + "' cannot be used in a subscript; " + kRule);
}

bool Completer::scale(NamedAffine& a, int64_t factor, SourceLoc loc) {
  for (NamedTerm& t : a.terms) {
    if (__builtin_mul_overflow(t.coeff, factor, &t.coeff)) return false;
  }
  return !__builtin_mul_overflow(a.offset, factor, &a.offset);
}

NamedAffine Completer::subscript(const RawExpr* e, SourceLoc fallback) {
  if (!e) {
    error(fallback, "missing subscript");
    NamedAffine a;
    a.ok = false;
    return a;
  }
  NamedAffine a = affine(*e);
  a.loc = e->loc;
  std::erase_if(a.terms, [](const NamedTerm& t) { return t.coeff == 0; });
  return a;
}

}  // namespace kiln::ir::internal
