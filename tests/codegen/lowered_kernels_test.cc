// What lowering guarantees the code generators (kiln/loop/lower.h), whatever the program: kernel names that no
// dialect reserves and that stay distinct, and expressions no deeper than the language allows
// however long a chain of inlined intermediates is.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kiln/codegen/c_emitter.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"

namespace kiln::ir {
namespace {

Result<LoweredProgram> lowered_text(const std::string& text) {
  Result<Program> program = lang::parse_program(text, "test.kiln");
  if (!program.ok()) return program.status();
  return lower_program(*program, {});
}

int depth(const LExpr& e) {
  int deepest = 0;
  for (const LExprRef& a : e.args) deepest = std::max(deepest, depth(*a));
  if (e.offset) deepest = std::max(deepest, depth(*e.offset));
  return 1 + deepest;
}

int depth(const LStmt& s) {
  int deepest = 0;
  for (const LExprRef& e : {s.cond, s.offset, s.value}) {
    if (e) deepest = std::max(deepest, depth(*e));
  }
  for (const LStmtRef& b : s.body) deepest = std::max(deepest, depth(*b));
  return deepest;
}

void expect_every_dialect_accepts(const LoweredProgram& lowered) {
  std::vector<Kernel> kernels;
  for (const LoweredRoutine& r : lowered.routines) kernels.insert(kernels.end(), r.kernels.begin(), r.kernels.end());
  for (codegen::Dialect dialect : {codegen::Dialect::kC, codegen::Dialect::kOpenCL}) {
    Result<std::string> source = codegen::emit_kernels(kernels, &lowered.program, {dialect});
    EXPECT_TRUE(source.ok()) << codegen::dialect_format(dialect) << ": " << source.status();
  }
  Result<std::vector<Kernel>> reparsed = parse_kernels(print_lowered(lowered));
  EXPECT_TRUE(reparsed.ok()) << reparsed.status();
}

TEST(LowerNamesTest, RoutinesNamedLikeReservedIdentifiersCompileInEveryDialect) {
  std::string text = "input x : f32[4]\noutput y : f32[4]\n";
  const std::set<std::string> routines = {"__kernel", "_Bool", "kiln_step", "KILN_X", "get_loss",
                                          "rt___kernel", "rt_a", "a", "main_0"};
  for (const std::string& r : routines) text += "routine " + r + " {\n  y[i] = x[i] * 2\n}\n";
  Result<LoweredProgram> lowered = lowered_text(text);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::set<std::string> names;
  for (const LoweredRoutine& r : lowered->routines) {
    for (const Kernel& k : r.kernels) EXPECT_TRUE(names.insert(k.name).second) << "two kernels named " << k.name;
  }
  EXPECT_EQ(names.size(), routines.size());
  expect_every_dialect_accepts(*lowered);
}

// t1 = t0 * t0 + 1, t2 = t1 * t1 + 1, ...: each definition is inlined into the next, so without
// a bound the last statement would nest as deep as the whole chain.
std::string chain(int links, int depth_per_link) {
  std::string text = "input x : f32[2]\noutput y : f32[2]\n";
  for (int t = 0; t < links; ++t) text += "tensor t" + std::to_string(t) + " : f32[2]\n";
  auto nested = [&](const std::string& leaf) {
    std::string e = leaf;
    for (int d = 0; d < depth_per_link; ++d) e = "tanh(" + e + ")";
    return e;
  };
  text += "t0[i] = " + nested("x[i]") + "\n";
  for (int t = 1; t < links; ++t) {
    text += "t" + std::to_string(t) + "[i] = " + nested("t" + std::to_string(t - 1) + "[i]") + "\n";
  }
  text += "y[i] = t" + std::to_string(links - 1) + "[i]\n";
  return text;
}

TEST(LowerDepthTest, InlinedChainsStayWithinTheLanguagesDepth) {
  for (int links : {3, 40, 400}) {
    SCOPED_TRACE(std::to_string(links) + " links");
    Result<LoweredProgram> lowered = lowered_text(chain(links, 100));
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    int deepest = 0;
    for (const LoweredRoutine& r : lowered->routines) {
      for (const Kernel& k : r.kernels) deepest = std::max(deepest, depth(*k.body));
    }
    // Each language level lowers to a few loop-IR levels at most (a conversion, a guard).
    EXPECT_LE(deepest, 4 * kMaxExprDepth);
    // Some intermediates are still inlined: the bound keeps the others in memory.
    int stored = 0;
    for (const TensorNode& n : lowered->program.nodes) stored += n.role == Role::kTensor && n.memory != MemoryMode::kVirtual;
    EXPECT_GT(stored, 0);
    EXPECT_LT(stored, links);
    expect_every_dialect_accepts(*lowered);
  }
}

TEST(LowerDepthTest, AVirtualRequestThatWouldNestTooDeepIsRefused) {
  Result<Program> program = lang::parse_program(chain(4, 200), "test.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  for (TensorNode& n : program->nodes) {
    if (n.role == Role::kTensor) n.memory = MemoryMode::kVirtual;
  }
  Result<LoweredProgram> lowered = lower_program(*program, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_NE(lowered.status().message().find("deeper than"), std::string::npos) << lowered.status();
}

// Workgroups follow a kernel's work: a small kernel stays whole (a hand-off would cost more than
// it saves), a large one is split up to the cap, and never past its parallel extent.
TEST(WorkgroupsForSize, FollowTheKernelsWork) {
  auto kernel_of = [](const std::string& text) -> Kernel {
    Result<LoweredProgram> lowered = lowered_text(text);
    EXPECT_TRUE(lowered.ok()) << lowered.status();
    return lowered.ok() ? lowered->routines.front().kernels.front() : Kernel{};
  };
  const Kernel tiny = kernel_of("input a : f32[256]\noutput y : f32[256]\ny[i] = a[i] + 1\n");
  EXPECT_EQ(codegen::estimated_stores(tiny), 256);
  EXPECT_EQ(codegen::workgroups_for_size(tiny, 8), 1u);
  const Kernel big = kernel_of("input a : f32[4194304]\noutput y : f32[4194304]\ny[i] = a[i] + 1\n");
  EXPECT_EQ(codegen::workgroups_for_size(big, 8), 8u);
  EXPECT_EQ(codegen::workgroups_for_size(big, 3), 3u);
  // 4 rows of 2^20: the work would fill 64 workgroups, the parallel extent allows 4.
  const Kernel rows = kernel_of("input a : f32[4, 1048576]\noutput y : f32[4]\ny[i] = sum(a[i, j])\n");
  EXPECT_GE(codegen::estimated_stores(rows), int64_t{4} << 20);
  EXPECT_EQ(codegen::workgroups_for_size(rows, 16), 4u);
  EXPECT_EQ(codegen::workgroups_for_size(tiny, 0), 1u);
}

}  // namespace
}  // namespace kiln::ir
