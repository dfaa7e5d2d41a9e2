// The parser: every construct of the language.
#include "kiln/lang/parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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
      " + relu(x[i]) + abs(x[i]) + sin(x[i]) + cos(x[i]) + erf(x[i]) + floor(x[i]) + ceil(x[i])"
      " + pow(x[i], 2) + select(x[i] > 0, 1, -1) + f32(i) + f64(x[i]) + i32(x[i])\n");
  EXPECT_EQ(stmt(p, 0, 0),
            "y[i] = exp(x[i]) + log(x[i]) + sqrt(x[i]) + rsqrt(x[i]) + tanh(x[i]) + sigmoid(x[i]) "
            "+ relu(x[i]) + abs(x[i]) + sin(x[i]) + cos(x[i]) + erf(x[i]) + floor(x[i]) + ceil(x[i]) + "
            "pow(x[i], 2.0) + select(x[i] > 0.0, 1.0, -1.0) + f32(i) + f64(x[i]) + i32(x[i])");
  EXPECT_EQ(p.routines[0].statements[0].rhs->type, DType::kF64);
}

// erf, as exact GELU writes it: the argument's float type, f32 for an i32 argument.
TEST(Parser, Erf) {
  ir::Program p = parse_ok(
      "input x : f32[3]\n"
      "input d : f64[3]\n"
      "output y : f32[3]\n"
      "output z : f64[3]\n"
      "output w : f32[3]\n"
      "y[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)))\n"
      "z[i] = erf(d[i])\n"
      "w[i] = erf(i)\n");
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)))");
  const ir::Expr& erf_f64 = *p.routines[0].statements[1].rhs;
  EXPECT_EQ(erf_f64.op, Op::kErf);
  EXPECT_EQ(erf_f64.type, DType::kF64);
  EXPECT_EQ(p.routines[0].statements[2].rhs->type, DType::kF32);
}

// `inf` and `nan` are predeclared float literals: weak like any number literal, in statements and
// in constant expressions, and hidden by a declaration or an index of the same name.
TEST(Parser, InfAndNanLiterals) {
  ir::Program p = parse_ok(
      "const neg : f32 = -inf\n"
      "const big : f64 = inf * 2\n"
      "const bad : f32 = nan\n"
      "param w : f32[2] = -inf\n"
      "input x : f32[4]\n"
      "input m : i32[4]\n"
      "input d : f64[4]\n"
      "output y : f32[4]\n"
      "output z : f64[4]\n"
      "y[i] = select(m[i], x[i], -inf)\n"
      "z[i] = max(d[i], nan) + inf\n");
  ASSERT_EQ(p.nodes.size(), 9u);
  EXPECT_EQ(p.nodes[0].init.a, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(p.nodes[1].init.a, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(p.nodes[2].init.a));
  EXPECT_EQ(p.nodes[3].init.a, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = select(m[i], x[i], -inf)");
  EXPECT_EQ(stmt(p, 0, 1), "z[i] = max(d[i], nan) + inf");
  // Weak: the literal takes the other operand's float type.
  const ir::Expr& select = *p.routines[0].statements[0].rhs;
  ASSERT_EQ(select.args.size(), 3u);
  EXPECT_EQ(select.args[2]->kind, Expr::Kind::kLiteral);
  EXPECT_EQ(select.args[2]->type, DType::kF32);
  EXPECT_EQ(select.args[2]->literal, -std::numeric_limits<double>::infinity());
  const ir::Expr& sum = *p.routines[0].statements[1].rhs;
  EXPECT_EQ(sum.args[1]->type, DType::kF64);
  EXPECT_TRUE(std::isnan(sum.args[0]->args[1]->literal));
  EXPECT_EQ(sum.args[0]->args[1]->type, DType::kF64);
  // Printed back as written.
  const std::string printed = ir::print_program(p);
  EXPECT_NE(printed.find("const  neg : f32 = -inf\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("const  bad : f32 = nan\n"), std::string::npos) << printed;
}

// A program of version 1 that names a tensor, a const or an index `inf` or `nan` keeps its
// meaning: the declaration (or index) hides the literal.
TEST(Parser, DeclarationsNamedInfOrNanHideTheLiterals) {
  ir::Program p = parse_ok(
      "input inf : f32[4]\n"
      "const nan : f32 = 2\n"
      "const two : f32 = nan\n"
      "output y : f32[4]\n"
      "y[i] = inf[i] * nan + two\n");
  EXPECT_EQ(p.nodes[2].init.a, 2);
  EXPECT_EQ(stmt(p, 0, 0), "y[i] = inf[i] * nan + two");
  ir::Program q = parse_ok(
      "output y : f32[4]\n"
      "y[nan] = f32(nan) + inf\n");
  EXPECT_EQ(stmt(q, 0, 0), "y[nan] = f32(nan) + inf");
  EXPECT_EQ(q.routines[0].statements[0].rhs->args[0]->args[0]->kind, Expr::Kind::kIndex);
}

// An integer const stands for its value in a dimension, alone or in an affine expression (and,
// as before, in subscripts and bounds).
TEST(Parser, ConstsAsDimensions) {
  ir::Program p = parse_ok(
      "size B\n"
      "const D : i32 = 16\n"
      "const H : i32 = D / 4\n"
      "input x : f32[B, D]\n"
      "param w : f32[D, D + H]\n"
      "const mask : f32[H, H] = -inf\n"
      "output y : f32[B, D + H]\n"
      "tensor t : f32[B + 2*D - 1]\n"
      "y[b, j] = sum(x[b, k] * w[k, j]) where j < D + H\n"
      "t[i] = 1\n");
  ASSERT_EQ(p.nodes.size(), 7u);
  EXPECT_EQ(p.nodes[2].dims, (std::vector<int64_t>{1, 16}));
  ASSERT_EQ(p.nodes[2].sized_dims.size(), 2u);
  EXPECT_EQ(p.nodes[2].sized_dims[1], ir::SizeExpr::constant(16));
  EXPECT_EQ(p.nodes[3].dims, (std::vector<int64_t>{16, 20}));
  EXPECT_FALSE(p.nodes[3].is_sized());
  EXPECT_EQ(p.nodes[4].dims, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(ir::dims_text(p.nodes[5], p.sizes), "[B, 20]");
  EXPECT_EQ(ir::dims_text(p.nodes[6], p.sizes), "[B + 31]");
  // Printed as their values, like consts in subscripts and bounds.
  const std::string printed = ir::print_program(p);
  EXPECT_NE(printed.find("param  w : f32[16, 20]"), std::string::npos) << printed;
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
