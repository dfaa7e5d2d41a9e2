// The high-level IR's names, typing rule and validate_program().
#include "kiln/ir/program.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kiln/ir/builder.h"

namespace kiln::ir {
namespace {

TEST(ProgramNames, EnumNames) {
  EXPECT_EQ(dtype_name(DType::kF32), "f32");
  EXPECT_EQ(dtype_name(DType::kF64), "f64");
  EXPECT_EQ(dtype_name(DType::kI32), "i32");
  EXPECT_EQ(dtype_name(DType::kI64), "i64");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF64), 8u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(role_name(Role::kInput), "input");
  EXPECT_EQ(role_name(Role::kOutput), "output");
  EXPECT_EQ(role_name(Role::kParam), "param");
  EXPECT_EQ(role_name(Role::kTensor), "tensor");
  EXPECT_EQ(role_name(Role::kConst), "const");
  EXPECT_EQ(memory_mode_name(MemoryMode::kUnset), "unset");
  EXPECT_EQ(memory_mode_name(MemoryMode::kVirtual), "virtual");
  EXPECT_EQ(memory_mode_name(MemoryMode::kLocal), "local");
  EXPECT_EQ(memory_mode_name(MemoryMode::kOnDevice), "on_device");
  EXPECT_EQ(memory_mode_name(MemoryMode::kHosted), "hosted");
  EXPECT_EQ(accum_name(Accum::kAssign), "=");
  EXPECT_EQ(accum_name(Accum::kAdd), "+=");
  EXPECT_EQ(accum_name(Accum::kSub), "-=");
  EXPECT_EQ(accum_name(Accum::kMul), "*=");
  EXPECT_EQ(reduce_name(Reduce::kNone), "");
  EXPECT_EQ(reduce_name(Reduce::kSum), "sum");
  EXPECT_EQ(reduce_name(Reduce::kProd), "prod");
  EXPECT_EQ(reduce_name(Reduce::kMax), "max");
  EXPECT_EQ(reduce_name(Reduce::kMin), "min");
  EXPECT_EQ(reduce_name(Reduce::kMean), "mean");
}

TEST(ProgramNames, OpNamesAndArity) {
  struct Case {
    Op op;
    const char* name;
    int arity;
  };
  const Case cases[] = {
      {Op::kNeg, "-", 1},      {Op::kExp, "exp", 1},     {Op::kLog, "log", 1},
      {Op::kSqrt, "sqrt", 1},  {Op::kRsqrt, "rsqrt", 1}, {Op::kTanh, "tanh", 1},
      {Op::kSigmoid, "sigmoid", 1}, {Op::kRelu, "relu", 1}, {Op::kAbs, "abs", 1},
      {Op::kSin, "sin", 1},    {Op::kCos, "cos", 1},     {Op::kFloor, "floor", 1},
      {Op::kCeil, "ceil", 1},  {Op::kCastF32, "f32", 1}, {Op::kCastF64, "f64", 1},
      {Op::kCastI32, "i32", 1}, {Op::kAdd, "+", 2},      {Op::kSub, "-", 2},
      {Op::kMul, "*", 2},      {Op::kDiv, "/", 2},       {Op::kLt, "<", 2},
      {Op::kLe, "<=", 2},      {Op::kGt, ">", 2},        {Op::kGe, ">=", 2},
      {Op::kEq, "==", 2},      {Op::kNe, "!=", 2},       {Op::kMax, "max", 2},
      {Op::kMin, "min", 2},    {Op::kPow, "pow", 2},     {Op::kSelect, "select", 3},
      {Op::kFma, "fma", 3},    {Op::kErf, "erf", 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(op_name(c.op), c.name);
    EXPECT_EQ(op_arity(c.op), c.arity) << c.name;
  }
}

TEST(ProgramTypes, Promote) {
  EXPECT_EQ(promote(DType::kI32, DType::kF32), DType::kF32);
  EXPECT_EQ(promote(DType::kF32, DType::kI32), DType::kF32);
  EXPECT_EQ(promote(DType::kF32, DType::kF64), DType::kF64);
  EXPECT_EQ(promote(DType::kI32, DType::kF64), DType::kF64);
  EXPECT_EQ(promote(DType::kI32, DType::kI32), DType::kI32);
  EXPECT_EQ(promote(DType::kI32, DType::kI64), DType::kI64);
  EXPECT_EQ(promote(DType::kI64, DType::kF32), DType::kF32);
  EXPECT_EQ(promote(DType::kF64, DType::kF64), DType::kF64);
}

TEST(ProgramTypes, OpResultType) {
  using D = DType;
  EXPECT_EQ(op_result_type(Op::kAdd, {D::kI32, D::kF32}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kLt, {D::kF64, D::kI32}), D::kBool);  // version 3: comparisons give bool
  EXPECT_EQ(op_result_type(Op::kExp, {D::kI32}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kExp, {D::kF64}), D::kF64);
  EXPECT_EQ(op_result_type(Op::kAbs, {D::kI32}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kNeg, {D::kI32}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kFloor, {D::kF32}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kCastI32, {D::kF64}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kCastF64, {D::kI32}), D::kF64);
  EXPECT_EQ(op_result_type(Op::kSelect, {D::kF64, D::kI32, D::kI32}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kSelect, {D::kI32, D::kF32, D::kI32}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kFma, {D::kF32, D::kF32, D::kF64}), D::kF64);
  EXPECT_EQ(op_result_type(Op::kPow, {D::kI32, D::kI32}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kAdd, {D::kF32}), std::nullopt);  // wrong arity
}

TEST(ProgramTypes, ElementCountAndBareIndex) {
  TensorNode n;
  EXPECT_TRUE(n.is_scalar());
  EXPECT_EQ(n.element_count(), 1);
  n.dims = {2, 3, 4};
  EXPECT_EQ(n.element_count(), 24);
  n.dims = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(n.element_count(), INT64_MAX);  // saturates
  EXPECT_EQ(Affine::index(3).bare_index(), 3);
  EXPECT_EQ((Affine{{{1, 2}}, 0, -1}).bare_index(), -1);
  EXPECT_EQ((Affine{{{1, 1}}, 1, -1}).bare_index(), -1);
  EXPECT_EQ((Affine{{{1, 1}, {2, 1}}, 0, -1}).bare_index(), -1);
  EXPECT_EQ((Affine{{}, 0, -1}).bare_index(), -1);
}

TEST(ProgramTypes, KeywordsAndIdentifiers) {
  for (const char* k : {"input", "output", "param", "tensor", "const", "routine", "where"}) {
    EXPECT_TRUE(is_keyword(k)) << k;
    EXPECT_FALSE(is_identifier(k)) << k;
  }
  EXPECT_FALSE(is_keyword("sum"));
  EXPECT_TRUE(is_identifier("x"));
  EXPECT_TRUE(is_identifier("_a1"));
  EXPECT_TRUE(is_identifier("f32"));
  EXPECT_FALSE(is_identifier(""));
  EXPECT_FALSE(is_identifier("1x"));
  EXPECT_FALSE(is_identifier("a-b"));
  EXPECT_FALSE(is_identifier("x.merge"));
}

// y[i, j] = sum(a[i, k] * b[k, j]) in routine main, and w[i] += w.merge[i] in routine sync.
Program sample() {
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kF32, {2, 3});
  Tensor w = b.param("w", DType::kF32, {3});
  Tensor bm = b.input("b", DType::kF32, {3, 4});
  Tensor y = b.output("y", DType::kF32, {2, 4});
  b.constant("c", DType::kF32, 2);
  Index i("i"), j("j"), k("k");
  b.main().assign(y(i, j), sum(a(i, k) * bm(k, j)));
  b.routine("sync").add(w(i), w.merge(i));
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(ProgramTypes, FindAndReducedIndices) {
  Program p = sample();
  ASSERT_NE(p.find_node("b"), nullptr);
  EXPECT_EQ(p.find_node("b")->id, 2);
  EXPECT_EQ(p.find_node("nope"), nullptr);
  ASSERT_NE(p.find_routine("sync"), nullptr);
  EXPECT_EQ(p.find_routine("main"), &p.routines[0]);
  EXPECT_EQ(p.find_routine("nope"), nullptr);
  const Assignment& s = p.routines[0].statements[0];
  EXPECT_EQ(s.target_indices, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.reduced_indices(), (std::vector<int>{2}));
  EXPECT_TRUE(p.routines[1].statements[0].reduced_indices().empty());
}

TEST(ValidateProgram, SampleIsValid) { EXPECT_TRUE(validate_program(sample()).ok()); }

Expr& mutable_rhs(Program& p, int routine = 0) {
  return const_cast<Expr&>(*p.routines[routine].statements[0].rhs);
}

// Float literals and float values may be inf, -inf or nan (the language's predeclared names).
TEST(ValidateProgram, FloatLiteralsAndValuesMayBeInfiniteOrNaN) {
  Program p = sample();
  p.nodes[1].init = value_init(-1.0 / 0.0);
  auto lit = std::make_shared<Expr>();
  lit->kind = Expr::Kind::kLiteral;
  lit->type = mutable_rhs(p).args[1]->type;
  lit->literal = 0.0 / 0.0;
  mutable_rhs(p).args[1] = lit;
  Status s = validate_program(p);
  EXPECT_TRUE(s.ok()) << s;
}

struct Mutation {
  const char* what;
  std::function<void(Program&)> mutate;
  const char* fragment;  // expected in the message
};

TEST(ValidateProgram, RejectsEachBrokenInvariant) {
  const Mutation mutations[] = {
      {"node id", [](Program& p) { p.nodes[1].id = 7; }, "node 1 'w': id is 7, expected 1"},
      {"empty name", [](Program& p) { p.nodes[1].name = ""; }, "node 1: has no name"},
      {"duplicate name", [](Program& p) { p.nodes[1].name = "a"; }, "node 1 'a': the name is declared twice"},
      {"negative dim", [](Program& p) { p.nodes[1].dims = {-1}; }, "dimension 0 has size -1; sizes must be 0 or more"},
      {"huge", [](Program& p) { p.nodes[1].dims = {int64_t{1} << 40, int64_t{1} << 40}; }, "2^62"},
      {"no element type", [](Program& p) { p.nodes[1].dtype = static_cast<DType>(200); }, "has no valid element type"},
      {"input init", [](Program& p) { p.nodes[0].init = value_init(1); }, "input nodes have no initializer"},
      {"const without value", [](Program& p) { p.nodes[4].init = {}; }, "a const needs a value initializer"},
      {"non-finite random init", [](Program& p) {
         p.nodes[1].init = value_init(0);
         p.nodes[1].init.kind = Init::Kind::kUniform;
         p.nodes[1].init.b = 1.0 / 0.0;
       }, "not finite"},
      {"duplicate routine", [](Program& p) { p.routines[1].name = "main"; }, "routine 'main' is defined twice"},
      {"target missing", [](Program& p) { p.routines[0].statements[0].target = 9; },
       "routine 'main', statement 1: target node 9 does not exist"},
      {"target input", [](Program& p) { p.routines[0].statements[0].target = 0; }, "assigns to input 'a', which is read-only"},
      {"target const", [](Program& p) { p.routines[1].statements[0].target = 4; },
       "routine 'sync', statement 1: assigns to const 'c'"},
      {"target index count", [](Program& p) { p.routines[0].statements[0].target_indices = {0}; },
       "target 'y' has 2 dimensions but 1 target indices"},
      {"duplicate target index", [](Program& p) { p.routines[0].statements[0].target_indices = {0, 0}; },
       "index 'i' appears twice in the target"},
      // A read's dimension may differ from its index's range (the read is range-checked); the
      // target's may not.
      {"extent", [](Program& p) { p.routines[0].statements[0].indices[0].extent = 5; },
       "index 'i' has extent 5 but stands alone in dimension 0 of 'y', of size 2"},
      {"limit on a target index", [](Program& p) {
         p.routines[0].statements[0].indices[0].limit = IndexLimit{{{1, 1}}, SizeExpr::constant(1)};
       }, "index 'i' is a target index but has a limit; only a reduced index may"},
      {"limit naming itself", [](Program& p) {
         p.routines[0].statements[0].indices[2].limit = IndexLimit{{{2, 1}}, SizeExpr::constant(1)};
       }, "the limit of index 'k' names index number 2 (coefficient 1), which it may not"},
      {"limit naming no index", [](Program& p) {
         p.routines[0].statements[0].indices[2].limit = IndexLimit{{{9, 1}}, SizeExpr::constant(1)};
       }, "the limit of index 'k' names index number 9"},
      {"mean over a triangle", [](Program& p) {
         Assignment& s = p.routines[0].statements[0];
         s.reduce = Reduce::kMean;
         s.target_indices = {0, 1};
         s.indices.push_back({"q", 2, std::nullopt, IndexLimit{{{2, 1}}, SizeExpr::constant(1)}});
         auto value = std::make_shared<Expr>();
         value->kind = Expr::Kind::kIndex;
         value->type = DType::kI32;
         value->index = 3;
         auto cast = std::make_shared<Expr>();
         cast->kind = Expr::Kind::kOp;
         cast->op = Op::kCastF32;
         cast->type = DType::kF32;
         cast->args = {value};
         auto sum = std::make_shared<Expr>();
         sum->kind = Expr::Kind::kOp;
         sum->op = Op::kAdd;
         sum->type = DType::kF32;
         sum->args = {s.rhs, cast};
         s.rhs = sum;
       }, "mean over index 'q', whose limit names index 'k', which it also reduces over"},
      {"limit naming no size", [](Program& p) {
         p.routines[0].statements[0].indices[2].limit = IndexLimit{{{0, 1}}, SizeExpr::size(3)};
       }, "the limit of index 'k' names size number 3, which does not exist"},
      {"negative extent", [](Program& p) { p.routines[0].statements[0].indices[2].extent = -1; }, "extents must be 0 or more"},
      {"duplicate index name", [](Program& p) { p.routines[0].statements[0].indices[2].name = "i"; }, "two indices are named 'i'"},
      {"index named like a node", [](Program& p) { p.routines[0].statements[0].indices[2].name = "w"; },
       "index 'w' has the name of a tensor"},
      {"unused index",
       [](Program& p) { p.routines[0].statements[0].indices.push_back({"q", 2, std::nullopt, std::nullopt}); },
       "index 'q' is not used"},
      {"no reduction", [](Program& p) { p.routines[0].statements[0].reduce = Reduce::kNone; },
       "index 'k' is not on the left side and there is no reduction"},
      {"null rhs", [](Program& p) { p.routines[0].statements[0].rhs = nullptr; }, "the right side is missing"},
      {"op arity", [](Program& p) { mutable_rhs(p).args.pop_back(); }, "op '*' has 1 arguments, expected 2"},
      {"op type", [](Program& p) { mutable_rhs(p).type = DType::kF64; }, "op '*' has type f64 but its arguments give f32"},
      {"read type", [](Program& p) { const_cast<Expr&>(*mutable_rhs(p).args[0]).type = DType::kI32; },
       "read of 'a' has type i32, not its dtype f32"},
      {"subscript count", [](Program& p) { const_cast<Expr&>(*mutable_rhs(p).args[0]).subscripts.pop_back(); },
       "'a' has 2 dimensions but is referenced with 1 subscripts"},
      {"zero coefficient", [](Program& p) { const_cast<Expr&>(*mutable_rhs(p).args[0]).subscripts[0].terms[0].second = 0; },
       "has a zero coefficient for index 'i'"},
      {"term index", [](Program& p) { const_cast<Expr&>(*mutable_rhs(p).args[0]).subscripts[0].terms[0].first = 9; },
       "names index number 9, which does not exist"},
      {"repeated term", [](Program& p) {
         const_cast<Expr&>(*mutable_rhs(p).args[0]).subscripts[1].terms = {{2, 1}, {2, 1}};
       }, "repeats index 'k'"},
      {"read node", [](Program& p) { const_cast<Expr&>(*mutable_rhs(p).args[0]).node = 42; }, "read of node 42"},
      {"merge of const", [](Program& p) {
         Expr& e = mutable_rhs(p, 1);
         e.node = 4;
       }, "merge read of const 'c'"},
      {"i32 NaN literal", [](Program& p) {
         auto lit = std::make_shared<Expr>();
         lit->kind = Expr::Kind::kLiteral;
         lit->type = DType::kI32;
         lit->literal = 0.0 / 0.0;
         p.routines[0].statements[0].rhs = lit;
         p.routines[0].statements[0].indices.pop_back();
       }, "i32 value"},
      {"i32 literal", [](Program& p) {
         auto lit = std::make_shared<Expr>();
         lit->kind = Expr::Kind::kLiteral;
         lit->type = DType::kI32;
         lit->literal = 0.5;
         p.routines[0].statements[0].rhs = lit;
         p.routines[0].statements[0].indices.pop_back();
       }, "i32 value"},
      {"index type", [](Program& p) {
         auto e = std::make_shared<Expr>();
         e->kind = Expr::Kind::kIndex;
         e->index = 0;
         e->type = DType::kF32;
         p.routines[1].statements[0].rhs = e;
       }, "the value of index 'i' is not i32"},
      {"too deep", [](Program& p) {
         ExprRef e = p.routines[1].statements[0].rhs;
         for (int n = 0; n < kMaxExprDepth + 1; ++n) {
           auto neg = std::make_shared<Expr>();
           neg->kind = Expr::Kind::kOp;
           neg->op = Op::kNeg;
           neg->args = {e};
           e = neg;
         }
         p.routines[1].statements[0].rhs = e;
       }, "expression nested deeper than 256 levels"},
  };
  for (const Mutation& m : mutations) {
    Program p = sample();
    m.mutate(p);
    Status s = validate_program(p);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << m.what;
    EXPECT_NE(s.message().find(m.fragment), std::string::npos) << m.what << ": " << s.message();
  }
}

// Language version 2: a reduced index's triangular limit, and reads whose dimension is not their
// index's range, are valid.
TEST(ValidateProgram, AcceptsLimitsAndReadsOfOtherSizes) {
  Program p = sample();
  p.routines[0].statements[0].indices[2].limit = IndexLimit{{{0, 1}}, SizeExpr::constant(1)};  // k < i + 1
  EXPECT_TRUE(validate_program(p).ok()) << validate_program(p);
  p.routines[0].statements[0].indices[2].extent = 5;  // a[i, k] and b[k, j] are checked reads
  EXPECT_TRUE(validate_program(p).ok()) << validate_program(p);
}

TEST(ValidateProgram, NamesTheLineOfParsedStatements) {
  Program p = sample();
  p.routines[0].statements[0].loc = SourceLoc{12, 1};
  p.routines[0].statements[0].target = 0;
  EXPECT_NE(validate_program(p).message().find("routine 'main', statement 1 (line 12): "), std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
