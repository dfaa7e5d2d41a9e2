// The runtime's user-facing API on the real cpu device: context trees and linking, finalize,
// compiling, node modes, tensors and automatic / explicit host transfers, waiting for streams.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kRuntimeApiProgram[] = R"(
input  x : f32[8]
param  w : f32[8] = uniform(-1, 1)
param  y : f32[8]
output s : f32
routine scale {
  y[i] = x[i] * 2 + w[i]
}
routine total {
  s = sum(y[i])
}
)";

// The program, its node table, a backend over a fresh cpu device with one stream, and the code
// of both routines (shared).
class RuntimeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kRuntimeApiProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program_, 7));
    KILN_ASSERT_OK_AND_ASSIGN(device_, cpu_device());
    KILN_ASSERT_OK_AND_ASSIGN(backend_, Backend::create(device_));
    KILN_ASSERT_OK_AND_ASSIGN(stream_, backend_->new_stream());
    const std::vector<std::string> names = {"scale", "total"};
    KILN_ASSERT_OK_AND_ASSIGN(code_, backend_->compile_batch(program_, names, {.shared = true, .lower = {}}));
    KILN_ASSERT_OK_AND_ASSIGN(root_, backend_->make_context(stream_, nodes_, "root"));
    KILN_ASSERT_OK_AND_ASSIGN(w_, read_floats(*nodes_, "w"));
  }
  void TearDown() override {
    if (backend_) KILN_EXPECT_OK(backend_->await(wait_limit()));
  }

  // 2 * x + w, elementwise.
  std::vector<float> scaled(const std::vector<float>& x) const {
    std::vector<float> y(8);
    for (size_t i = 0; i < 8; ++i) y[i] = x[i] * 2 + w_[i];
    return y;
  }
  static float sum_of(const std::vector<float>& v) { return std::accumulate(v.begin(), v.end(), 0.0f); }

  ir::Program program_;
  std::shared_ptr<NodeTable> nodes_;
  hal::DeviceRef device_;
  std::shared_ptr<Backend> backend_;
  StreamRef stream_;
  CodeRef code_;
  ContextRef root_;
  std::vector<float> w_;  // the host copy of w (its random initializer)
};

TEST_F(RuntimeApiTest, ChildContextSeesItsParentsArrays) {
  EXPECT_FALSE(root_->has_array("y"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  EXPECT_EQ(scale.context->parent(), root_);
  EXPECT_EQ(scale.routine->name(), "scale");
  EXPECT_EQ(scale.routine->context(), scale.context);
  EXPECT_TRUE(scale.context->has_array("x"));
  EXPECT_TRUE(scale.context->has_array("w"));
  EXPECT_TRUE(scale.context->has_array("y"));
  EXPECT_FALSE(scale.context->has_array("s"));
  EXPECT_FALSE(root_->has_array("y")) << "linking allocates in the child, not in the parent";
  EXPECT_EQ(scale.routine->reads(), (std::vector<std::string>{"w", "x"}));
  EXPECT_EQ(scale.routine->writes(), (std::vector<std::string>{"y"}));
  EXPECT_TRUE(scale.routine->merge_node().empty());

  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked total, backend_->link(scale.context, code_, "total"));
  EXPECT_EQ(total.context->parent(), scale.context);
  EXPECT_TRUE(total.context->has_array("y"));
  EXPECT_TRUE(total.context->has_array("s"));
  EXPECT_FALSE(scale.context->has_array("s"));

  // `total` sums the y that `scale` wrote: the parent's array, not one of its own.
  const std::vector<float> x = ramp(8, -1, 0.5f);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK(total.routine->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> s, read_floats(*nodes_, "s"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NEAR(s[0], sum_of(scaled(x)), 1e-5);
}

TEST_F(RuntimeApiTest, LinkingTwoRoutinesIntoOneTreeSharesArrays) {
  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch batch, backend_->link_batch(root_, code_));
  ASSERT_EQ(batch.routines.size(), 2u);
  EXPECT_EQ(batch.routines[0]->name(), "scale");
  EXPECT_EQ(batch.routines[1]->name(), "total");
  EXPECT_EQ(batch.routines[0]->context(), batch.context);
  EXPECT_EQ(batch.routines[1]->context(), batch.context);
  const std::vector<float> x = ramp(8, 3, -0.25f);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
  KILN_ASSERT_OK(batch.routines[0]->run());
  KILN_ASSERT_OK(batch.routines[1]->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> s, read_floats(*nodes_, "s"));
  EXPECT_NEAR(s[0], sum_of(scaled(x)), 1e-5);
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x));

  // Siblings do not share per-stream arrays: `total` linked beside `scale` sums its own y,
  // uploaded from the host copy when it was linked.
  KILN_ASSERT_OK(write_floats(*nodes_, "y", std::vector<float>(8, 0.0f)));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked total, backend_->link(root_, code_, "total"));
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK(total.routine->run());
  KILN_ASSERT_OK_AND_ASSIGN(s, read_floats(*nodes_, "s"));
  EXPECT_EQ(s[0], 0.0f);
}

// A routine keeps what it resolved and recorded per context and replays it: run alternately in
// its own context and in a sibling's, each run uses that context's arrays; finalizing the
// sibling leaves its own context running.
TEST_F(RuntimeApiTest, RunsAlternatelyInTwoContextsUseEachContextsArrays) {
  const std::vector<float> x0 = ramp(8, 1, 1), x1 = ramp(8, -4, 0.5f);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x0));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked a, backend_->link(root_, code_, "scale"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked b, backend_->link(root_, code_, "scale"));
  nodes_->set_automatic_transfers(false);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x1));
  KILN_ASSERT_OK(runtime::from_host(b.context, "x").status());  // b's x is x1, a's stays x0
  for (int round = 0; round < 3; ++round) {
    KILN_ASSERT_OK(a.routine->run_in(b.context));
    KILN_ASSERT_OK(a.routine->run());
  }
  KILN_ASSERT_OK(runtime::to_host(a.context, "y").status());
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x0));
  KILN_ASSERT_OK(runtime::to_host(b.context, "y").status());
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x1));

  b.context->finalize();
  EXPECT_TRUE(has_error(a.routine->run_in(b.context), StatusCode::kFailedPrecondition, {"finalized"}));
  KILN_EXPECT_OK(a.routine->run());
}

TEST_F(RuntimeApiTest, FinalizeFreesOwnedArraysOnceAndRefusesLaterUse) {
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked total, backend_->link(scale.context, code_, "total"));
  const std::vector<float> x = ramp(8, 0.5f, 1);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
  // Work already scheduled completes after its context is finalized.
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK(total.routine->run());
  EXPECT_FALSE(scale.context->finalized());
  scale.context->finalize();
  EXPECT_TRUE(scale.context->finalized());
  scale.context->finalize();  // a second call does nothing
  EXPECT_TRUE(scale.context->finalized());
  EXPECT_FALSE(root_->finalized());
  EXPECT_FALSE(total.context->finalized());
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> s, read_floats(*nodes_, "s"));
  EXPECT_NEAR(s[0], sum_of(scaled(x)), 1e-5);

  // Its arrays are gone: y's mode may change again (it is refused while a device array exists).
  EXPECT_FALSE(scale.context->has_array("y"));
  KILN_EXPECT_OK(nodes_->set_hosted_kind("y", HostedKind::kChangedOnDevices));
  KILN_EXPECT_OK(nodes_->set_sharing("x", Sharing::kPerStream));

  const StatusCode kRefused = StatusCode::kFailedPrecondition;
  EXPECT_TRUE(has_error(backend_->link(scale.context, code_, "total").status(), kRefused,
                        {"root/scale", "finalized"}));
  EXPECT_TRUE(has_error(backend_->link_batch(total.context, code_).status(), kRefused, {"finalized"}));
  EXPECT_TRUE(has_error(scale.routine->run(), kRefused, {"scale", "finalized"}));
  EXPECT_TRUE(has_error(total.routine->run(), kRefused, {"descends", "root/scale"}));
  EXPECT_TRUE(has_error(runtime::from_host(scale.context, "x").status(), kRefused, {"finalized"}));
  EXPECT_TRUE(has_error(runtime::to_host(scale.context, "y").status(), kRefused, {"finalized"}));
  EXPECT_TRUE(has_error(runtime::from_host(total.context, "s").status(), kRefused, {"finalized"}));
  EXPECT_TRUE(has_error(runtime::to_host(total.context, "s").status(), kRefused, {"finalized"}));

  // The parent stays usable; transfers with the finalized context on either side are refused.
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked again, backend_->link(root_, code_, "scale"));
  KILN_EXPECT_OK(again.routine->run());
  for (MergeMode mode : {MergeMode::kNo, MergeMode::kCopy, MergeMode::kStreaming}) {
    EXPECT_TRUE(has_error(runtime::device_to_device("y", mode, again.context, scale.context).status(),
                          kRefused, {"finalized"}));
    EXPECT_TRUE(has_error(runtime::device_to_device("y", mode, total.context, again.context).status(),
                          kRefused, {"finalized"}));
  }
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x));
}

TEST_F(RuntimeApiTest, UnknownRoutinesAreNotFound) {
  EXPECT_TRUE(has_error(backend_->compile(program_, "nope").status(), StatusCode::kNotFound, {"'nope'"}));
  const std::vector<std::string> names = {"scale", "nope"};
  EXPECT_TRUE(has_error(backend_->compile_batch(program_, names).status(), StatusCode::kNotFound, {"'nope'"}));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef scale_only, backend_->compile(program_, "scale"));
  EXPECT_EQ(scale_only->routine_names(), std::vector<std::string>{"scale"});
  EXPECT_TRUE(has_error(backend_->link(root_, scale_only, "total").status(), StatusCode::kNotFound, {"'total'"}));
}

TEST_F(RuntimeApiTest, CodeThatIsNotSharedBelongsToItsBackend) {
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef other_device, cpu_device());
  for (const hal::DeviceRef& device : {device_, other_device}) {
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> other, Backend::create(device));
    KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, other->new_stream());
    KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, other->make_context(stream, nodes_));
    KILN_ASSERT_OK_AND_ASSIGN(CodeRef mine, backend_->compile(program_, "scale", {.shared = false, .lower = {}}));
    EXPECT_FALSE(mine->shared());
    EXPECT_TRUE(has_error(other->link(root, mine, "scale").status(), StatusCode::kInvalidArgument,
                          {"shared"}));
    // On its own backend it links; shared code links anywhere.
    KILN_EXPECT_OK(backend_->link(root_, mine, "scale").status());
    KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked linked, other->link(root, code_, "scale"));
    const std::vector<float> x = ramp(8, 2, 2);
    KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
    KILN_ASSERT_OK(linked.routine->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
    EXPECT_EQ(y, scaled(x));
    // A stream of one backend cannot root a context of another.
    EXPECT_TRUE(has_error(backend_->make_context(stream, nodes_).status(), StatusCode::kInvalidArgument,
                          {"another backend"}));
    KILN_ASSERT_OK(other->await(wait_limit()));
  }
}

TEST_F(RuntimeApiTest, NodeWhoseDtypeOrShapeDiffersIsRefused) {
  // Same names, another shape: refused against the node table.
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program narrow, parse(R"(
input  x : f32[4]
param  w : f32[4]
param  y : f32[4]
routine scale {
  y[i] = x[i] * 2 + w[i]
}
)", "narrow.kiln"));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef narrow_code, backend_->compile(narrow, "scale", {.shared = true, .lower = {}}));
  EXPECT_TRUE(has_error(backend_->link(root_, narrow_code, "scale").status(), StatusCode::kInvalidArgument,
                        {"f32[4]", "f32[8]", "node table"}));

  // y of another dtype: refused against the table, and against a context that has y already.
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program wide, parse(R"(
input  x : f32[8]
param  w : f32[8]
param  y : f64[8]
routine scale {
  y[i] = x[i] * 2 + w[i]
}
)", "wide.kiln"));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef wide_code, backend_->compile(wide, "scale", {.shared = true, .lower = {}}));
  EXPECT_TRUE(has_error(backend_->link(root_, wide_code, "scale").status(), StatusCode::kInvalidArgument,
                        {"'y'", "f64[8]", "f32[8]", "node table"}));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  EXPECT_TRUE(has_error(backend_->link(scale.context, wide_code, "scale").status(),
                        StatusCode::kInvalidArgument, {"'y'", "f64[8]", "f32[8]", "context"}));
  // The refused links leave the tree usable.
  KILN_EXPECT_OK(scale.routine->run());
}

TEST_F(RuntimeApiTest, NodeModesAreCheckedAndFixedOnceLinked) {
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<runtime::Node> x, nodes_->find("x"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<runtime::Node> w, nodes_->find("w"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<runtime::Node> y, nodes_->find("y"));
  // Defaults: inputs volatile, a param no routine writes shared, the rest per stream.
  EXPECT_EQ(x->desc().hosted, HostedKind::kVolatile);
  EXPECT_EQ(x->desc().sharing, Sharing::kPerStream);
  EXPECT_EQ(w->desc().sharing, Sharing::kShared);
  EXPECT_FALSE(w->desc().written_by_routines);
  EXPECT_EQ(y->desc().hosted, HostedKind::kChangedOnDevices);
  EXPECT_EQ(y->desc().sharing, Sharing::kPerStream);
  EXPECT_TRUE(y->desc().written_by_routines);
  EXPECT_EQ(y->desc().bytes, 32u);
  EXPECT_TRUE(has_error(nodes_->find("nope").status(), StatusCode::kNotFound, {"'nope'"}));
  EXPECT_TRUE(has_error(nodes_->set_sharing("nope", Sharing::kShared), StatusCode::kNotFound, {"'nope'"}));

  EXPECT_TRUE(has_error(nodes_->set_hosted_kind("y", HostedKind::kConstant), StatusCode::kInvalidArgument,
                        {"'y'", "writes"}));
  EXPECT_EQ(y->desc().hosted, HostedKind::kChangedOnDevices);
  KILN_EXPECT_OK(nodes_->set_hosted_kind("w", HostedKind::kConstant));
  KILN_EXPECT_OK(nodes_->set_sharing("x", Sharing::kShared));
  KILN_EXPECT_OK(nodes_->set_sharing("x", Sharing::kPerStream));

  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  const StatusCode kRefused = StatusCode::kFailedPrecondition;
  EXPECT_TRUE(has_error(nodes_->set_sharing("y", Sharing::kShared), kRefused, {"'y'", "device array"}));
  EXPECT_TRUE(has_error(nodes_->set_hosted_kind("x", HostedKind::kChangedOnDevices), kRefused, {"'x'"}));
  EXPECT_TRUE(has_error(nodes_->set_sharing("w", Sharing::kPerStream), kRefused, {"'w'"}));
  EXPECT_EQ(y->desc().sharing, Sharing::kPerStream);
  EXPECT_EQ(x->desc().hosted, HostedKind::kVolatile);
  // s has no array yet (no linked routine touches it).
  KILN_EXPECT_OK(nodes_->set_sharing("s", Sharing::kPerStream));
}

TEST_F(RuntimeApiTest, TensorSizesMustMatch) {
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostTensor y, nodes_->tensor("y"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostTensor s, nodes_->tensor("s"));
  EXPECT_EQ(y.desc().name, "y");
  std::vector<std::byte> small(31), large(33), exact(32);
  EXPECT_TRUE(has_error(y.read(small), StatusCode::kInvalidArgument, {"'y'", "32", "31"}));
  EXPECT_TRUE(has_error(y.read(large), StatusCode::kInvalidArgument, {"'y'", "33"}));
  EXPECT_TRUE(has_error(y.write(small), StatusCode::kInvalidArgument, {"'y'", "31"}));
  EXPECT_TRUE(has_error(y.write_from(std::vector<float>(9, 1.0f)), StatusCode::kInvalidArgument, {"36"}));
  EXPECT_TRUE(has_error(s.read_as<double>().status(), StatusCode::kInvalidArgument));
  // Same byte count, other element type: refused, naming both types.
  EXPECT_TRUE(has_error(y.read_as<int32_t>(wait_limit()).status(), StatusCode::kInvalidArgument, {"'y'", "f32", "i32"}));
  EXPECT_TRUE(has_error(y.write_from(std::vector<int32_t>(8, 1)), StatusCode::kInvalidArgument, {"'y'", "f32", "i32"}));
  KILN_EXPECT_OK(y.read(exact, wait_limit()));
  KILN_EXPECT_OK(y.write(exact));
  EXPECT_TRUE(has_error(nodes_->tensor("nope").status(), StatusCode::kNotFound, {"'nope'"}));
}

TEST_F(RuntimeApiTest, AutomaticHostTransfers) {
  EXPECT_TRUE(nodes_->automatic_transfers());
  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch batch, backend_->link_batch(root_, code_));
  const runtime::RoutineRef& scale = batch.routines[0];
  // A host write is uploaded before the next routine that reads it; the routine's result is
  // copied back when the host reads it.
  const std::vector<float> x1 = ramp(8, 1, 1);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x1));
  KILN_ASSERT_OK(scale->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x1));
  // The bytes are taken when the routine is scheduled: a later host write does not change them.
  const std::vector<float> x2 = ramp(8, -4, 0.75f);
  const std::vector<float> x3 = ramp(8, 100, 3);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x2));
  KILN_ASSERT_OK(scale->run());
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x3));
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x2));
  KILN_ASSERT_OK(scale->run());
  KILN_ASSERT_OK(batch.routines[1]->run());
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, scaled(x3));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> s, read_floats(*nodes_, "s"));
  EXPECT_NEAR(s[0], sum_of(scaled(x3)), 1e-4);
  // A host write of a node routines write replaces the device data for the next reader.
  KILN_ASSERT_OK(write_floats(*nodes_, "y", std::vector<float>(8, 0.25f)));
  KILN_ASSERT_OK(batch.routines[1]->run());
  KILN_ASSERT_OK_AND_ASSIGN(s, read_floats(*nodes_, "s"));
  EXPECT_EQ(s[0], 2.0f);
}

TEST_F(RuntimeApiTest, ExplicitTransfersWhenAutomaticIsOff) {
  nodes_->set_automatic_transfers(false);
  EXPECT_FALSE(nodes_->automatic_transfers());
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked scale, backend_->link(root_, code_, "scale"));
  // Linking uploaded the host copies: nothing to move either way.
  KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::from_host(scale.context, "x"));
  EXPECT_FALSE(moved);
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::to_host(scale.context, "y"));
  EXPECT_FALSE(moved);

  // The routine sees the device's x (zeros), not the host's new one; the host sees its own y.
  const std::vector<float> x = ramp(8, 1.5f, -0.5f);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK(stream_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, std::vector<float>(8, 0.0f));
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::to_host(scale.context, "y"));
  EXPECT_TRUE(moved);
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, w_);
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::to_host(scale.context, "y"));
  EXPECT_FALSE(moved);

  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::from_host(scale.context, "x"));
  EXPECT_TRUE(moved);
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::from_host(scale.context, "x"));
  EXPECT_FALSE(moved);
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::to_host(scale.context, "y"));
  EXPECT_TRUE(moved);
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));  // waits for the download
  EXPECT_EQ(y, scaled(x));

  // A host write of y after the device wrote it is newer than the device's y: to_host must not
  // bring the older device data back over it.
  KILN_ASSERT_OK(scale.routine->run());
  KILN_ASSERT_OK(stream_->await(wait_limit()));
  // A host write of y is not uploaded by itself either.
  KILN_ASSERT_OK(write_floats(*nodes_, "y", std::vector<float>(8, 9.0f)));
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::to_host(scale.context, "y"));
  EXPECT_FALSE(moved) << "the host copy is newer than the device's";
  KILN_ASSERT_OK_AND_ASSIGN(y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, std::vector<float>(8, 9.0f));
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::from_host(scale.context, "y"));
  EXPECT_TRUE(moved);
}

TEST_F(RuntimeApiTest, AwaitAndIdle) {
  KILN_EXPECT_OK(stream_->await(Timeout::immediate()));
  EXPECT_TRUE(stream_->is_idle());
  EXPECT_TRUE(backend_->is_idle());
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef second, backend_->new_stream("second"));
  EXPECT_EQ(second->name(), "second");
  EXPECT_EQ(second->ordinal(), 1);
  EXPECT_EQ(stream_->ordinal(), 0);
  EXPECT_EQ(stream_->name(), device_->info().name + "/s0");
  EXPECT_EQ(backend_->streams(), (std::vector<StreamRef>{stream_, second}));
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root2, backend_->make_context(second, nodes_));
  EXPECT_EQ(root2->label(), "second");

  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch a, backend_->link_batch(root_, code_));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch b, backend_->link_batch(root2, code_));
  for (int i = 0; i < 50; ++i) {
    for (const auto& r : a.routines) KILN_ASSERT_OK(r->run());
    for (const auto& r : b.routines) KILN_ASSERT_OK(r->run());
  }
  KILN_ASSERT_OK(stream_->await(wait_limit()));
  EXPECT_TRUE(stream_->is_idle());
  KILN_ASSERT_OK(backend_->await(wait_limit()));
  EXPECT_TRUE(backend_->is_idle());
  EXPECT_TRUE(second->is_idle());
  KILN_EXPECT_OK(backend_->await(Timeout::immediate()));
}

// This process's resident memory (/proc/self/statm), in bytes.
size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &pages, &resident);
  std::fclose(f);
  return read == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// A node table holds a host copy of every node, but one of zeros nobody wrote takes address
// space, not memory: 200 intermediates of 2 MiB (400 MiB) add far less than that to the
// process's resident memory until they are written. (Writing the zeros made an imported
// DenseNet-121 take 500 MiB instead of 140.)
TEST(RuntimeApi, HostCopiesOfZerosTakeNoMemoryUntilWritten) {
  std::string text = "input x : f32[4]\noutput y : f32[4]\n";
  for (int i = 0; i < 200; ++i) text += "tensor t" + std::to_string(i) + " : f32[512, 1024]\n";
  text += "t0[i, j] = x[0] * 2\ny[i] = x[i] + t0[0, 0]\n";
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(text));
  const size_t before = resident_bytes();
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program, 7));
  const size_t grown = resident_bytes() - std::min(before, resident_bytes());
#ifndef KILN_SANITIZED  // a sanitizer's allocator writes shadow memory for every allocation
  EXPECT_LT(grown, size_t{64} << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
#endif
  // They read as zeros, and hold what is written.
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostTensor t, nodes->tensor("t199"));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> zeros, t.read_as<float>());
  EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0.0f; }));
  std::vector<float> ramp(512 * 1024);
  std::iota(ramp.begin(), ramp.end(), 0.0f);
  KILN_ASSERT_OK(t.write(std::as_bytes(std::span(ramp))));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> back, t.read_as<float>());
  EXPECT_EQ(back, ramp);
}

TEST(RuntimeApi, CompilerFailureIsAStatusAndLeavesTheContextUsable) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kRuntimeApiProgram));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program));
  hal::DeviceOptions options;
  options.c_compiler = "kiln-runtime-test-no-such-compiler";
  options.cache_dir = "";  // nothing cached: the compiler must run
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device(options));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
  // Shared code is built when compiled; other code when first linked.
  const Status shared = backend->compile(program, "scale", {.shared = true, .lower = {}}).status();
  EXPECT_FALSE(shared.ok());
  EXPECT_NE(shared.message().find("kiln-runtime-test-no-such-compiler"), std::string::npos) << shared;
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef lazy, backend->compile(program, "scale"));
  const Status linked = backend->link(root, lazy, "scale").status();
  EXPECT_FALSE(linked.ok());
  EXPECT_NE(linked.message().find("kiln-runtime-test-no-such-compiler"), std::string::npos) << linked;
  EXPECT_FALSE(root->finalized());
  EXPECT_FALSE(root->has_array("y"));
  KILN_EXPECT_OK(backend->await(wait_limit()));
}

}  // namespace
}  // namespace kiln::runtime_test
