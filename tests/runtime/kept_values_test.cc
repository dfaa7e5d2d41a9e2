// A node's newest value outlives the context that computed it: reading the node table after the
// context (and its backend) was dropped or finalized returns what the device wrote, not the
// host copy's old bytes, on every device (NodeTable keeps the array that holds the value,
// Node::newer_on_device). A host write, or a later value from another context, replaces the kept
// one, and the node's modes may change again once no context holds an array of it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kKeptValuesProgram[] = R"(
input x : f32[8]
output g : f32[8]
routine main {
  g[i] = x[i] * 2
}
)";

std::vector<float> doubled(const std::vector<float>& x) {
  std::vector<float> out;
  for (float v : x) out.push_back(2 * v);
  return out;
}

class KeptValuesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<hal::DriverRef> driver = drivers::builtin_registry().find(GetParam());
    if (!driver.ok() || !(*driver)->availability().ok()) GTEST_SKIP() << "no " << GetParam() << " device";
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kKeptValuesProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program_));
  }

  // A backend, a stream and a context of its own that compute g from `x`, scheduled, not waited
  // for; the caller holds what it keeps.
  struct Run {
    std::shared_ptr<Backend> backend;
    ContextRef context;
    RoutineRef routine;
  };
  Run run_main(const std::vector<float>& x) {
    Run r;
    EXPECT_TRUE(write_floats(*nodes_, "x", x).ok());
    Result<hal::DeviceRef> device = drivers::builtin_registry().create_device(GetParam());
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return r;
    r.backend = *Backend::create(*device);
    Result<CodeRef> code = r.backend->compile(program_, "main");
    EXPECT_TRUE(code.ok()) << code.status();
    if (!code.ok()) return r;
    StreamRef stream = *r.backend->new_stream();
    ContextRef root = *r.backend->make_context(stream, nodes_);
    Result<runtime::Linked> linked = r.backend->link(root, *code, "main");
    EXPECT_TRUE(linked.ok()) << linked.status();
    if (!linked.ok()) return r;
    r.context = linked->context;
    r.routine = linked->routine;
    EXPECT_TRUE(r.routine->run().ok());
    return r;
  }

  ir::Program program_;
  std::shared_ptr<NodeTable> nodes_;
};

TEST_P(KeptValuesTest, ReadAfterTheContextAndBackendAreDropped) {
  const std::vector<float> x = ramp(8, 0, 1);
  run_main(x);  // everything but the table dropped at once, the run perhaps still going
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, doubled(x));
  // The value is the host copy's now: read again without any device.
  KILN_ASSERT_OK_AND_ASSIGN(g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, doubled(x));
}

TEST_P(KeptValuesTest, ReadAfterTheContextIsFinalized) {
  const std::vector<float> x = ramp(8, 1, 0.5f);
  Run r = run_main(x);
  ASSERT_TRUE(r.context);
  r.context->finalize();
  r.context->parent()->finalize();
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, doubled(x));
}

TEST_P(KeptValuesTest, HostWriteReplacesAKeptValue) {
  run_main(ramp(8, 0, 1));
  // No context holds an array of g: its modes may change, and the kept value stays.
  KILN_EXPECT_OK(nodes_->set_sharing("g", Sharing::kPerStream));
  const std::vector<float> mine(8, 7.0f);
  KILN_ASSERT_OK(write_floats(*nodes_, "g", mine));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, mine);
}

TEST_P(KeptValuesTest, LaterValueFromAnotherContextReplacesAKeptOne) {
  const std::vector<float> first = ramp(8, 0, 1), second = ramp(8, 10, -1);
  run_main(first);
  Run later = run_main(second);  // written after the first context's value was kept
  KILN_ASSERT_OK(later.backend->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, doubled(second));
}

INSTANTIATE_TEST_SUITE_P(Devices, KeptValuesTest, ::testing::Values("cpu", "interp", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::runtime_test
