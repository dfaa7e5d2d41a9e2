// Constructors of the loop IR. Its text form is in loop_text.cc.
#include "kiln/ir/loop.h"

namespace kiln::ir {

LExprRef lconst(DType type, double value) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kConst;
  e->type = type;
  e->value = value;
  return e;
}

LExprRef lvar(int var) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kVar;
  e->type = DType::kI64;
  e->var = var;
  return e;
}

LExprRef lload(int node, DType type, LExprRef offset) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kLoad;
  e->type = type;
  e->node = node;
  e->offset = std::move(offset);
  return e;
}

LExprRef llocal_load(int local, DType type, LExprRef offset) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kLocalLoad;
  e->type = type;
  e->local = local;
  e->offset = std::move(offset);
  return e;
}

LExprRef lop(Op op, DType type, std::vector<LExprRef> args) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kOp;
  e->type = type;
  e->op = op;
  e->args = std::move(args);
  return e;
}

}  // namespace kiln::ir
