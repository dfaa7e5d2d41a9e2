// Kernel grouping (src/loop/fusion.h): collapsing of small leading dims, the fusion legality check,
// and the accesses it decides on (src/loop/access.h), on programs built with ProgramBuilder.
#include "loop/fusion.h"

#include <gtest/gtest.h>

#include "loop/access.h"
#include "kiln/ir/builder.h"
#include "kiln/loop/lower.h"

namespace kiln::ir::lowering {
namespace {

std::vector<size_t> all_statements(const Routine& r) {
  std::vector<size_t> out;
  for (size_t i = 0; i < r.statements.size(); ++i) out.push_back(i);
  return out;
}

Program softmax() {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 10});
  Tensor y = b.output("y", DType::kF32, {4, 10});
  Tensor m = b.tensor("m", DType::kF32, {4});
  Tensor e = b.tensor("e", DType::kF32, {4, 10});
  Tensor s = b.tensor("s", DType::kF32, {4});
  Index i("i"), j("j");
  b.main()
      .assign(m(i), max(x(i, j)))
      .assign(e(i, j), exp(x(i, j) - m(i)))
      .assign(s(i), sum(e(i, j)))
      .assign(y(i, j), e(i, j) / s(i));
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(ParallelDims, CollapsesSmallLeadingDims) {
  TensorNode conv{0, "o", Role::kOutput, DType::kF32, {1, 8, 16, 16}, {}, MemoryMode::kUnset, {}, {}};
  EXPECT_EQ(parallel_dims_alone(conv, true), 3);  // 1 * 8 * 16 = 128 >= 64
  EXPECT_EQ(leading_extent(conv, 3), 128);
  EXPECT_EQ(parallel_dims_alone(conv, false), 1);
  TensorNode pool{0, "p", Role::kOutput, DType::kF32, {2, 4, 8, 8}, {}, MemoryMode::kUnset, {}, {}};
  EXPECT_EQ(parallel_dims_alone(pool, true), 3);  // 2 * 4 * 8 = 64
  TensorNode wide{0, "w", Role::kOutput, DType::kF32, {64, 32}, {}, MemoryMode::kUnset, {}, {}};
  EXPECT_EQ(parallel_dims_alone(wide, true), 1);
  TensorNode small{0, "s", Role::kOutput, DType::kF32, {2, 3}, {}, MemoryMode::kUnset, {}, {}};
  EXPECT_EQ(parallel_dims_alone(small, true), 2);  // never reaches 64: all of them
  TensorNode scalar{0, "c", Role::kOutput, DType::kF32, {}, {}, MemoryMode::kUnset, {}, {}};
  EXPECT_EQ(parallel_dims_alone(scalar, true), 0);
}

// A size counts as a small batch (kSizeForPlanning): the channels join a sized batch, so that a
// batch of 1 still spreads over the threads; a later dimension that is a size never joins.
TEST(ParallelDims, ASizedBatchTakesInTheChannelsButNotAnotherSize) {
  ProgramBuilder b;
  Size n = b.size("N"), m = b.size("M");
  Tensor x = b.input("x", DType::kF32, {n, 32, 16, 16});
  Tensor o = b.output("o", DType::kF32, {n, 32, 16, 16});
  Tensor thin_x = b.input("thin_x", DType::kF32, {n, 4, 4, 16});
  Tensor thin = b.output("thin", DType::kF32, {n, 4, 4, 16});
  Tensor c = b.output("c", DType::kF32, {n, m});
  Tensor a = b.input("a", DType::kF32, {n, m});
  Index i("i"), j("j"), y("y"), z("z");
  b.main()
      .assign(o(i, j, y, z), x(i, j, y, z))
      .assign(thin(i, j, y, z), thin_x(i, j, y, z))
      .assign(c(i, j), a(i, j));
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  const auto node = [&](const char* name) -> const TensorNode& {
    for (const TensorNode& t : p->nodes) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << name;
    return p->nodes[0];
  };
  EXPECT_EQ(parallel_dims_alone(node("o"), true), 2);     // N counts 8: 8 * 32 >= 64
  EXPECT_EQ(parallel_dims_alone(node("thin"), true), 3);  // 8 * 4 = 32, then * 4 = 128
  EXPECT_EQ(parallel_dims_alone(node("c"), true), 1);     // M is a size: rows of c only
}

TEST(FusionLegal, RowWiseSoftmaxFusesOverTheRows) {
  Program p = softmax();
  const Routine& r = p.routines[0];
  EXPECT_TRUE(fusion_legal(p, r, {0, 1, 2, 3}, 1, {}).ok());
  // Dimension 1 of e is not a dimension of m and s.
  Status two = fusion_legal(p, r, {0, 1, 2, 3}, 2, {});
  EXPECT_EQ(two.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(two.message().find("'m' has fewer than 2 dimensions"), std::string::npos) << two;
  std::vector<KernelGroup> groups = plan_kernels(p, r, all_statements(r), {}, {});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].statements, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(groups[0].parallel_dims, 1);
  // Without fusion: one group each, collapsed alone (e and y: 4 * 10 rows).
  groups = plan_kernels(p, r, all_statements(r), {}, {false, true});
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[1].parallel_dims, 2);
  groups = plan_kernels(p, r, all_statements(r), {}, {false, false});
  EXPECT_EQ(groups[1].parallel_dims, 1);
}

TEST(FusionLegal, ReadOfAnotherRowOfAWrittenNodeIsRefused) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 4});
  Tensor t = b.tensor("t", DType::kF32, {4, 4});
  Tensor y = b.output("y", DType::kF32, {4, 4});
  Tensor z = b.output("z", DType::kF32, {4});
  Index i("i"), j("j"), k("k");
  b.main()
      .assign(t(i, j), x(i, j) * 2)
      .assign(y(i, j), t(3 - i, j) + t(i, j))  // another row of t
      .assign(z(i), sum(t(k, i)));  // t read with a reduced index in dimension 0
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Routine& r = built->routines[0];
  Status st = fusion_legal(*built, r, {0, 1}, 1, {});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("statement 2: reads 't' in dimension 0"), std::string::npos) << st;
  EXPECT_FALSE(fusion_legal(*built, r, {0, 2}, 1, {}).ok());
  // A node read but not written by the group may be read anywhere.
  EXPECT_TRUE(fusion_legal(*built, r, {1, 2}, 1, {}).ok());
  std::vector<KernelGroup> groups = plan_kernels(*built, r, all_statements(r), {}, {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].statements, (std::vector<size_t>{0}));
  EXPECT_EQ(groups[1].statements, (std::vector<size_t>{1, 2}));
}

TEST(FusionLegal, SnapshotStatementsAndScalarsStandAlone) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {8, 8});
  Tensor y = b.output("y", DType::kF32, {8, 8});
  Tensor c = b.output("c", DType::kF32);
  Index i("i"), j("j");
  b.main()
      .assign(y(i, j), x(i, j))
      .assign(y(i, j), y(i, j + 1) * 2)  // reads its target elsewhere in the row
      .assign(c, sum(y(i, j)))
      .assign(y(i, j), y(i, j) + c);
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Routine& r = built->routines[0];
  Status st = fusion_legal(*built, r, {0, 1}, 1, {});
  EXPECT_NE(st.message().find("needs a snapshot"), std::string::npos) << st;
  std::vector<KernelGroup> groups = plan_kernels(*built, r, all_statements(r), {}, {});
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[2].parallel_dims, 0);  // the scalar
}

TEST(FusionLegal, KeepsTheParallelismOfBigStatements) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {2, 64, 64});
  Tensor t = b.tensor("t", DType::kF32, {2, 64, 64});
  Tensor y = b.output("y", DType::kF32, {2});
  Index i("i"), j("j"), k("k");
  b.main().assign(t(i, j, k), x(i, j, k) * 2).assign(y(i), sum(t(i, j, k)));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Routine& r = built->routines[0];
  // Legal over dimension 0, but t would run on 2 workgroups instead of 128: not fused.
  EXPECT_TRUE(fusion_legal(*built, r, {0, 1}, 1, {}).ok());
  std::vector<KernelGroup> groups = plan_kernels(*built, r, all_statements(r), {}, {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].parallel_dims, 2);
}

TEST(FusionLegal, ConvolutionAndItsBiasFuseOverCollapsedDims) {
  ProgramBuilder b;
  Tensor img = b.input("img", DType::kF32, {1, 3, 16, 16});
  Tensor w = b.input("w", DType::kF32, {8, 3, 3, 3});
  Tensor bias = b.param("bias", DType::kF32, {8}, value_init(0.5));
  Tensor o = b.output("o", DType::kF32, {1, 8, 16, 16});
  Index n("n"), co("co"), y("y"), x("x"), ci("ci"), ky("ky"), kx("kx");
  b.main()
      .assign(o(n, co, y, x), sum(img(n, ci, y + ky - 1, x + kx - 1) * w(co, ci, ky, kx)), {ky < 3, kx < 3})
      .add(o(n, co, y, x), bias(co));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Routine& r = built->routines[0];
  std::vector<KernelGroup> groups = plan_kernels(*built, r, all_statements(r), {}, {});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].parallel_dims, 3);
}

TEST(ParallelDims, LoweringRecoversCollapsedIndicesWithDivAndMod) {
  ProgramBuilder b;
  Tensor img = b.input("img", DType::kF32, {2, 4, 8, 8});
  Tensor bias = b.input("bias", DType::kF32, {4});
  Tensor p = b.output("p", DType::kF32, {2, 4, 8, 8});
  Index n("n"), c("c"), y("y"), x("x");
  b.main().assign(p(n, c, y, x), img(n, c, y, x) * bias(c));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  LowerOptions o;
  o.optimize = false;
  Result<LoweredProgram> lowered = lower_program(*built, o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const Kernel& k = lowered->routines[0].kernels[0];
  ASSERT_EQ(k.body->kind, LStmt::Kind::kFor);
  EXPECT_TRUE(k.body->parallel);
  EXPECT_EQ(k.body->extent, 64);  // n, c, y collapsed
  const std::string text = print_kernel(k);
  // Rows of img and p are at v0 * 8; c = (v0 / 8) % 4.
  EXPECT_NE(text.find("(store 2 (+ (* v0 8) v1)"), std::string::npos) << text;
  EXPECT_NE(text.find("(load f32 0 (+ (* v0 8) v1))"), std::string::npos) << text;
  EXPECT_NE(text.find("(load f32 1 (- (/ v0 8) (* (/ (/ v0 8) 4) 4)))"), std::string::npos) << text;
  o.collapse = false;
  lowered = lower_program(*built, o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(lowered->routines[0].kernels[0].body->extent, 2);
}

TEST(Accesses, ReadsThroughInlinedDefinitionsAreInTheReadersIndices) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 6});
  Tensor h = b.tensor("h", DType::kF32, {4, 6});
  Tensor y = b.output("y", DType::kF32, {4});
  Index i("i"), j("j"), r("r"), c("c");
  b.main().assign(h(i, j), x(i, j + 1)).assign(y(r), sum(h(r, c)));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Routine& routine = built->routines[0];
  InlineDefs inlined = {{h.id(), &routine.statements[0]}};
  std::vector<Access> accesses = statement_accesses(routine.statements[1], inlined);
  ASSERT_EQ(accesses.size(), 2u);
  EXPECT_EQ(accesses[0].node, x.id());  // h[r, c] is x[r, c + 1]
  EXPECT_EQ(accesses[0].subscripts[0].bare_index(), 0);
  EXPECT_EQ(accesses[0].subscripts[1].offset, 1);
  EXPECT_EQ(accesses[0].subscripts[1].terms, (std::vector<std::pair<int, int64_t>>{{1, 1}}));
  EXPECT_TRUE(accesses[1].write);
  EXPECT_TRUE(at_target_point(routine.statements[1], accesses[1]));
  // substitute: 2*a - b + 3 with a = i + 1, b = 2*i - j.
  Affine inner{{{0, 2}, {1, -1}}, 3, -1};
  Affine a{{{0, 1}}, 1, -1}, bb{{{0, 2}, {1, -1}}, 0, -1};
  Affine out = substitute(inner, {a, bb});
  EXPECT_EQ(out.offset, 5);
  EXPECT_EQ(out.terms, (std::vector<std::pair<int, int64_t>>{{1, 1}}));
}

}  // namespace
}  // namespace kiln::ir::lowering
