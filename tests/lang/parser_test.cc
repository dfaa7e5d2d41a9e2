// The parser: every construct of the language.
#include "kiln/lang/parser.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"

namespace kiln::lang {
namespace {

using ir::DType;
using ir::Expr;
using ir::Op;
using ir::Role;

ir::Program parse_ok(std::string_view text) {
  ParseResult r = parse(text, "test.kiln");
  EXPECT_TRUE(r.program.has_value()) << format_diagnostics("test.kiln", text, r.diagnostics);
  return r.program ? *r.program : ir::Program{};
}

// The statement text of routine `routine`, statement `index`, as printed.
std::string stmt(const ir::Program& p, size_t routine, size_t index) {
  if (routine >= p.routines.size() || index >= p.routines[routine].statements.size()) return "<none>";
  return ir::print_statement(p, p.routines[routine].statements[index]);
}

TEST(Parser, EmptyAndCommentOnlyFiles) {
  for (const char* text : {"", "\n\n", "# nothing\n   # at all", "  \t \r\n"}) {
    ir::Program p = parse_ok(text);
    EXPECT_TRUE(p.nodes.empty());
    EXPECT_TRUE(p.routines.empty());
    EXPECT_EQ(p.file, "test.kiln");
  }
}

TEST(Parser, Declarations) {
  ir::Program p = parse_ok(
      "input  a : f32[64, 128]   # a matrix\n"
      "output b : f64[3]\n"
      "param  c : i32[2, 3, 4] = -7\n"
      "tensor d : f32 = 0.25\n"
      "const  e : f32[] = 1e-5\n"
      "param  f : f32[8] = uniform(-0.1, 0.1)\n"
      "param  g : f64[1] = normal(0, 2.5E+2)\n"
      "tensor h : i32[5]\n"
      "const  k : i32 = 3\n");
  ASSERT_EQ(p.nodes.size(), 9u);
  const ir::TensorNode& a = p.nodes[0];
  EXPECT_EQ(a.id, 0);
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.role, Role::kInput);
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(a.loc.line, 1);
  EXPECT_EQ(a.loc.column, 8);
  EXPECT_EQ(a.init.kind, ir::Init::Kind::kNone);
  EXPECT_EQ(p.nodes[1].role, Role::kOutput);
  EXPECT_EQ(p.nodes[1].dtype, DType::kF64);
  EXPECT_EQ(p.nodes[2].role, Role::kParam);
  EXPECT_EQ(p.nodes[2].dtype, DType::kI32);
  EXPECT_EQ(p.nodes[2].init.kind, ir::Init::Kind::kValue);
  EXPECT_EQ(p.nodes[2].init.a, -7);
  EXPECT_TRUE(p.nodes[3].is_scalar());
  EXPECT_EQ(p.nodes[3].role, Role::kTensor);
  EXPECT_EQ(p.nodes[3].init.a, 0.25);
  EXPECT_TRUE(p.nodes[4].is_scalar());
  EXPECT_EQ(p.nodes[4].role, Role::kConst);
  EXPECT_EQ(p.nodes[4].init.a, 1e-5);
  EXPECT_EQ(p.nodes[5].init.kind, ir::Init::Kind::kUniform);
  EXPECT_EQ(p.nodes[5].init.a, -0.1);
  EXPECT_EQ(p.nodes[5].init.b, 0.1);
  EXPECT_EQ(p.nodes[6].init.kind, ir::Init::Kind::kNormal);
  EXPECT_EQ(p.nodes[6].init.a, 0);
  EXPECT_EQ(p.nodes[6].init.b, 250);
  EXPECT_EQ(p.nodes[7].init.kind, ir::Init::Kind::kNone);
  EXPECT_EQ(p.nodes[8].init.a, 3);
}

// Language version 2: an INIT or a const's value may be a constant expression of numbers, earlier
// consts and + - * /, evaluated when parsed (in double, then as a number of the declared type).
TEST(Parser, ConstantExpressions) {
  ir::Program p = parse_ok(
      "const  invb : f32 = 1 / 64\n"
      "const  two : f64 = (invb + invb) * 64\n"
      "const  neg : i32 = -(3 * 4) + 2\n"
      "param  w : f32[3] = uniform(-1 / 2, two / 4)\n"
      "param  v : f32[2] = normal(0, 1 / two) @hosted\n");
  ASSERT_EQ(p.nodes.size(), 5u);
  EXPECT_EQ(p.nodes[0].init.a, 1.0 / 64);
  EXPECT_EQ(p.nodes[1].init.a, 2);
  EXPECT_EQ(p.nodes[2].init.a, -10);
  EXPECT_EQ(p.nodes[3].init.kind, ir::Init::Kind::kUniform);
  EXPECT_EQ(p.nodes[3].init.a, -0.5);
  EXPECT_EQ(p.nodes[3].init.b, 0.5);
  EXPECT_EQ(p.nodes[4].init.b, 0.5);
  EXPECT_EQ(p.nodes[4].memory, ir::MemoryMode::kHosted);
  // Printed as their values.
  EXPECT_NE(ir::print_program(p).find("const  invb : f32 = 0.015625"), std::string::npos) << ir::print_program(p);
}

TEST(Parser, TopLevelStatementsFormMainWhichComesFirst) {
  ir::Program p = parse_ok(
      "input x : f32[4]\n"
      "output y : f32[4]\n"
      "routine r {\n"
      "  y[i] = x[i] * 2\n"
      "}\n"
      "y[i] = x[i]\n"
      "routine empty {\n"
      "}\n"
      "y[i] += 1\n");
  ASSERT_EQ(p.routines.size(), 3u);
  EXPECT_EQ(p.routines[0].name, "main");
  EXPECT_EQ(p.routines[1].name, "r");
  EXPECT_EQ(p.routines[2].name, "empty");
  ASSERT_EQ(p.routines[0].statements.size(), 2u);
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = x[i]");
  EXPECT_EQ(stmt(p, 0, 1), "y[i] += 1.0");
  EXPECT_EQ(p.routines[0].statements[1].loc.line, 9);
  EXPECT_EQ(p.routines[0].statements[1].loc.column, 1);
  EXPECT_EQ(stmt(p, 1, 0), "y[i] = x[i] * 2.0");
  EXPECT_EQ(p.routines[1].statements[0].loc.line, 4);
  EXPECT_EQ(p.routines[1].statements[0].loc.column, 3);
  EXPECT_TRUE(p.routines[2].statements.empty());
}

TEST(Parser, RoutineBlockForms) {
  ir::Program p = parse_ok(
      "output y : f32\n"
      "routine one { y = 1 }\n"
      "routine two {\n\n  # comment\n  y = 2\n\n  y *= 3 }\n"
      "routine main {\n  y -= 1\n}\n");
  ASSERT_EQ(p.routines.size(), 3u);
  EXPECT_EQ(stmt(p, 0, 0), "y = 1.0");
  EXPECT_EQ(stmt(p, 1, 0), "y = 2.0");
  EXPECT_EQ(stmt(p, 1, 1), "y *= 3.0");
  EXPECT_EQ(p.routines[2].name, "main");  // a main block (without top-level statements) is fine
  EXPECT_EQ(stmt(p, 2, 0), "y -= 1.0");
}

TEST(Parser, AccumulationsAndReductions) {
  ir::Program p = parse_ok(
      "input x : f32[4, 5]\n"
      "output y : f32[4]\n"
      "y[i] = sum(x[i, j])\n"
      "y[i] += prod(x[i, j])\n"
      "y[i] -= max(x[i, j])\n"
      "y[i] *= min(x[i, j])\n"
      "y[i] = mean(x[i, j] * 2)\n"
      "y[i] = max(x[i, 0], x[i, 1])\n"
      "y[i] = min(x[i, 0], 0)\n");
  const auto& s = p.routines[0].statements;
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0].reduce, ir::Reduce::kSum);
  EXPECT_EQ(s[0].accum, ir::Accum::kAssign);
  EXPECT_EQ(s[1].reduce, ir::Reduce::kProd);
  EXPECT_EQ(s[1].accum, ir::Accum::kAdd);
  EXPECT_EQ(s[2].reduce, ir::Reduce::kMax);
  EXPECT_EQ(s[2].accum, ir::Accum::kSub);
  EXPECT_EQ(s[3].reduce, ir::Reduce::kMin);
  EXPECT_EQ(s[3].accum, ir::Accum::kMul);
  EXPECT_EQ(s[4].reduce, ir::Reduce::kMean);
  EXPECT_EQ(s[5].reduce, ir::Reduce::kNone);  // two arguments: elementwise
  EXPECT_EQ(s[5].rhs->op, Op::kMax);
  EXPECT_EQ(s[6].rhs->op, Op::kMin);
  EXPECT_EQ(stmt(p, 0, 4), "y[i] = mean(x[i, j] * 2.0)");
}

TEST(Parser, EveryFunctionAndCast) {
  ir::Program p = parse_ok(
      "input x : f32[3]\n"
      "output y : f64[3]\n"
      "y[i] = exp(x[i]) + log(x[i]) + sqrt(x[i]) + rsqrt(x[i]) + tanh(x[i]) + sigmoid(x[i])"
      " + relu(x[i]) + abs(x[i]) + sin(x[i]) + cos(x[i]) + floor(x[i]) + ceil(x[i])"
      " + pow(x[i], 2) + select(x[i] > 0, 1, -1) + f32(i) + f64(x[i]) + i32(x[i])\n");
  EXPECT_EQ(stmt(p, 0, 0),
            "y[i] = exp(x[i]) + log(x[i]) + sqrt(x[i]) + rsqrt(x[i]) + tanh(x[i]) + sigmoid(x[i]) "
            "+ relu(x[i]) + abs(x[i]) + sin(x[i]) + cos(x[i]) + floor(x[i]) + ceil(x[i]) + "
            "pow(x[i], 2.0) + select(x[i] > 0.0, 1.0, -1.0) + f32(i) + f64(x[i]) + i32(x[i])");
  EXPECT_EQ(p.routines[0].statements[0].rhs->type, DType::kF64);
}

TEST(Parser, OperatorsPrecedenceAndComparisons) {
  ir::Program p = parse_ok(
      "input a : f32[3]\n"
      "input b : f32[3]\n"
      "output y : f32[3]\n"
      "y[i] = a[i] + b[i] * 2 - -a[i] / (b[i] - 1)\n"
      "y[i] = a[i] < b[i] == (a[i] >= 1) != (b[i] <= 2)\n"
      "y[i] = -(a[i] + 1) > - - b[i]\n"
      "y[i] = - 2 * a[i]\n");
  const Expr& e = *p.routines[0].statements[0].rhs;
  EXPECT_EQ(e.op, Op::kSub);
  EXPECT_EQ(e.args[0]->op, Op::kAdd);
  EXPECT_EQ(e.args[0]->args[1]->op, Op::kMul);
  EXPECT_EQ(e.args[1]->op, Op::kDiv);
  EXPECT_EQ(e.args[1]->args[0]->op, Op::kNeg);
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = a[i] + b[i] * 2.0 - -a[i] / (b[i] - 1.0)");
  EXPECT_EQ(stmt(p, 0, 1), "y[i] = a[i] < b[i] == (a[i] >= 1.0) != (b[i] <= 2.0)");
  EXPECT_EQ(stmt(p, 0, 2), "y[i] = -(a[i] + 1.0) > -(-b[i])");
  // A negated literal is a literal.
  const Expr& m = *p.routines[0].statements[3].rhs;
  EXPECT_EQ(m.args[0]->kind, Expr::Kind::kLiteral);
  EXPECT_EQ(m.args[0]->literal, -2);
}

TEST(Parser, IndicesConstsScalarsAndMerges) {
  ir::Program p = parse_ok(
      "input x : f32[8]\n"
      "param g : f32[8]\n"
      "param s : f32\n"
      "const lr : f32 = 0.5\n"
      "const two : i32 = 2\n"
      "output y : f32[4]\n"
      "y[i] = x[two*i + 1] * lr + s + s[] + i\n"
      "g[i] += g.merge[i]\n"
      "s += s.merge + s.merge[]\n"
      "y[i] = sum(x[2*i + k]) where k < two\n"
      "y[i] = sum(x[i + k + j]) where k < 2, j < 3\n");
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = x[2*i + 1] * lr + s + s + i");
  const Expr& e = *p.routines[0].statements[0].rhs;
  EXPECT_EQ(e.args[1]->kind, Expr::Kind::kIndex);
  EXPECT_EQ(e.args[1]->type, DType::kI32);
  EXPECT_EQ(e.type, DType::kF32);
  EXPECT_EQ(stmt(p, 0, 1), "g[i] += g.merge[i]");
  EXPECT_EQ(p.routines[0].statements[1].rhs->kind, Expr::Kind::kMerge);
  EXPECT_EQ(stmt(p, 0, 2), "s += s.merge + s.merge");
  EXPECT_EQ(stmt(p, 0, 3), "y[i] = sum(x[2*i + k]) where k < 2");
  EXPECT_EQ(stmt(p, 0, 4), "y[i] = sum(x[i + k + j]) where k < 2, j < 3");
  EXPECT_EQ(p.routines[0].statements[4].indices[2].extent, 3);
}

TEST(Parser, StatementsContinueInsideBrackets) {
  ir::Program p = parse_ok(
      "input a : f32[\n  4,\n  5\n]\n"
      "output y : f32[4]\n"
      "y[i] = sum(a[i,\n"
      "             j] *\n"
      "\n"
      "           2)   # a comment inside\n"
      "y[i] = (a[i, 0]\n"
      "  + 1)\n");
  ASSERT_EQ(p.routines[0].statements.size(), 2u);
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = sum(a[i, j] * 2.0)");
  EXPECT_EQ(stmt(p, 0, 1), "y[i] = a[i, 0] + 1.0");
  EXPECT_EQ(p.routines[0].statements[1].loc.line, 10);
}

TEST(Parser, NamesThatAreNotKeywords) {
  // Function, dtype and reduction names are not reserved.
  ir::Program p = parse_ok(
      "input exp : f32[3]\n"
      "input sum : f32\n"
      "output f32 : f32[3]\n"
      "f32[merge] = exp(exp[merge]) + sum\n");
  EXPECT_EQ(stmt(p, 0, 0), "f32[merge] = exp(exp[merge]) + sum");
}

TEST(Parser, ParseProgramReturnsTheProgramOrAllDiagnostics) {
  Result<ir::Program> ok = parse_program("output y : f32\ny = 1\n", "a.kiln");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->file, "a.kiln");
  std::string text = "output y : f32\ny = $\nz = 1\n";
  Result<ir::Program> bad = parse_program(text, "b.kiln");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "b.kiln:2:5: error: unexpected character '$'; remove it\n"
            "y = $\n"
            "    ^\n"
            "b.kiln:3:1: error: unknown tensor 'z'; declare it before assigning to it, e.g. `output z : f32[N]`\n"
            "z = 1\n"
            "^");
}

}  // namespace
}  // namespace kiln::lang
