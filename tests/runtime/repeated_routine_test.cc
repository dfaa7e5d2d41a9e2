// A routine named more than once in compile_batch / compile_lowered: the code holds it once (one
// set of kernels in one executable), and the linked routine runs as often as the caller runs it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kRepeatedRoutineProgram[] = R"(
input  x : f32[4]
param  w : f32[4] = 1
output s : f32
routine step {
  w[i] = w[i] * 0.5 + x[i]
}
routine total {
  s = sum(w[i])
}
)";

std::vector<std::string> devices_here() {
  std::vector<std::string> names = {"cpu", "interp"};
  Result<hal::DriverRef> opencl = drivers::builtin_registry().find("opencl");
  if (opencl.ok() && (*opencl)->availability().ok()) names.push_back("opencl");
  return names;
}

TEST(RepeatedRoutineTest, ARoutineNamedTwiceIsCompiledAndLinkedOnce) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kRepeatedRoutineProgram));
  for (const std::string& device_name : devices_here()) {
    SCOPED_TRACE(device_name);
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program, 0));
    KILN_ASSERT_OK(write_floats(*nodes, "x", {1, 2, 3, 4}));
    KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, drivers::builtin_registry().create_device(device_name));
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
    KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
    const std::vector<std::string> names = {"step", "step", "total", "step"};
    KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile_batch(program, names));
    EXPECT_EQ(code->routine_names(), (std::vector<std::string>{"step", "total"}));
    KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
    KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch batch, backend->link_batch(root, code));
    ASSERT_EQ(batch.routines.size(), 2u);
    EXPECT_EQ(batch.routines[0]->name(), "step");
    EXPECT_EQ(batch.routines[1]->name(), "total");
    // The caller's schedule: step, step, total.
    KILN_ASSERT_OK(batch.routines[0]->run());
    KILN_ASSERT_OK(batch.routines[0]->run());
    KILN_ASSERT_OK(batch.routines[1]->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> s, read_floats(*nodes, "s"));
    // w: 1 → 0.5 + x → 0.25 + 0.5 x + x.
    float expected = 0;
    for (float x : {1.0f, 2.0f, 3.0f, 4.0f}) expected += 0.25f + 1.5f * x;
    ASSERT_EQ(s.size(), 1u);
    EXPECT_FLOAT_EQ(s[0], expected);
    KILN_EXPECT_OK(backend->await(wait_limit()));
  }
}

TEST(RepeatedRoutineTest, LoweredCodeAndSharedCodeAlsoHoldEachRoutineOnce) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kRepeatedRoutineProgram));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device());
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(ir::LoweredProgram lowered, ir::lower_program(program));
  const std::vector<std::string> names = {"total", "step", "total"};
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile_lowered(std::move(lowered), names));
  EXPECT_EQ(code->routine_names(), (std::vector<std::string>{"total", "step"}));
  // Shared code is built at once: a second copy of a routine would be two kernels of one name.
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef shared, backend->compile_batch(program, names, {.shared = true, .lower = {}}));
  EXPECT_EQ(shared->routine_names(), (std::vector<std::string>{"total", "step"}));
}

}  // namespace
}  // namespace kiln::runtime_test
