// The printer: numbers, declarations, parentheses, where bounds, routine layout. (That parsing
// the printed text gives the program back is tested in tests/lang/roundtrip_test.cc.)
#include "kiln/ir/printer.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstring>
#include <functional>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "kiln/ir/builder.h"

namespace kiln::ir {
namespace {

TEST(FormatNumber, IntegersAndFloats) {
  EXPECT_EQ(format_number(3, false), "3");
  EXPECT_EQ(format_number(-3, false), "-3");
  EXPECT_EQ(format_number(0, false), "0");
  EXPECT_EQ(format_number(2000000000, false), "2000000000");
  EXPECT_EQ(format_number(3, true), "3.0");
  EXPECT_EQ(format_number(0.1, false), "0.1");
  EXPECT_EQ(format_number(0.1, true), "0.1");
  EXPECT_EQ(format_number(-0.0, true), "-0.0");
  EXPECT_EQ(format_number(1e20, true), "1e+20");
  EXPECT_EQ(format_number(1e-7, true), "1e-07");
  EXPECT_EQ(format_number(2.5e-300, true), "2.5e-300");
  EXPECT_EQ(format_number(std::numeric_limits<double>::infinity(), true), "inf");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity(), true), "-inf");
  EXPECT_EQ(format_number(std::nan(""), true), "nan");
}

TEST(FormatNumber, RoundTripsExactly) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 20000; ++n) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    for (bool as_float : {false, true}) {
      std::string s = format_number(v, as_float);
      double back = 0;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), back);
      ASSERT_EQ(ec, std::errc()) << s;
      ASSERT_EQ(end, s.data() + s.size()) << s;
      ASSERT_EQ(std::memcmp(&back, &v, sizeof v), 0) << s;
      if (as_float) {
        ASSERT_NE(s.find_first_of(".e"), std::string::npos) << s;
      }
    }
  }
}

TEST(PrintDeclaration, Forms) {
  TensorNode n;
  n.name = "x";
  n.role = Role::kInput;
  n.dims = {4, 8};
  EXPECT_EQ(print_declaration(n), "input  x : f32[4, 8]");
  n.role = Role::kConst;
  n.dims = {};
  n.dtype = DType::kF64;
  n.init = value_init(0.1);
  EXPECT_EQ(print_declaration(n), "const  x : f64 = 0.1");
  n.role = Role::kParam;
  n.dtype = DType::kI32;
  n.dims = {3};
  n.init = normal_init(-1, 0.5);
  EXPECT_EQ(print_declaration(n), "param  x : i32[3] = normal(-1, 0.5)");
  n.role = Role::kTensor;
  n.init = uniform_init(-1e-3, 2);
  EXPECT_EQ(print_declaration(n), "tensor x : i32[3] = uniform(-0.001, 2)");
  n.role = Role::kOutput;
  n.init = {};
  EXPECT_EQ(print_declaration(n), "output x : i32[3]");
}

// Prints the right side of `y[i] = rhs` over a, b, c : f32[3] and scalar s.
std::string rhs_text(const std::function<Value(Tensor, Tensor, Tensor, Index)>& make) {
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kF32, {3});
  Tensor bb = b.input("b", DType::kF32, {3});
  Tensor c = b.input("c", DType::kF32, {3});
  Tensor y = b.output("y", DType::kF32, {3});
  Index i("i");
  b.main().assign(y(i), make(a, bb, c, i));
  Result<Program> p = b.build();
  if (!p.ok()) return p.status().to_string();
  std::string s = print_statement(*p, p->routines[0].statements[0]);
  return s.substr(std::string("y[i] = ").size());
}

TEST(PrintExpr, MinimalParentheses) {
  using T = Tensor;
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return (a(i) + b(i)) * c(i); }), "(a[i] + b[i]) * c[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) + b(i) * c(i); }), "a[i] + b[i] * c[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) - b(i) - c(i); }), "a[i] - b[i] - c[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) - (b(i) - c(i)); }), "a[i] - (b[i] - c[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) + (b(i) + c(i)); }), "a[i] + (b[i] + c[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) / (b(i) * c(i)); }), "a[i] / (b[i] * c[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return -(a(i) + b(i)); }), "-(a[i] + b[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return -a(i) * b(i); }), "-a[i] * b[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return -(a(i) * b(i)); }), "-(a[i] * b[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return -(-a(i)); }), "-(-a[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) * -2; }), "a[i] * -2.0");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(i) - -2; }), "a[i] - -2.0");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return -(-Value(2)) * a(i); }), "2.0 * a[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return lt(a(i) + 1, b(i)) * c(i); }), "(a[i] + 1.0 < b[i]) * c[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return eq(lt(a(i), b(i)), c(i)); }), "a[i] < b[i] == c[i]");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return eq(a(i), lt(b(i), c(i))); }), "a[i] == (b[i] < c[i])");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return exp(a(i) + b(i)) * max(a(i), c(i) - 1); }),
            "exp(a[i] + b[i]) * max(a[i], c[i] - 1.0)");
  EXPECT_EQ(rhs_text([](T a, T b, T c, Index i) { return a(2 - i) + b(-i) + c(-2 * i + 2) + a(0) + b(i - 1); }),
            "a[-i + 2] + b[-i] + c[-2*i + 2] + a[0] + b[i - 1]");
}

TEST(PrintProgram, MainAndRoutines) {
  ProgramBuilder b;
  Tensor y = b.output("y", DType::kF32, {2});
  Index i("i");
  b.routine("first").assign(y(i), 1);
  b.routine("main");  // empty: printed as a block so that it survives a round trip
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(print_program(*p),
            "output y : f32[2]\n"
            "\n"
            "routine main {\n"
            "}\n"
            "\n"
            "routine first {\n"
            "  y[i] = 1.0\n"
            "}\n");
  // A main that is not the first routine prints as a block too.
  Program q = *p;
  q.routines[0].statements = q.routines[1].statements;
  std::swap(q.routines[0], q.routines[1]);
  EXPECT_NE(print_program(q).find("routine main {\n  y[i] = 1.0\n}\n"), std::string::npos);
  EXPECT_EQ(print_program(Program{}), "");
}

TEST(PrintProgram, NeverFailsOnMalformedPrograms) {
  Program p;
  p.nodes.resize(1);
  p.nodes[0].name = "x";
  Routine r;
  r.name = "r";
  Assignment s;
  s.target = 5;
  s.target_indices = {3};
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kOp;
  e->op = Op::kAdd;
  auto t = std::make_shared<Expr>();
  t->kind = Expr::Kind::kTensor;
  t->node = -2;
  t->subscripts = {Affine{{{7, 1}}, 0, -1}};
  e->args = {t, nullptr};
  s.rhs = e;
  r.statements.push_back(s);
  Assignment empty;
  r.statements.push_back(empty);
  p.routines.push_back(r);
  EXPECT_EQ(print_program(p),
            "tensor x : f32\n"
            "\n"
            "routine r {\n"
            "  <node 5>[<index 3>] = <node -2>[<index 7>] + <missing>\n"
            "  <node -1> = <missing>\n"
            "}\n");
}

}  // namespace
}  // namespace kiln::ir
