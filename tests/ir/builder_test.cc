// ProgramBuilder: programs built in C++, checked like parsed ones.
#include "kiln/ir/builder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/printer.h"

namespace kiln::ir {
namespace {

TEST(Builder, MatmulBiasRelu) {
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kF32, {64, 128});
  Tensor w = b.input("b", DType::kF32, {128, 32});
  Tensor bias = b.param("bias", DType::kF32, {32}, value_init(0));
  Tensor y = b.output("y", DType::kF32, {64, 32});
  Tensor c = b.tensor("c", DType::kF32, {64, 32});
  Index i("i"), j("j"), k("k");
  b.main()
      .assign(c(i, j), sum(a(i, k) * w(k, j)))
      .assign(y(i, j), relu(c(i, j) + bias(j)));
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->file, "<builder>");
  ASSERT_EQ(p->routines.size(), 1u);
  EXPECT_EQ(p->routines[0].name, "main");
  EXPECT_EQ(print_program(*p),
            "input  a : f32[64, 128]\n"
            "input  b : f32[128, 32]\n"
            "param  bias : f32[32] = 0\n"
            "output y : f32[64, 32]\n"
            "tensor c : f32[64, 32]\n"
            "\n"
            "c[i, j] = sum(a[i, k] * b[k, j])\n"
            "y[i, j] = relu(c[i, j] + bias[j])\n");
  const Assignment& s = p->routines[0].statements[0];
  EXPECT_EQ(s.reduce, Reduce::kSum);
  EXPECT_EQ(s.indices.size(), 3u);
  EXPECT_EQ(s.indices[2].extent, 128);
}

// Language version 3: cast() reaches every type, a C++ bool is the literal `true` / `false`, and
// the bitwise operators and shifts build the language's.
TEST(Builder, ElementTypesCastsBoolLiteralsAndBitwiseOperators) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4});
  Tensor n = b.input("n", DType::kI16, {4});
  std::vector<Tensor> outputs;
  for (DType t : kAllDTypes) outputs.push_back(b.output("y_" + std::string(dtype_name(t)), t, {4}));
  Tensor z = b.output("z", DType::kBool, {4});
  Index i("i");
  for (size_t t = 0; t < std::size(kAllDTypes); ++t) b.main().assign(outputs[t](i), cast(x(i), kAllDTypes[t]));
  b.main()
      .assign(z(i), Value(true) ^ (lt(x(i), 0) | false))
      .assign(outputs[3](i), (~n(i) & 7) << 1 >> n(i));
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<Assignment>& st = p->routines[0].statements;
  ASSERT_EQ(st.size(), std::size(kAllDTypes) + 2);
  for (size_t t = 0; t < std::size(kAllDTypes); ++t) {
    EXPECT_EQ(st[t].rhs->op, cast_op(kAllDTypes[t])) << dtype_name(kAllDTypes[t]);
    EXPECT_EQ(st[t].rhs->type, kAllDTypes[t]);
  }
  const Expr& literal = *st[std::size(kAllDTypes)].rhs->args[0];
  EXPECT_EQ(literal.kind, Expr::Kind::kLiteral);
  EXPECT_EQ(literal.type, DType::kBool);
  EXPECT_EQ(literal.literal, 1);
  EXPECT_EQ(print_statement(*p, st[std::size(kAllDTypes)]), "z[i] = true ^ (x[i] < 0.0 | false)");
  EXPECT_EQ(print_statement(*p, st.back()), "y_i16[i] = (~n[i] & 7) << 1 >> n[i]");
  EXPECT_EQ(st.back().rhs->type, DType::kI16);
}

TEST(Builder, CallsKeepTheirPlaceAmongStatements) {
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kF32, {4, 8});
  Tensor w = b.input("w", DType::kF32, {8, 3});
  Tensor c = b.tensor("c", DType::kF32, {4, 3});
  Tensor y = b.output("y", DType::kF32, {4, 3});
  Index i("i"), j("j");
  b.routine("step")
      .call("gemm", {a, w}, {{"alpha", 2}}, {c})
      .assign(y(i, j), relu(c(i, j)))
      .call("sort", {c}, {{"descending", 1}}, {y});
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(print_program(*p),
            "input  a : f32[4, 8]\n"
            "input  w : f32[8, 3]\n"
            "tensor c : f32[4, 3]\n"
            "output y : f32[4, 3]\n"
            "\n"
            "routine step {\n"
            "  call gemm(a, w, alpha=2) -> c\n"
            "  y[i, j] = relu(c[i, j])\n"
            "  call sort(c, descending=1) -> y\n"
            "}\n");

  // The language's checks, reported like a statement's.
  ProgramBuilder bad;
  Tensor x = bad.input("x", DType::kF32, {4});
  Tensor out = bad.output("out", DType::kI32, {4});
  bad.main().call("sort", {x}, {{"reverse", 1}}, {out});
  Result<Program> refused = bad.build();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("routine 'main', call 1: sort: unknown attribute 'reverse'"), std::string::npos)
      << refused.status();
}

TEST(Builder, AffineSubscriptsBoundsAndRoutines) {
  ProgramBuilder b("conv");
  Tensor s = b.input("s", DType::kF32, {20});
  Tensor f = b.input("f", DType::kF32, {4});
  Tensor d = b.output("d", DType::kF32, {9});
  Tensor p = b.output("p", DType::kF32, {8});
  Tensor w = b.param("w", DType::kF32, {8}, uniform_init(-1, 1));
  Tensor out = b.output("out", DType::kF32);
  Tensor lr = b.constant("lr", DType::kF32, 0.5);
  Index t("t"), k("k"), i("i"), dx("dx");
  b.routine("step").assign(w(i), w(i) * lr + i * 2);
  b.main().assign(d(t), sum(s(2 * t + k) * f(k)));
  b.main().assign(p(i), max(s(2 * i + dx)), {dx < 2});
  b.routine("total").assign(out, sum(w(i))).add(out, w.merge(0));
  Result<Program> program = b.build();
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->routines.size(), 3u);
  EXPECT_EQ(program->routines[0].name, "main");  // main first, as in the language
  EXPECT_EQ(program->routines[1].name, "step");
  EXPECT_EQ(program->routines[2].name, "total");
  EXPECT_EQ(print_program(*program),
            "input  s : f32[20]\n"
            "input  f : f32[4]\n"
            "output d : f32[9]\n"
            "output p : f32[8]\n"
            "param  w : f32[8] = uniform(-1, 1)\n"
            "output out : f32\n"
            "const  lr : f32 = 0.5\n"
            "\n"
            "d[t] = sum(s[2*t + k] * f[k])\n"
            "p[i] = max(s[2*i + dx]) where dx < 2\n"
            "\n"
            "routine step {\n"
            "  w[i] = w[i] * lr + i * 2\n"
            "}\n"
            "\n"
            "routine total {\n"
            "  out = sum(w[i])\n"
            "  out += w.merge[0]\n"
            "}\n");
  // i * 2 is an i32 product of the index and an integer literal, added to f32.
  const Expr& rhs = *program->routines[1].statements[0].rhs;
  EXPECT_EQ(rhs.type, DType::kF32);
  EXPECT_EQ(rhs.args[1]->type, DType::kI32);
}

TEST(Builder, LiteralKinds) {
  ProgramBuilder b;
  Tensor y = b.output("y", DType::kF64, {3});
  Tensor n = b.output("n", DType::kI32, {3});
  Index i("i");
  b.main().assign(y(i), y(i) * 2 + 0.25).assign(n(i), i / 2 + 1).assign(n(i), n(i) * 1.5);
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& st = p->routines[0].statements;
  EXPECT_EQ(st[0].rhs->type, DType::kF64);
  EXPECT_EQ(st[0].rhs->args[1]->type, DType::kF64);
  EXPECT_EQ(st[1].rhs->type, DType::kI32);
  EXPECT_EQ(st[2].rhs->type, DType::kF32);
  EXPECT_EQ(print_statement(*p, st[0]), "y[i] = y[i] * 2.0 + 0.25");
  EXPECT_EQ(print_statement(*p, st[1]), "n[i] = i / 2 + 1");
  EXPECT_EQ(print_statement(*p, st[2]), "n[i] = n[i] * 1.5");
}

TEST(Builder, FunctionsAndComparisons) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {3});
  Tensor y = b.output("y", DType::kF32, {3});
  Index i("i");
  b.main().assign(y(i), select(lt(x(i), 0), -x(i), pow(x(i), 2)) + exp(x(i)) - log(x(i)) +
                            sqrt(x(i)) * rsqrt(x(i)) / tanh(x(i)) + sigmoid(x(i)) + abs(x(i)) +
                            sin(x(i)) + cos(x(i)) + floor(x(i)) + ceil(x(i)) + max(x(i), 1.0) +
                            min(x(i), 2) + f64(x(i)) + i32(x(i)) + f32(i) + cast(x(i), DType::kI32) +
                            le(x(i), 1) + gt(x(i), 1) + ge(x(i), 1) + eq(x(i), 1) + ne(x(i), 1));
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(print_statement(*p, p->routines[0].statements[0]),
            "y[i] = select(x[i] < 0.0, -x[i], pow(x[i], 2.0)) + exp(x[i]) - log(x[i]) + "
            "sqrt(x[i]) * rsqrt(x[i]) / tanh(x[i]) + sigmoid(x[i]) + abs(x[i]) + sin(x[i]) + "
            "cos(x[i]) + floor(x[i]) + ceil(x[i]) + max(x[i], 1.0) + min(x[i], 2.0) + f64(x[i]) + "
            "i32(x[i]) + f32(i) + i32(x[i]) + (x[i] <= 1.0) + (x[i] > 1.0) + (x[i] >= 1.0) + "
            "(x[i] == 1.0) + (x[i] != 1.0)");
  EXPECT_EQ(p->routines[0].statements[0].rhs->type, DType::kF64);
}

TEST(Builder, ReportsEveryProblemWithItsStatement) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 5});
  Tensor y = b.output("y", DType::kF32, {4});
  b.input("x", DType::kF32, {2});
  b.output("bad name", DType::kF32);
  b.output("where", DType::kF32);
  b.param("p", DType::kF32, {0}, normal_init(0, -1));
  Index i("i"), j("j"), k("k");
  b.main()
      .assign(y(i), x(i, j))
      .assign(y(i), sum(x(i, j)) * x(i, j))
      .assign(x(i, j), 1)
      .assign(y(i), x(i, i + k))
      .assign(y(i), y(i * j), {i + 1 < 3})
      .assign(1, y(i));
  b.routine("also bad");
  Result<Program> p = b.build();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = p.status().message();
  for (const char* fragment : {
           "<builder>: 15 errors",
           "declaration of 'x': 'x' is already declared",
           "declaration of 'bad name': 'bad name' is not a valid name",
           "declaration of 'where': 'where' is a keyword",
           "declaration of 'p': dimension sizes must be positive integers",
           "declaration of 'p': normal(MEAN, STD) needs STD >= 0",
           "routine name 'also bad' is not a valid name",
           "routine 'main', statement 1: index 'j' is not on the left side; reduce over it with sum(...)",
           "routine 'main', statement 2: sum(...) reduces over no index",
           "routine 'main', statement 3: cannot assign to input 'x'",
           "routine 'main', statement 4: the range of index 'k' is unknown",
           "routine 'main', statement 5: a where bound must name one index",
           "routine 'main', statement 5: subscript is not affine",
           "routine 'main', statement 6: the target must be a tensor",
       }) {
    EXPECT_NE(m.find(fragment), std::string::npos) << fragment << "\n" << m;
  }
}

TEST(Builder, RoutineReferencesStayValid) {
  ProgramBuilder b;
  Tensor y = b.output("y", DType::kF32, {2});
  Index i("i");
  RoutineBuilder& first = b.routine("a");
  for (int r = 0; r < 50; ++r) b.routine("r" + std::to_string(r));
  first.assign(y(i), 1);
  EXPECT_EQ(&b.routine("a"), &first);
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->routines.size(), 51u);
  EXPECT_EQ(p->routines[0].statements.size(), 1u);
}

}  // namespace
}  // namespace kiln::ir
