// Lowering is near-linear in the number of statements: for programs of n and 8n statements of
// several shapes (accumulations fused into one kernel, inlined intermediates, local arrays,
// snapshots, many outputs, stored intermediates read much later), the work lowering counts
// (src/loop/work_count.h: statements, accesses, nodes and expressions its analyses and passes
// examine) grows about 8 times, never like the 64 times of a scan of all statements per
// statement.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kiln/ir/builder.h"
#include "kiln/loop/lower.h"
#include "loop/work_count.h"

namespace kiln::ir {
namespace {

using Shape = std::function<void(ProgramBuilder&, int n)>;

// The work counted while lowering the program `shape` builds with `n` statements.
uint64_t work_for(const Shape& shape, int n) {
  ProgramBuilder b;
  shape(b, n);
  Result<Program> program = b.build();
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return 0;
  const uint64_t before = lowering_work();
  Result<LoweredProgram> lowered = lower_program(*program);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowering_work() - before;
}

void expect_near_linear(const std::string& name, const Shape& shape) {
  const uint64_t small = work_for(shape, 250), large = work_for(shape, 2000);
  ASSERT_GT(small, 0u);
  const double ratio = static_cast<double>(large) / static_cast<double>(small);
  EXPECT_LT(ratio, 12.0) << name << ": work " << small << " for 250 statements, " << large << " for 2000";
}

TEST(LowerScalingTest, WorkGrowsLinearlyWithStatements) {
  expect_near_linear("accumulations", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {16});
    Tensor y = b.output("y", DType::kF32, {16});
    Index i("i");
    for (int s = 0; s < n; ++s) b.main().add(y(i), x(i));
  });
  expect_near_linear("inlined intermediates", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {16});
    Tensor y = b.output("y", DType::kF32, {16});
    Index i("i");
    for (int s = 0; s < n / 2; ++s) {
      Tensor t = b.tensor("t" + std::to_string(s), DType::kF32, {16});
      b.main().assign(t(i), x(i) * 2).add(y(i), t(i));
    }
  });
  expect_near_linear("local arrays", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {16});
    Tensor y = b.output("y", DType::kF32, {16});
    Index i("i"), j("j");
    for (int s = 0; s < n / 3; ++s) {
      Tensor t = b.tensor("t" + std::to_string(s), DType::kF32, {16, 4});
      b.main().assign(t(i, j), x(i) * 2).add(y(i), sum(t(i, j))).add(y(i), sum(t(i, j)));
    }
  });
  expect_near_linear("snapshots", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {16});
    Tensor y = b.output("y", DType::kF32, {16});
    Index i("i");
    for (int s = 0; s < n; ++s) b.main().assign(y(i), y(i + 1) + x(i));
  });
  expect_near_linear("many outputs", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {16});
    Index i("i");
    for (int s = 0; s < n; ++s) b.main().assign(b.output("y" + std::to_string(s), DType::kF32, {16})(i), x(i) + s);
  });
  expect_near_linear("intermediates read much later", [](ProgramBuilder& b, int n) {
    Tensor x = b.input("x", DType::kF32, {256});
    Tensor y = b.output("y", DType::kF32, {256});
    Index i("i");
    std::vector<Tensor> ts;
    for (int s = 0; s < n / 2; ++s) {
      ts.push_back(b.tensor("t" + std::to_string(s), DType::kF32, {256}));
      b.main().assign(ts.back()(i), x(i) * s);
    }
    for (const Tensor& t : ts) b.main().add(y(i), t(i) * t(i));
  });
}

}  // namespace
}  // namespace kiln::ir
