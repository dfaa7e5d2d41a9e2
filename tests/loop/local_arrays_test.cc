// Local arrays (src/loop/local_arrays.h), the overwrite analysis (src/loop/overwrite.h), and what
// lowering makes of them: fused kernels with rows of intermediates in local arrays.
#include "loop/local_arrays.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loop/overwrite.h"
#include "kiln/ir/builder.h"
#include "kiln/loop/lower.h"

namespace kiln::ir::lowering {
namespace {

size_t kernel_count(const LoweredProgram& p) {
  size_t n = 0;
  for (const LoweredRoutine& r : p.routines) n += r.kernels.size();
  return n;
}

MemoryMode mode_of(const LoweredProgram& p, const std::string& name) {
  const TensorNode* n = p.program.find_node(name);
  return n ? n->memory : MemoryMode::kUnset;
}

// Without the loop-IR passes, and without automatic calls (the products here stay loop nests).
LowerOptions plain() {
  LowerOptions o;
  o.optimize = false;
  o.auto_calls = false;
  return o;
}

Program layernorm() {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {8, 32});
  Tensor gamma = b.param("gamma", DType::kF32, {32}, value_init(1));
  Tensor beta = b.param("beta", DType::kF32, {32}, value_init(0));
  Tensor eps = b.constant("eps", DType::kF32, 1e-5);
  Tensor y = b.output("y", DType::kF32, {8, 32});
  Tensor mu = b.tensor("mu", DType::kF32, {8});
  Tensor d = b.tensor("d", DType::kF32, {8, 32});
  Tensor var = b.tensor("var", DType::kF32, {8});
  Index i("i"), j("j");
  b.main()
      .assign(mu(i), mean(x(i, j)))
      .assign(d(i, j), x(i, j) - mu(i))
      .assign(var(i), mean(d(i, j) * d(i, j)))
      .assign(y(i, j), d(i, j) * rsqrt(var(i) + eps) * gamma(j) + beta(j));
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(Overwrite, AssignOverwritesAccumulationsDoNot) {
  Assignment s;
  s.accum = Accum::kAssign;
  EXPECT_TRUE(fully_overwritten(s));
  s.reduce = Reduce::kMax;
  FoldInit init = fold_init(s, DType::kF32);
  EXPECT_TRUE(init.needed);
  EXPECT_EQ(init.value, -INFINITY);
  EXPECT_EQ(fold_init(s, DType::kI32).value, -2147483648.0);
  s.reduce = Reduce::kNone;
  EXPECT_FALSE(fold_init(s, DType::kF32).needed);  // nothing folds into the target
  for (Accum a : {Accum::kAdd, Accum::kSub, Accum::kMul}) {
    s.accum = a;
    s.reduce = Reduce::kSum;
    EXPECT_FALSE(fully_overwritten(s));
    EXPECT_FALSE(fold_init(s, DType::kF32).needed);  // += sum starts from the old value
  }
}

TEST(LocalArrays, LayernormIsOneKernelWithLocalRows) {
  Result<LoweredProgram> lowered = lower_program(layernorm(), plain());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(kernel_count(*lowered), 1u);
  for (const char* name : {"mu", "d", "var"}) EXPECT_EQ(mode_of(*lowered, name), MemoryMode::kLocal) << name;
  const Kernel& k = lowered->routines[0].kernels[0];
  // Bound: x, gamma, beta, y — no intermediate.
  EXPECT_EQ(k.nodes.size(), 4u);
  ASSERT_EQ(k.body->kind, LStmt::Kind::kFor);
  EXPECT_TRUE(k.body->parallel);
  EXPECT_EQ(k.body->extent, 8);
  const std::string text = print_kernel(k);
  EXPECT_NE(text.find("(local 1 f32 32"), std::string::npos) << text;  // the row of d
  // The kernel reads back as the same text.
  Result<Kernel> parsed = parse_kernel(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(print_kernel(*parsed), text);
}

TEST(LocalArrays, OptionsTurnFusionAndLocalsOff) {
  LowerOptions o = plain();
  o.local_arrays = false;
  Result<LoweredProgram> lowered = lower_program(layernorm(), o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(kernel_count(*lowered), 1u);
  EXPECT_EQ(mode_of(*lowered, "d"), MemoryMode::kOnDevice);
  o.fuse = false;
  lowered = lower_program(layernorm(), o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(kernel_count(*lowered), 4u);
}

TEST(LocalArrays, PlacementRefusesWithAReason) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 8});
  Tensor acc = b.tensor("acc", DType::kF32, {4, 8});   // += first: not overwritten
  Tensor two = b.tensor("two", DType::kF32, {4, 8});   // read by a second routine
  Tensor big = b.tensor("big", DType::kF32, {64, 4100});  // row too large
  Tensor y = b.output("y", DType::kF32, {4, 8});
  Tensor z = b.output("z", DType::kF32, {4, 8});
  Tensor w = b.output("w", DType::kF32, {64});
  Tensor w2 = b.output("w2", DType::kF32, {64});
  Index i("i"), j("j");
  b.main()
      .add(acc(i, j), x(i, j))
      .assign(two(i, j), x(i, j) * 3)
      .assign(y(i, j), acc(i, j) + two(i, j) + acc(i, j) * two(i, j));
  b.routine("again").assign(z(i, j), two(i, j) * two(i, j));
  b.routine("wide").assign(big(i, j), j * 0.5).assign(w(i), sum(big(i, j))).assign(w2(i), max(big(i, j)));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  Result<LoweredProgram> lowered = lower_program(*built, plain());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(mode_of(*lowered, "acc"), MemoryMode::kOnDevice);
  EXPECT_EQ(mode_of(*lowered, "two"), MemoryMode::kOnDevice);
  EXPECT_EQ(mode_of(*lowered, "big"), MemoryMode::kOnDevice);

  // The reasons, as a kLocal request reports them.
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"acc", "touches it before a statement overwrites it"},
           {"two", "used by more than one kernel (again by routine 'again', statement 1)"},
           {"big", "its row has 4100 elements, more than 4096"}}) {
    Program p = *built;
    for (TensorNode& n : p.nodes) {
      if (n.name == name) n.memory = MemoryMode::kLocal;
    }
    Result<LoweredProgram> refused = lower_program(p, plain());
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("tensor '" + name + "' cannot be local: "), std::string::npos)
        << refused.status();
    EXPECT_NE(refused.status().message().find(why), std::string::npos) << refused.status();
  }
}

TEST(LocalArrays, ScalarRowsAndInPlaceReductionsIntoLocals) {
  // matmul + bias: c's row (32 elements) is folded in place into a local array.
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kF32, {64, 16});
  Tensor w = b.input("w", DType::kF32, {16, 32});
  Tensor y = b.output("y", DType::kF32, {64, 32});
  Tensor c = b.tensor("c", DType::kF32, {64, 32});
  Index i("i"), j("j"), k("k");
  b.main().assign(c(i, j), sum(a(i, k) * w(k, j))).assign(y(i, j), relu(c(i, j)));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  Result<LoweredProgram> lowered = lower_program(*built, plain());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(kernel_count(*lowered), 1u);
  EXPECT_EQ(mode_of(*lowered, "c"), MemoryMode::kLocal);
  const std::string text = print_kernel(lowered->routines[0].kernels[0]);
  EXPECT_NE(text.find("(local 0 f32 32"), std::string::npos) << text;
  EXPECT_NE(text.find("(local_store 0 v1 (const f32 0))"), std::string::npos) << text;
  EXPECT_NE(text.find("(relu f32 (local_load f32 0 v3))"), std::string::npos) << text;
  EXPECT_NE(text.find("(local_store 0 v1 (+ f32 (local_load f32 0 v1)"), std::string::npos) << text;
}

// Local arrays nest (one declaration inside the other), so one kernel gets at most
// kMaxLocalArraysPerKernel of them unless requested; the rest of its intermediates get buffers.
TEST(LocalArrays, AKernelHoldsAtMostTheCapOfAutomaticLocalArrays) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {16});
  Tensor y = b.output("y", DType::kF32, {16});
  Index i("i"), j("j");
  const size_t count = kMaxLocalArraysPerKernel + 6;
  for (size_t n = 0; n < count; ++n) {
    Tensor t = b.tensor("t" + std::to_string(n), DType::kF32, {16, 4});
    b.main().assign(t(i, j), x(i) * 2).add(y(i), sum(t(i, j))).add(y(i), sum(t(i, j)));
  }
  Result<Program> p = b.build();
  ASSERT_TRUE(p.ok()) << p.status();
  Result<LoweredProgram> lowered = lower_program(*p, plain());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(kernel_count(*lowered), 1u);
  size_t local = 0, stored = 0;
  for (size_t n = 0; n < count; ++n) {
    const MemoryMode m = mode_of(*lowered, "t" + std::to_string(n));
    local += m == MemoryMode::kLocal;
    stored += m == MemoryMode::kOnDevice;
  }
  EXPECT_EQ(local, kMaxLocalArraysPerKernel);
  EXPECT_EQ(stored, 6u);
}

}  // namespace
}  // namespace kiln::ir::lowering
