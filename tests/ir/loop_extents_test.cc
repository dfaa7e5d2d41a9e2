// How far a statement's loops run (kiln/ir/loop_extents.h): a reduced index bounded by `where`
// far beyond what its subscripts reach stops where they leave their tensors; a statement whose
// loops no 64-bit counter can count is refused at its bound.
#include "kiln/ir/loop_extents.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/builder.h"

namespace kiln::ir {
namespace {

constexpr int64_t kFar = int64_t{1} << 32;

std::vector<int64_t> extents_of(const ProgramBuilder& b) {
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  return loop_extents(p->routines[0].statements[0], p->nodes);
}

TEST(LoopExtentsTest, APoolingWindowBoundFarBeyondTheImageStopsAtItsEdge) {
  ProgramBuilder b;
  Tensor img = b.input("img", DType::kF32, {16, 16});
  Tensor p = b.output("p", DType::kF32, {8, 4});
  Index y("y"), x("x"), dy("dy"), dx("dx");
  b.main().assign(p(y, x), max(img(2 * y + dy, 2 * x + dx)), {dy < 2, dx < kFar});
  // dx: 2x + dx < 16 with x >= 0 leaves dx < 16; dy keeps its own bound.
  EXPECT_EQ(extents_of(b), (std::vector<int64_t>{8, 4, 2, 16}));
}

TEST(LoopExtentsTest, EveryCompoundSubscriptOfTheRightSideNarrowsTheIndex) {
  ProgramBuilder b;
  Tensor u = b.input("u", DType::kF32, {100});
  Tensor v = b.input("v", DType::kF32, {10});
  Tensor s = b.output("s", DType::kF32, {});
  Index k("k");
  // A point counts only where both reads are in range: v's 3k + 1 < 10 gives k < 3.
  b.main().assign(s, sum(u(k + 1) * v(3 * k + 1)), {k < kFar});
  EXPECT_EQ(extents_of(b), (std::vector<int64_t>{3}));
}

TEST(LoopExtentsTest, NegativeCoefficientsAndOffsetsCountFromTheOtherSide) {
  ProgramBuilder b;
  Tensor u = b.input("u", DType::kF32, {10});
  Tensor y = b.output("y", DType::kF32, {10});
  Index i("i"), k("k");
  // i - k >= 0 for some i < 10: k < 10. And 20 - k < 10 never holds for k < 11: one empty step.
  b.main().assign(y(i), sum(u(i - k)), {k < kFar});
  EXPECT_EQ(extents_of(b), (std::vector<int64_t>{10, 10}));
  ProgramBuilder c;
  Tensor u2 = c.input("u", DType::kF32, {10});
  Tensor t = c.output("t", DType::kF32, {});
  c.main().assign(t, sum(u2(k - 5)), {k < kFar});
  EXPECT_EQ(extents_of(c), (std::vector<int64_t>{15}));
}

TEST(LoopExtentsTest, IndicesUsedOnlyAsValuesAndElementwiseStatementsKeepTheirExtents) {
  ProgramBuilder b;
  Tensor s = b.output("s", DType::kF64, {});
  Index k("k");
  b.main().assign(s, sum(f64(k)), {k < 1000});
  EXPECT_EQ(extents_of(b), (std::vector<int64_t>{1000}));
  EXPECT_EQ(loop_trip_count({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_EQ(loop_trip_count({int64_t{1} << 32, int64_t{1} << 31}), std::nullopt);
}

TEST(LoopExtentsTest, LoopsNoCounterCanCountAreRefusedAtTheWidestBound) {
  ProgramBuilder b;
  Tensor s = b.output("s", DType::kF64, {});
  Index k("k"), j("j");
  b.main().assign(s, sum(f64(k) * f64(j)), {j < 4096, k < int64_t{1} << 52});
  Result<Program> p = b.build();
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("more than 2^63 - 1"), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("lower the bound of 'k'"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace kiln::ir
