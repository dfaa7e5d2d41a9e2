// The runtime's errors: each misuse is a clear status whose message names the node, routine,
// stream or context involved, and a refused action schedules nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kRuntimeErrorsProgram[] = R"(
param g : f32[8]
param h : f32[4]
routine grad {
  g[i] = g[i] + 1
}
routine merge_g {
  g[i] += g.merge[i]
}
routine merge_h {
  h[i] += h.merge[i]
}
)";

// One program on a backend with two streams and a trace; a context per stream with every
// routine linked.
class RuntimeErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kRuntimeErrorsProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program_));
    KILN_ASSERT_OK_AND_ASSIGN(device_, cpu_device());
    trace_ = std::make_shared<runtime::Trace>();
    KILN_ASSERT_OK_AND_ASSIGN(backend_, Backend::create(device_, {.max_workgroups = 0, .trace = trace_, .value_trace = nullptr}));
    for (int s = 0; s < 2; ++s) {
      KILN_ASSERT_OK_AND_ASSIGN(streams_[s], backend_->new_stream());
      KILN_ASSERT_OK_AND_ASSIGN(roots_[s], backend_->make_context(streams_[s], nodes_, "shard" + std::to_string(s)));
    }
    std::vector<std::string> names;
    for (const ir::Routine& r : program_.routines) names.push_back(r.name);
    KILN_ASSERT_OK_AND_ASSIGN(code_, backend_->compile_batch(program_, names, {.shared = true, .lower = {}}));
  }
  void TearDown() override {
    if (backend_) KILN_EXPECT_OK(backend_->await(wait_limit()));
  }

  // Links every routine into the root of stream `s`.
  void link_all(int s) {
    KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch batch, backend_->link_batch(roots_[s], code_));
    contexts_[s] = batch.context;
    for (const RoutineRef& r : batch.routines) routines_[s][r->name()] = r;
  }
  int trace_count(const std::string& name) const {
    int n = 0;
    for (const runtime::Trace::Event& e : trace_->events()) n += e.name == name;
    return n;
  }

  ir::Program program_;
  std::shared_ptr<NodeTable> nodes_;
  hal::DeviceRef device_;
  std::shared_ptr<runtime::Trace> trace_;
  std::shared_ptr<Backend> backend_;
  StreamRef streams_[2];
  ContextRef roots_[2];
  CodeRef code_;
  ContextRef contexts_[2];
  std::map<std::string, RoutineRef> routines_[2];
};

TEST_F(RuntimeErrorsTest, MergeBufferHoldingAnotherNodeOrNothing) {
  const std::vector<float> g0 = ramp(8, 1, 1);
  KILN_ASSERT_OK(write_floats(*nodes_, "g", g0));
  link_all(0);
  link_all(1);
  const RoutineRef& merge_g = routines_[1].at("merge_g");
  EXPECT_EQ(merge_g->merge_node(), "g");
  EXPECT_EQ(merge_g->reads(), std::vector<std::string>{"g"}) << "the merge buffer is not a node";
  const std::string stream = "'" + streams_[1]->name() + "'";
  EXPECT_TRUE(has_error(merge_g->run(), StatusCode::kFailedPrecondition,
                        {"'merge_g'", "g.merge", stream, "holds nothing"}));

  for (MergeMode mode : {MergeMode::kCopy, MergeMode::kStreaming}) {
    KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::device_to_device("h", mode, contexts_[1], contexts_[0]));
    EXPECT_TRUE(moved);
    EXPECT_TRUE(has_error(merge_g->run(), StatusCode::kFailedPrecondition,
                          {"'merge_g'", "g.merge", stream, "holds 'h'"}));
    KILN_EXPECT_OK(routines_[1].at("merge_h")->run());
  }
  // Another stream's merge buffer does not count.
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[0], contexts_[1]).status());
  EXPECT_TRUE(has_error(merge_g->run(), StatusCode::kFailedPrecondition, {"holds 'h'"}));

  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("merge_g"), 0) << "a refused routine is not scheduled";
  EXPECT_EQ(trace_count("merge_h"), 2);

  // The stream did not fail: the right transfer makes the routine run, once.
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(merge_g->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  std::vector<float> want(8);
  for (size_t i = 0; i < 8; ++i) want[i] = 2 * g0[i];
  EXPECT_EQ(g, want);
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("merge_g"), 1);
}

TEST_F(RuntimeErrorsTest, NodeAbsentFromTheContextTreeIsNotFound) {
  link_all(0);
  // A context on stream 1 with merge_h only: it has h, not g.
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked only_h, backend_->link(roots_[1], code_, "merge_h"));
  EXPECT_TRUE(only_h.context->has_array("h"));
  EXPECT_FALSE(only_h.context->has_array("g"));
  const StatusCode kAbsent = StatusCode::kNotFound;
  for (const ContextRef& c : {roots_[0], only_h.context}) {
    EXPECT_TRUE(has_error(runtime::to_host(c, "g").status(), kAbsent, {"'g'", "'" + c->label() + "'"}));
    EXPECT_TRUE(has_error(runtime::from_host(c, "g").status(), kAbsent, {"'g'", "'" + c->label() + "'"}));
  }
  EXPECT_TRUE(has_error(runtime::to_host(contexts_[0], "zzz").status(), kAbsent, {"'zzz'"}));
  for (MergeMode mode : {MergeMode::kNo, MergeMode::kCopy, MergeMode::kStreaming}) {
    // The source lacks it.
    EXPECT_TRUE(has_error(runtime::device_to_device("g", mode, contexts_[0], only_h.context).status(),
                          kAbsent, {"'g'", "'" + only_h.context->label() + "'"}));
  }
  // The destination lacks it: only a copy into its own array needs it there.
  EXPECT_TRUE(has_error(runtime::device_to_device("g", MergeMode::kNo, only_h.context, contexts_[0]).status(),
                        kAbsent, {"'g'", "'" + only_h.context->label() + "'"}));
  // A routine run with the arrays of a tree that lacks one of its nodes.
  EXPECT_TRUE(has_error(routines_[0].at("grad")->run_in(only_h.context), kAbsent, {"'grad'", "'g'"}));
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("grad"), 0);
}

TEST_F(RuntimeErrorsTest, FinalizedContextIsNamed) {
  link_all(0);
  link_all(1);
  contexts_[0]->finalize();
  const std::string name = "'" + contexts_[0]->label() + "'";
  const StatusCode kRefused = StatusCode::kFailedPrecondition;
  EXPECT_TRUE(has_error(routines_[0].at("grad")->run(), kRefused, {"'grad'", name, "finalized"}));
  EXPECT_TRUE(has_error(routines_[1].at("grad")->run_in(contexts_[0]), kRefused, {"'grad'", name}));
  EXPECT_TRUE(has_error(backend_->link(contexts_[0], code_, "grad").status(), kRefused, {name}));
  EXPECT_TRUE(has_error(runtime::to_host(contexts_[0], "g").status(), kRefused, {name}));
  EXPECT_TRUE(has_error(runtime::from_host(contexts_[0], "g").status(), kRefused, {name}));
  EXPECT_TRUE(has_error(runtime::device_to_device("g", MergeMode::kCopy, contexts_[1], contexts_[0]).status(),
                        kRefused, {name}));
  EXPECT_TRUE(has_error(runtime::device_to_device("g", MergeMode::kNo, contexts_[0], contexts_[1]).status(),
                        kRefused, {name}));
  // The other stream's context is untouched.
  KILN_EXPECT_OK(routines_[1].at("grad")->run());
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("grad"), 1);
}

TEST_F(RuntimeErrorsTest, RoutineOfOneDeviceWithAnotherDevicesArrays) {
  link_all(0);
  link_all(1);
  // A second "cpu" device, created separately: its own buffers and queues.
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef other_device, cpu_device());
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> other, Backend::create(other_device));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef other_stream, other->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef other_root, other->make_context(other_stream, nodes_, "elsewhere"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch elsewhere, other->link_batch(other_root, code_));
  const RoutineRef& grad = routines_[0].at("grad");
  EXPECT_TRUE(has_error(grad->run_in(elsewhere.context), StatusCode::kInvalidArgument,
                        {"'grad'", "'" + elsewhere.context->label() + "'"}));
  EXPECT_TRUE(has_error(elsewhere.routines[0]->run_in(contexts_[0]), StatusCode::kInvalidArgument,
                        {"'grad'", "'" + contexts_[0]->label() + "'"}));
  KILN_ASSERT_OK(other->await(wait_limit()));

  // On the same device, a sibling context on another stream is fine: it runs there with that
  // tree's arrays.
  KILN_ASSERT_OK(grad->run_in(contexts_[1]));
  KILN_ASSERT_OK(grad->run_in(contexts_[1]));
  KILN_ASSERT_OK(grad->run());
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[0], contexts_[1]).status());
  KILN_ASSERT_OK(routines_[0].at("merge_g")->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, std::vector<float>(8, 3.0f)) << "1 (stream 0) + 2 (stream 1)";
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("grad"), 3);
}

TEST_F(RuntimeErrorsTest, SecondOwnerOfASharedWrittenNode) {
  KILN_ASSERT_OK(nodes_->set_sharing("g", Sharing::kShared));
  link_all(0);
  link_all(1);
  // Stream 1 writes first and so owns g; stream 0's writer is refused, and nothing runs.
  KILN_ASSERT_OK(routines_[1].at("grad")->run());
  const std::string stream = "'" + streams_[0]->name() + "'";
  EXPECT_TRUE(has_error(routines_[0].at("grad")->run(), StatusCode::kFailedPrecondition,
                        {"'g'", "shared", stream}));
  EXPECT_TRUE(has_error(routines_[1].at("grad")->run_in(contexts_[0]), StatusCode::kFailedPrecondition,
                        {"'g'", stream}));
  KILN_ASSERT_OK(routines_[1].at("grad")->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, std::vector<float>(8, 2.0f)) << "one shared array, written twice by its owner";

  // Host uploads into the shared array do not take ownership, from either stream.
  KILN_ASSERT_OK(write_floats(*nodes_, "g", std::vector<float>(8, 10.0f)));
  KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::from_host(contexts_[0], "g"));
  EXPECT_TRUE(moved);
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::from_host(contexts_[1], "g"));
  EXPECT_FALSE(moved) << "one array: already uploaded";
  KILN_ASSERT_OK(routines_[1].at("grad")->run());
  EXPECT_TRUE(has_error(routines_[0].at("grad")->run(), StatusCode::kFailedPrecondition, {"'g'", stream}));
  KILN_ASSERT_OK_AND_ASSIGN(g, read_floats(*nodes_, "g"));
  EXPECT_EQ(g, std::vector<float>(8, 11.0f));
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_EQ(trace_count("grad"), 3);
}

}  // namespace
}  // namespace kiln::runtime_test
