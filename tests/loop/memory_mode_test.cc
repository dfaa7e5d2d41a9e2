// Memory modes requested by the user (kiln/ir/memory_mode.h): the API's refusals, the builder's
// method, and lowering honouring requests.
#include "kiln/ir/memory_mode.h"

#include <gtest/gtest.h>

#include "kiln/ir/builder.h"
#include "kiln/loop/lower.h"

namespace kiln::ir {
namespace {

// x → t (elementwise, read once: inlinable) → y; u reduced and read twice.
Program small_program() {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4, 8});
  b.param("p", DType::kF32, {8}, value_init(1));
  b.constant("half", DType::kF32, 0.5);
  Tensor t = b.tensor("t", DType::kF32, {4, 8});
  Tensor u = b.tensor("u", DType::kF32, {4});
  Tensor y = b.output("y", DType::kF32, {4, 8});
  Index i("i"), j("j");
  b.main()
      .assign(t(i, j), x(i, j) * 2)
      .assign(u(i), sum(x(i, j)))
      .assign(y(i, j), t(i, j) + u(i) * u(i));
  Result<Program> p = b.build();
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

void expect_refused(const Status& st, const std::string& what) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(what), std::string::npos) << st;
}

TEST(MemoryMode, RefusesInconsistentRequests) {
  Program p = small_program();
  expect_refused(set_memory_mode(p, "x", MemoryMode::kLocal), "tensor 'x' cannot be local: it is input");
  expect_refused(set_memory_mode(p, "y", MemoryMode::kVirtual), "always stored");
  expect_refused(set_memory_mode(p, "p", MemoryMode::kLocal), "tensor 'p' cannot be local");
  expect_refused(set_memory_mode(p, "half", MemoryMode::kLocal), "a const cannot be a local array");
  expect_refused(set_memory_mode(p, "t", MemoryMode::kUnset), "'unset' is not a memory mode");
  EXPECT_EQ(set_memory_mode(p, "nope", MemoryMode::kHosted).code(), StatusCode::kNotFound);
  // Allowed, and idempotent; a contradicting second request is refused and the first stands.
  EXPECT_TRUE(set_memory_mode(p, "x", MemoryMode::kHosted).ok());
  EXPECT_TRUE(set_memory_mode(p, "x", MemoryMode::kHosted).ok());
  EXPECT_TRUE(set_memory_mode(p, "t", MemoryMode::kHosted).ok());
  // Inputs, outputs and params may be on_device too (the same as hosted for them).
  EXPECT_TRUE(set_memory_mode(p, "y", MemoryMode::kOnDevice).ok());
  expect_refused(set_memory_mode(p, "t", MemoryMode::kVirtual), "it was already requested hosted");
  EXPECT_EQ(p.find_node("t")->memory, MemoryMode::kHosted);
  EXPECT_TRUE(check_memory_modes(p).ok());
  // Modes set directly are checked by lowering the same way.
  Program direct = small_program();
  for (TensorNode& n : direct.nodes) {
    if (n.name == "y") n.memory = MemoryMode::kLocal;
  }
  expect_refused(check_memory_modes(direct), "tensor 'y' cannot be local");
  expect_refused(lower_program(direct).status(), "tensor 'y' cannot be local");
}

TEST(MemoryMode, BuilderRecordsRefusalsForBuild) {
  ProgramBuilder b;
  Tensor x = b.input("x", DType::kF32, {4});
  Tensor t = b.tensor("t", DType::kF32, {4});
  Tensor y = b.output("y", DType::kF32, {4});
  Index i("i");
  b.main().assign(t(i), x(i) + 1).assign(y(i), t(i) * t(i));
  EXPECT_TRUE(b.set_memory_mode(t, MemoryMode::kOnDevice).ok());
  Result<Program> ok = b.build();
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->find_node("t")->memory, MemoryMode::kOnDevice);
  expect_refused(b.set_memory_mode(x, MemoryMode::kLocal), "tensor 'x' cannot be local");
  Result<Program> refused = b.build();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tensor 'x' cannot be local"), std::string::npos) << refused.status();
}

Result<LoweredProgram> lower_with(const std::string& node, MemoryMode mode) {
  Program p = small_program();
  Status st = set_memory_mode(p, node, mode);
  if (!st.ok()) return st;
  LowerOptions o;
  o.optimize = false;
  return lower_program(p, o);
}

// h read by one statement at two points (the taps of a window written out) is stored, so that it
// is computed once rather than once per point; one read at one point stays inlined; @virtual
// (a request) inlines it anyway.
TEST(MemoryMode, ATensorReadAtTwoPointsIsStoredUnlessAskedVirtual) {
  auto lowered = [](bool two_points, MemoryMode request) -> Result<LoweredProgram> {
    ProgramBuilder b;
    Tensor x = b.input("x", DType::kF32, {64, 32});
    Tensor h = b.tensor("h", DType::kF32, {64, 32});
    Tensor y = b.output("y", DType::kF32, {64, 32});
    Index i("i"), j("j");
    b.main().assign(h(i, j), max(x(i, j), 0.0));
    if (two_points) {
      b.main().assign(y(i, j), h(i, j - 1) * 2.0 + h(i, j + 1));
    } else {
      b.main().assign(y(i, j), h(i, j) * 2.0 + h(i, j));
    }
    KILN_ASSIGN_OR_RETURN(Program p, b.build());
    if (request != MemoryMode::kUnset) KILN_RETURN_IF_ERROR(set_memory_mode(p, "h", request));
    return lower_program(p);
  };
  Result<LoweredProgram> stored = lowered(true, MemoryMode::kUnset);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_NE(stored->program.find_node("h")->memory, MemoryMode::kVirtual);
  Result<LoweredProgram> one_point = lowered(false, MemoryMode::kUnset);
  ASSERT_TRUE(one_point.ok()) << one_point.status();
  EXPECT_EQ(one_point->program.find_node("h")->memory, MemoryMode::kVirtual);
  Result<LoweredProgram> asked = lowered(true, MemoryMode::kVirtual);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->program.find_node("h")->memory, MemoryMode::kVirtual);
}

TEST(MemoryMode, LoweringHonoursRequests) {
  // By default t is inlined and u is a local scalar of the one fused kernel.
  Result<LoweredProgram> plain = lower_program(small_program());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->program.find_node("t")->memory, MemoryMode::kVirtual);
  EXPECT_EQ(plain->program.find_node("u")->memory, MemoryMode::kLocal);
  EXPECT_EQ(plain->program.find_node("half")->memory, MemoryMode::kVirtual);

  for (MemoryMode m : {MemoryMode::kOnDevice, MemoryMode::kHosted}) {
    Result<LoweredProgram> l = lower_with("t", m);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->program.find_node("t")->memory, m);  // neither inlined nor local
    l = lower_with("u", m);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->program.find_node("u")->memory, m);
  }
  // A const kept in a buffer is loaded rather than folded.
  Result<LoweredProgram> c = lower_with("half", MemoryMode::kOnDevice);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->program.find_node("half")->memory, MemoryMode::kOnDevice);

  Result<LoweredProgram> v = lower_with("t", MemoryMode::kVirtual);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->program.find_node("t")->memory, MemoryMode::kVirtual);
  expect_refused(lower_with("u", MemoryMode::kVirtual).status(), "tensor 'u' cannot be virtual");
  Result<LoweredProgram> local = lower_with("t", MemoryMode::kLocal);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->program.find_node("t")->memory, MemoryMode::kLocal);

  // Requests hold even with the analyses turned off.
  Program p = small_program();
  ASSERT_TRUE(set_memory_mode(p, "t", MemoryMode::kVirtual).ok());
  ASSERT_TRUE(set_memory_mode(p, "u", MemoryMode::kLocal).ok());
  LowerOptions off;
  off.inline_virtual = false;
  off.local_arrays = false;
  Result<LoweredProgram> l = lower_program(p, off);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->program.find_node("t")->memory, MemoryMode::kVirtual);
  EXPECT_EQ(l->program.find_node("u")->memory, MemoryMode::kLocal);
  off.fuse = false;
  expect_refused(lower_program(p, off).status(), "tensor 'u' cannot be local: ");
}

}  // namespace
}  // namespace kiln::ir
