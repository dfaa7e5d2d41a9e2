// Border splitting: a loop whose body compares its variable against constants (the range checks
// of a read at an offset, i2 + r - 1 in a padded convolution, or a `where` bound) runs as up to
// three loops: the first iterations, the interior where every such check is decided, and the
// last ones. In the interior the checks are constants, so folding removes them and the C
// compiler sees plain, vectorizable loads.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"

namespace kiln::ir {

namespace {

using internal::i64_const;
using internal::rewrite_expr;
using internal::rewrite_stmt_exprs;

// A loop is split only where its interior is at least this long and at least half of it: the
// border copies then cost little code for what they save.
constexpr int64_t kMinInterior = 4;
// Splits nest at most this deep (a 2-D window: 9 copies of the body), and a body is copied only
// while it is at most this many expression nodes, so a long kernel does not multiply GCC's work.
constexpr int kMaxDepth = 2;
constexpr size_t kMaxBodyNodes = 4000;

// An ordering: == and != hold on one point, not on one side of it.
bool is_ordering(Op op) { return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe; }

// A comparison of c * v + k against 0 over the loop variable v alone (c != 0).
struct VarComparison {
  Op op;
  __int128 c;
  __int128 k;
  bool at(int64_t v) const {
    const __int128 e = c * v + k;
    switch (op) {
      case Op::kLt: return e < 0;
      case Op::kLe: return e <= 0;
      case Op::kGt: return e > 0;
      default: return e >= 0;
    }
  }
};

// The rewrite that replaces loop variable `var` by `by`.
internal::ExprRewrite replacing_var(int var, LExprRef by) {
  return [var, by = std::move(by)](const LExprRef& x) { return x->kind == LExpr::Kind::kVar && x->var == var ? by : x; };
}

// `cmp` as c * var + k compared with 0, where its operands are i64 expressions of `var` and
// constants only.
std::optional<VarComparison> as_var_comparison(const LExpr& cmp, int var) {
  if (cmp.kind != LExpr::Kind::kOp || !is_ordering(cmp.op) || cmp.args.size() != 2) return std::nullopt;
  if (cmp.args[0]->type != DType::kI64 || cmp.args[1]->type != DType::kI64) return std::nullopt;
  const LExprRef diff = lop(Op::kSub, DType::kI64, {cmp.args[0], cmp.args[1]});
  const std::optional<int64_t> c = var_coefficient(*diff, var);
  if (!c || *c == 0) return std::nullopt;
  const std::optional<int64_t> k = evaluate_extent(*rewrite_expr(diff, replacing_var(var, i64_const(0))), {});
  if (!k) return std::nullopt;
  return VarComparison{cmp.op, *c, *k};
}

void collect_comparisons(const LExpr* e, int var, std::vector<VarComparison>& out, size_t& nodes) {
  if (!e) return;
  ++nodes;
  if (std::optional<VarComparison> vc = as_var_comparison(*e, var)) out.push_back(*vc);
  collect_comparisons(e->offset.get(), var, out, nodes);
  for (const LExprRef& a : e->args) collect_comparisons(a.get(), var, out, nodes);
}

void collect_comparisons(const LStmtRef& s, int var, std::vector<VarComparison>& out, size_t& nodes) {
  if (!s) return;
  ++nodes;
  for (const LExpr* e : {s->cond.get(), s->offset.get(), s->value.get()}) collect_comparisons(e, var, out, nodes);
  for (const LExprRef& e : s->values) collect_comparisons(e.get(), var, out, nodes);
  for (const LStmtRef& child : s->body) collect_comparisons(child, var, out, nodes);
}

// The iterations of [0, extent) where `vc` holds: a prefix [0, end) or a suffix [begin, extent)
// (it is monotone in v), found by bisection.
struct Span {
  int64_t begin, end;
};
Span true_span(const VarComparison& vc, int64_t extent) {
  const bool first = vc.at(0), last = vc.at(extent - 1);
  if (first == last) return first ? Span{0, extent} : Span{0, 0};
  int64_t lo = 0, hi = extent - 1;  // vc.at(lo) == first, vc.at(hi) == last
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (vc.at(mid) == first ? lo : hi) = mid;
  }
  return first ? Span{0, hi} : Span{hi, extent};
}

// The body with every comparison over `var` that is constant on [begin, end) replaced by it.
LStmtRef decide_comparisons(const LStmtRef& body, int var, int64_t begin, int64_t end) {
  return rewrite_stmt_exprs(body, [&](const LExprRef& e) -> LExprRef {
    const std::optional<VarComparison> vc = as_var_comparison(*e, var);
    if (!vc) return e;
    const bool first = vc->at(begin);
    if (vc->at(end - 1) != first) return e;
    return lconst(e->type, first ? 1 : 0);
  });
}

// The loop's body run for iterations [begin, end) of the original loop.
LStmtRef shifted_loop(const LStmt& loop, const std::vector<LStmtRef>& body, int64_t begin, int64_t end) {
  std::vector<LStmtRef> shifted;
  const internal::ExprRewrite shift = replacing_var(loop.var, lop(Op::kAdd, DType::kI64, {lvar(loop.var), i64_const(begin)}));
  for (const LStmtRef& s : body) shifted.push_back(begin == 0 ? s : rewrite_stmt_exprs(s, shift));
  return lfor(loop.var, end - begin, false, std::move(shifted));
}

LStmtRef split(const LStmtRef& s, int depth, bool& changed);

std::vector<LStmtRef> split_all(const std::vector<LStmtRef>& body, int depth, bool& changed) {
  std::vector<LStmtRef> out;
  out.reserve(body.size());
  for (const LStmtRef& child : body) out.push_back(split(child, depth, changed));
  return out;
}

LStmtRef split(const LStmtRef& s, int depth, bool& changed) {
  if (!s) return s;
  const bool candidate = s->kind == LStmt::Kind::kFor && !s->parallel && !s->extent_expr &&
                         s->extent > kMinInterior && depth < kMaxDepth && !has_triangular_loop(s);
  if (!candidate) return internal::with_body(s, split_all(s->body, depth, changed));
  std::vector<VarComparison> comparisons;
  size_t nodes = 0;
  for (const LStmtRef& child : s->body) collect_comparisons(child, s->var, comparisons, nodes);
  // The interior: where every check that fails only near one end of the loop holds.
  int64_t begin = 0, end = s->extent;
  for (const VarComparison& vc : comparisons) {
    const Span span = true_span(vc, s->extent);
    if (span.begin == 0 && span.end == s->extent) continue;
    if (span.begin == 0 && span.end * 2 >= s->extent) end = std::min(end, span.end);
    if (span.end == s->extent && span.begin * 2 <= s->extent) begin = std::max(begin, span.begin);
  }
  const int64_t interior = end - begin;
  if ((begin == 0 && end == s->extent) || interior < kMinInterior || interior * 2 < s->extent ||
      nodes > kMaxBodyNodes) {
    return internal::with_body(s, split_all(s->body, depth, changed));
  }
  changed = true;
  std::vector<LStmtRef> middle;
  for (const LStmtRef& child : s->body) middle.push_back(decide_comparisons(child, s->var, begin, end));
  // Both ends run the same body (shared: trees are immutable), split once.
  const std::vector<LStmtRef> ends = split_all(s->body, depth + 1, changed);
  std::vector<LStmtRef> loops;
  if (begin > 0) loops.push_back(shifted_loop(*s, ends, 0, begin));
  loops.push_back(shifted_loop(*s, split_all(middle, depth + 1, changed), begin, end));
  if (end < s->extent) loops.push_back(shifted_loop(*s, ends, end, s->extent));
  return lblock(std::move(loops));
}

}  // namespace

bool split_borders(Kernel& kernel) {
  bool changed = false;
  kernel.body = split(kernel.body, 0, changed);
  return changed;
}

}  // namespace kiln::ir
