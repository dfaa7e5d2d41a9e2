// Tree-rewriting helpers shared by the loop-IR optimization passes (passes/*.cc).
// Trees are immutable and shared (LExprRef / LStmtRef), so a rewrite rebuilds only the path to
// what changed and returns the very same pointer for an unchanged subtree.
#pragma once

#include <functional>

#include "kiln/loop/loop.h"

namespace kiln::ir::internal {

using ExprRewrite = std::function<LExprRef(const LExprRef&)>;

// An i64 constant.
LExprRef i64_const(int64_t value);

// Rewrites `e` bottom-up: its offset and operands first, then `fn` on the node rebuilt with
// them. A null expression stays null.
LExprRef rewrite_expr(const LExprRef& e, const ExprRewrite& fn);

// Every expression of a statement tree (conditions, offsets, values) through rewrite_expr.
LStmtRef rewrite_stmt_exprs(const LStmtRef& s, const ExprRewrite& fn);

// `s` with `body` as its body (a copy; `s` itself when the body is the same).
LStmtRef with_body(const LStmtRef& s, std::vector<LStmtRef> body);

// A copy of `s` with these body, condition, offset and value; null when every one of them is
// the one `s` has (the caller keeps `s`).
std::shared_ptr<LStmt> with_parts(const LStmtRef& s, std::vector<LStmtRef> body, LExprRef cond,
                                  LExprRef offset, LExprRef value);

}  // namespace kiln::ir::internal
