// The optimization pipeline and the tree-rewriting helpers its passes share.
#include "kiln/loop/optimize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loop/passes/optimize_internal.h"
#include "loop/work_count.h"

namespace kiln::ir {

namespace internal {

LExprRef i64_const(int64_t value) { return lconst(DType::kI64, static_cast<double>(value)); }

LExprRef rewrite_expr(const LExprRef& e, const ExprRewrite& fn) {
  if (!e) return e;
  count_lowering_work(1);
  LExprRef offset = rewrite_expr(e->offset, fn);
  std::vector<LExprRef> args;
  bool changed = offset != e->offset;
  args.reserve(e->args.size());
  for (const LExprRef& arg : e->args) {
    args.push_back(rewrite_expr(arg, fn));
    changed = changed || args.back() != arg;
  }
  if (!changed) return fn(e);
  auto copy = std::make_shared<LExpr>(*e);
  copy->offset = std::move(offset);
  copy->args = std::move(args);
  return fn(copy);
}

LStmtRef with_body(const LStmtRef& s, std::vector<LStmtRef> body) {
  if (body == s->body) return s;
  auto copy = std::make_shared<LStmt>(*s);
  copy->body = std::move(body);
  return copy;
}

std::shared_ptr<LStmt> with_parts(const LStmtRef& s, std::vector<LStmtRef> body, LExprRef cond,
                                  LExprRef offset, LExprRef value) {
  if (body == s->body && cond == s->cond && offset == s->offset && value == s->value) {
    return nullptr;
  }
  auto copy = std::make_shared<LStmt>(*s);
  copy->body = std::move(body);
  copy->cond = std::move(cond);
  copy->offset = std::move(offset);
  copy->value = std::move(value);
  return copy;
}

LStmtRef rewrite_stmt_exprs(const LStmtRef& s, const ExprRewrite& fn) {
  if (!s) return s;
  std::vector<LStmtRef> body;
  body.reserve(s->body.size());
  for (const LStmtRef& child : s->body) body.push_back(rewrite_stmt_exprs(child, fn));
  LExprRef cond = rewrite_expr(s->cond, fn);
  LExprRef offset = rewrite_expr(s->offset, fn);
  LExprRef value = rewrite_expr(s->value, fn);
  std::shared_ptr<LStmt> copy =
      with_parts(s, std::move(body), std::move(cond), std::move(offset), std::move(value));
  if (!copy) return s;
  // A store's type is its value's (loop.h); rewrites keep expression types, so this is a no-op
  // kept for safety.
  const bool store = copy->kind == LStmt::Kind::kStore || copy->kind == LStmt::Kind::kLocalStore;
  if (copy->value && store) {
    copy->type = copy->value->type;
  }
  return copy;
}

}  // namespace internal

void drop_unused_bindings(Kernel& kernel) {
  const NodeAccess access = node_access(kernel);
  auto accessed = [&](int node) {
    return std::binary_search(access.read.begin(), access.read.end(), node) ||
           std::binary_search(access.written.begin(), access.written.end(), node);
  };
  std::erase_if(kernel.nodes, [&](int node) { return !accessed(node); });
}

namespace {

bool contains_trace(const LStmtRef& s) {
  if (!s) return false;
  if (s->kind == LStmt::Kind::kTrace) return true;
  return std::any_of(s->body.begin(), s->body.end(), [](const LStmtRef& b) { return contains_trace(b); });
}

}  // namespace

void optimize_kernel(Kernel& kernel, const OptimizeOptions& options) {
  // A traced kernel logs its points in the order lowering wrote them: it stays as it is.
  if (contains_trace(kernel.body)) return;
  if (split_borders(kernel)) fold_constants(kernel);
  split_reductions(kernel, options.reassociate);
  fold_constants(kernel);
  if (tile_contractions(kernel)) fold_constants(kernel);
  hoist_invariants(kernel);
  form_fma(kernel);
  drop_unused_bindings(kernel);
}

}  // namespace kiln::ir
