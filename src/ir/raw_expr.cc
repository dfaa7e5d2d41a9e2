// Constructors of the parser's unresolved expressions (RawExpr, kiln/ir/statement.h).
#include "kiln/ir/statement.h"

namespace kiln::ir {

RawExprRef raw_number(double value, bool is_float, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kNumber;
  e->number = value;
  e->is_float = is_float;
  e->loc = loc;
  return e;
}

RawExprRef raw_name(std::string name, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kName;
  e->name = std::move(name);
  e->loc = loc;
  return e;
}

RawExprRef raw_tensor(std::string name, std::vector<RawExprRef> subscripts, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kTensor;
  e->name = std::move(name);
  e->args = std::move(subscripts);
  e->loc = loc;
  return e;
}

RawExprRef raw_merge(std::string name, std::vector<RawExprRef> subscripts, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kMerge;
  e->name = std::move(name);
  e->args = std::move(subscripts);
  e->loc = loc;
  return e;
}

RawExprRef raw_op(Op op, std::vector<RawExprRef> args, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kOp;
  e->op = op;
  e->args = std::move(args);
  e->loc = loc;
  return e;
}

RawExprRef raw_reduce(Reduce reduce, RawExprRef arg, SourceLoc loc) {
  auto e = std::make_shared<RawExpr>();
  e->kind = RawExpr::Kind::kReduce;
  e->reduce = reduce;
  e->args.push_back(std::move(arg));
  e->loc = loc;
  return e;
}

}  // namespace kiln::ir
