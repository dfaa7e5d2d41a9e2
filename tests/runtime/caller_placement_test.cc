// Small work on the caller's thread (docs/runtime.md, "Small work on the caller's thread"): a
// routine and the transfers small enough, whose waits are met, are done when the call returns;
// larger ones and a device with max_caller_stores = 0 go through the queue's thread; the results
// are the same either way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

// `small` stores 8 elements; `large` 2^15 (more than the cpu device's 8192).
constexpr const char kCallerPlacementProgram[] = R"(
input  x : f32[8]
output y : f32[8]
input  u : f32[32768]
output v : f32[32768]
routine small {
  y[i] = x[i] * 2 + 1
}
routine large {
  v[i] = u[i] * 3 - 1
}
)";

struct TwoRoutines {
  std::shared_ptr<NodeTable> nodes;
  std::shared_ptr<Backend> backend;
  StreamRef stream;
  RoutineRef small, large;
};

void make(TwoRoutines& s, hal::DeviceOptions options) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kCallerPlacementProgram));
  KILN_ASSERT_OK_AND_ASSIGN(s.nodes, NodeTable::create(program));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device(options));
  KILN_ASSERT_OK_AND_ASSIGN(s.backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(s.stream, s.backend->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, s.backend->make_context(s.stream, s.nodes));
  const std::vector<std::string> names = {"small", "large"};
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, s.backend->compile_batch(program, names, {.shared = true, .lower = {}}));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch linked, s.backend->link_batch(root, code));
  for (const RoutineRef& r : linked.routines) (r->name() == "small" ? s.small : s.large) = r;
}

// Runs both routines three times with new inputs, checking every result. Each round starts with
// the stream idle (what linking scheduled included), so that `small`'s waits are met.
void run_and_check(TwoRoutines& s, bool small_done_at_return) {
  for (int round = 0; round < 3; ++round) {
    KILN_ASSERT_OK(s.backend->await(wait_limit()));
    std::vector<float> x = ramp(8, -4, 1.5f), u = ramp(32768, -500, 0.25f);
    for (float& e : x) e += static_cast<float>(round);
    for (float& e : u) e -= static_cast<float>(round);
    KILN_ASSERT_OK(write_floats(*s.nodes, "x", x));
    KILN_ASSERT_OK(write_floats(*s.nodes, "u", u));
    KILN_ASSERT_OK(s.small->run());
    // The upload of x and the routine both ran on this thread: nothing is left for the stream.
    if (small_done_at_return) {
      EXPECT_TRUE(s.stream->is_idle()) << "round " << round;
    }
    KILN_ASSERT_OK(s.large->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*s.nodes, "y"));
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, read_floats(*s.nodes, "v"));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] * 2 + 1) << i;
    for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(v[i], u[i] * 3 - 1) << i;
  }
}

TEST(CallerPlacement, SmallRoutineIsDoneWhenRunReturns) {
  TwoRoutines s;
  ASSERT_NO_FATAL_FAILURE(make(s, {}));
  ASSERT_GT(s.stream->device()->info().capabilities.max_caller_stores, 8);
  run_and_check(s, true);
}

TEST(CallerPlacement, OffGivesTheSameResultsThroughTheQueue) {
  TwoRoutines s;
  hal::DeviceOptions options;
  options.max_caller_stores = 0;
  ASSERT_NO_FATAL_FAILURE(make(s, options));
  EXPECT_EQ(s.stream->device()->info().capabilities.max_caller_stores, 0);
  run_and_check(s, false);
}

TEST(CallerPlacement, SmallRoutineAfterQueuedWorkWaitsForIt) {
  // `small` comes after `large` on the same stream, which is still queued (too large for the
  // caller): so `small`'s waits are unmet, and it is queued behind it, not run at once.
  TwoRoutines s;
  ASSERT_NO_FATAL_FAILURE(make(s, {}));
  for (int round = 0; round < 20; ++round) {
    std::vector<float> x(8, static_cast<float>(round)), u(32768, static_cast<float>(round));
    KILN_ASSERT_OK(write_floats(*s.nodes, "u", u));
    KILN_ASSERT_OK(s.large->run());
    KILN_ASSERT_OK(write_floats(*s.nodes, "x", x));
    KILN_ASSERT_OK(s.small->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*s.nodes, "y"));
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, read_floats(*s.nodes, "v"));
    ASSERT_EQ(y, std::vector<float>(8, round * 2.0f + 1)) << "round " << round;
    ASSERT_EQ(v, std::vector<float>(32768, round * 3.0f - 1)) << "round " << round;
  }
}

// A batch-1 dense layer: its product is a `gemm` call, whose work kiln knows (256 x 256
// multiply-adds per row), so at B = 1 the routine runs on the caller's thread like generated
// kernels of that size; at B = 64 it goes through the queue. The results are the same.
TEST(CallerPlacement, ASmallProductCallIsDoneWhenRunReturns) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(R"(
size B
input  x : f32[B, 256]
input  w : f32[256, 256]
output y : f32[B, 256]
tensor z : f32[B, 256]
z[n, j] = sum(x[n, i] * w[i, j])
y[n, j] = relu(z[n, j])
)"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device());
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile(program, "main"));
  ASSERT_EQ(code->lowered().routines.at(0).calls.size(), 1u) << "the product became a gemm call";
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked linked, backend->link(root, code, "main"));
  // w = identity scaled by 2: y = relu(2x).
  std::vector<float> w(256 * 256, 0.0f);
  for (size_t i = 0; i < 256; ++i) w[i * 256 + i] = 2.0f;
  KILN_ASSERT_OK(nodes->tensor("w")->write(std::as_bytes(std::span<const float>(w)), {256, 256}));
  for (int64_t b : {int64_t{1}, int64_t{64}, int64_t{1}}) {
    for (int round = 0; round < 3; ++round) {
      KILN_ASSERT_OK(backend->await(wait_limit()));  // every wait met: w's upload included
      std::vector<float> x = ramp(static_cast<size_t>(b) * 256, -100, 0.75f + round);
      KILN_ASSERT_OK(nodes->tensor("x")->write(std::as_bytes(std::span<const float>(x)), {b, 256}));
      KILN_ASSERT_OK(linked.routine->run());
      if (b == 1 && round > 0) {  // the first run at a size records its steps, on the caller too
        EXPECT_TRUE(stream->is_idle()) << "B = 1, round " << round << ": not run on the caller's thread";
      }
      KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, nodes->tensor("y")->read_as<float>());
      ASSERT_EQ(y.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::max(0.0f, 2 * x[i])) << "B = " << b << " at " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::runtime_test
