// Lowering (kiln/loop/lower.h) of programs built with ProgramBuilder: the range guards of folded
// consts, and the node lists of kernels whose loads the optimization passes remove.
#include "kiln/loop/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/loop/loop.h"

namespace kiln::ir {
namespace {

Program built(const ProgramBuilder& b) {
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Program{};
}

// Every kernel binds exactly the nodes it loads or stores: the runtime binds a buffer for each
// listed node but tracks (and so makes available) only the accessed ones.
void expect_bindings_are_accesses(const LoweredProgram& lowered) {
  for (const LoweredRoutine& r : lowered.routines) {
    for (const Kernel& k : r.kernels) {
      const NodeAccess access = node_access(k);
      std::vector<int> accessed = access.read;
      accessed.insert(accessed.end(), access.written.begin(), access.written.end());
      std::sort(accessed.begin(), accessed.end());
      accessed.erase(std::unique(accessed.begin(), accessed.end()), accessed.end());
      std::vector<int> bound = k.nodes;
      std::sort(bound.begin(), bound.end());
      EXPECT_EQ(bound, accessed) << print_kernel(k, &lowered.program);
    }
  }
}

void expect_bindings_are_accesses_in_every_mode(const Program& p) {
  for (bool optimize : {true, false}) {
    LowerOptions options;
    options.optimize = optimize;
    Result<LoweredProgram> lowered = lower_program(p, options);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    expect_bindings_are_accesses(*lowered);
  }
}

// The program: select on a constant condition folds away the only reads of x2 and x3.
TEST(LowerBindingsTest, SelectOnAConstantDropsTheReadsOfTheOtherOperand) {
  ProgramBuilder b;
  Tensor x2 = b.input("x2", DType::kF64, {8, 8, 5});
  Tensor x3 = b.input("x3", DType::kF32, {3});
  Tensor c4 = b.constant("c4", DType::kF64, 2);
  Tensor y5 = b.output("y5", DType::kI32);
  Index r0("r0"), r2("r2");
  b.main().assign(y5, sum(ge(select(c4, 1, i32(x2(r2, 1, 2 * r0) - x3(r0))), -1e-3)));
  expect_bindings_are_accesses_in_every_mode(built(b));
}

// A subscript that is out of range at every point: the guarded read folds to 0 (elementwise)
// or the term is never added (reduction), so the node is not read at all.
TEST(LowerBindingsTest, ConstantlyOutOfRangeReadsAreDropped) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4});
  Tensor w = b.input("w", DType::kF32, {3});
  Tensor y = b.output("y", DType::kF32, {4});
  Tensor s = b.output("s", DType::kF32);
  Index i("i"), k("k");
  b.main().assign(y(i), x(i) + w(5)).assign(s, sum(w(k + 7)), {k < 2});
  expect_bindings_are_accesses_in_every_mode(built(b));
}

// An integer product by 0 drops the load it multiplies.
TEST(LowerBindingsTest, IntegerTimesZeroDropsItsLoad) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kI32, {4});
  Tensor y = b.output("y", DType::kI32, {4});
  Index i("i");
  b.main().assign(y(i), x(i) * 0 + 1);
  expect_bindings_are_accesses_in_every_mode(built(b));
}

// A folded const keeps the range guard of its subscripts (zero padding): the lowered kernel
// selects between the value and 0, and a reduction tests the range before adding.
TEST(LowerConstTest, FoldedConstReadsKeepTheirRangeGuard) {
  ProgramBuilder b;
  Tensor one = b.constant("one", DType::kF32, 1, {3});
  Tensor e = b.output("e", DType::kF32, {4});
  Tensor s = b.output("s", DType::kF32, {4});
  Index i("i"), k("k");
  b.main().assign(e(i), one(i - 1)).assign(s(i), sum(one(i + k - 1)), {k < 3});
  LowerOptions plain;
  plain.optimize = false;
  plain.fuse = false;
  Result<LoweredProgram> lowered = lower_program(built(b), plain);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->routines[0].kernels.size(), 2u);
  const std::string elementwise = print_kernel(lowered->routines[0].kernels[0]);
  EXPECT_NE(elementwise.find("(select f32"), std::string::npos) << elementwise;
  const std::string reduction = print_kernel(lowered->routines[0].kernels[1]);
  EXPECT_NE(reduction.find("(if "), std::string::npos) << reduction;
}

// Language version 2, a triangular bound: the reduced loop stops at the smaller of its range
// and its limit (a loop whose extent reads the row's variable), and the passes that need a
// known trip count leave it as it is: no register tiles, no gemm call.
TEST(LowerTriangularTest, AReducedLoopStopsAtItsLimit) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {64, 64});
  Tensor y = b.input("y", DType::kF32, {64, 64});
  Tensor c = b.output("c", DType::kF32, {64, 64});
  Index i("i"), j("j"), k("k");
  b.main().assign(c(i, j), sum(x(i, k) * y(k, j)), {k < i + 1});
  Result<LoweredProgram> lowered = lower_program(built(b));
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->routines[0].calls.empty());
  ASSERT_EQ(lowered->routines[0].kernels.size(), 1u);
  const Kernel& kernel = lowered->routines[0].kernels[0];
  EXPECT_TRUE(has_triangular_loop(kernel.body)) << print_kernel(kernel);
  EXPECT_NE(print_kernel(kernel).find("(min 64 (+ v0 1))"), std::string::npos) << print_kernel(kernel);
  EXPECT_TRUE(failure_messages(kernel).empty());
}

// A reduction whose target loops inside the parallel one cover one point (ONNX's ReduceMean
// with its axis kept as an extent of 1), and one over a single point (a slice written as a sum
// over q < 1), keep their value in a local and store the target once: no store of the target
// inside a reduced loop, which would load and store it per term.
TEST(LowerReductionTest, OnePointTargetsAndOneTermSumsAccumulateInALocal) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {16, 256});
  Tensor m = b.output("m", DType::kF32, {16, 1});
  Tensor s = b.output("s", DType::kF32, {16, 8});
  Index i("i"), j("j"), k("k"), q("q");
  b.main().assign(m(i, j), mean(x(i, k))).assign(s(i, j), sum(x(i, j - q)), {q < 1});
  Result<LoweredProgram> lowered = lower_program(built(b));
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->routines[0].kernels.size(), 1u);
  const std::string text = print_kernel(lowered->routines[0].kernels[0]);
  EXPECT_EQ(text.find("(load f32 1"), std::string::npos) << text;  // m is never read back
  EXPECT_EQ(text.find("(load f32 2"), std::string::npos) << text;  // nor s
  EXPECT_NE(text.find("(local_store"), std::string::npos) << text;
}

// LowerOptions::check_bounds: a gathered subscript gets a check before the point that fails with
// the statement's place, the read and the tensor's dimension; the unchecked build has none.
TEST(LowerCheckBoundsTest, AGatherIsCheckedBeforeItsPoint) {
  ProgramBuilder b;
  Tensor e = b.input("e", DType::kF32, {5, 3});
  Tensor t = b.input("t", DType::kI32, {4});
  Tensor y = b.output("y", DType::kF32, {4, 3});
  Index i("i"), j("j");
  b.main().assign(y(i, j), e(gathered(t(i)), j));
  const Program p = built(b);
  LowerOptions checked;
  checked.check_bounds = true;
  for (bool optimize : {true, false}) {
    checked.optimize = optimize;
    Result<LoweredProgram> lowered = lower_program(p, checked);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    const Kernel& kernel = lowered->routines[0].kernels[0];
    EXPECT_EQ(failure_messages(kernel),
              (std::vector<std::string>{"<builder>: index out of range: dimension 0 of 'e' has size 5, but e[t[i], j] in "
                                        "routine 'main' (y[i, j] = e[t[i], j]) reads index "}));
    EXPECT_NE(print_kernel(kernel).find("(fail 0 "), std::string::npos) << print_kernel(kernel);
  }
  Result<LoweredProgram> unchecked = lower_program(p);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_TRUE(failure_messages(unchecked->routines[0].kernels[0]).empty());
}

}  // namespace
}  // namespace kiln::ir
