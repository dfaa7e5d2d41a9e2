// Fused multiply-add formation: float a * b + c as fma(a, b, c). loop.h lets a backend round an
// fma once or twice, so this changes results only by rounding, and it lets every backend (not
// only a C compiler allowed to contract) use one instruction.
#include "kiln/loop/op_eval.h"
#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"

namespace kiln::ir {

namespace {

bool is_mul(const LExprRef& e, DType type) {
  return e && e->kind == LExpr::Kind::kOp && e->op == Op::kMul && e->type == type &&
         e->args.size() == 2;
}

LExprRef fuse(const LExprRef& e) {
  if (e->kind != LExpr::Kind::kOp || e->op != Op::kAdd || !is_float_type(e->type) ||
      e->args.size() != 2) {
    return e;
  }
  // a * b + c, else c + a * b (the left product first when both are products). a * b - c is
  // not rewritten: fma(a, b, -c) would be exact, but it is not what lowering produces often.
  for (size_t i = 0; i < 2; ++i) {
    const LExprRef& product = e->args[i];
    if (!is_mul(product, e->type)) continue;
    return lop(Op::kFma, e->type, {product->args[0], product->args[1], e->args[1 - i]});
  }
  return e;
}

}  // namespace

void form_fma(Kernel& kernel) { kernel.body = internal::rewrite_stmt_exprs(kernel.body, fuse); }

}  // namespace kiln::ir
