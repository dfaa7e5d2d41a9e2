// Two streams of one OpenCL device running gemm over one shared parameter, many times and with
// no order between them, as train_moons' shards do: on a device where gemm runs on the host over
// mapped buffers (PoCL's CPU device), both streams' calls map the parameter at once. Every
// product must be right and nothing may crash (it did: a map waiting for PoCL's host queue
// returned an address from a record the other stream's unmap had freed, docs/opencl.md#memory).
// Skips without OpenCL.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr int kRows = 32, kInner = 16, kCols = 16;

// w is a param no routine writes: one array on the device, which both streams read.
constexpr const char kSharedGemmStreamsProgram[] = R"(
param w : f32[16, 16]
param x : f32[32, 16]
param y : f32[32, 16]
param z : f32[32, 16]
routine step {
  call gemm(x, w) -> y
  call gemm(y, w, transpose_b=1) -> z
}
)";

// Small integers, so that every product and sum is exact in f32.
float x_value(int i, int p) { return static_cast<float>((i + 2 * p) % 5 - 2); }
float w_value(int p, int j) { return static_cast<float>((3 * p + j) % 3 - 1); }

TEST(SharedGemmStreamsTest, TwoStreamsMapOneSharedParameter) {
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("opencl");
  if (!device.ok()) GTEST_SKIP() << "no OpenCL device: " << device.status();
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kSharedGemmStreamsProgram));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostTensor w_tensor, nodes->tensor("w"));
  ASSERT_EQ(w_tensor.desc().sharing, Sharing::kShared);
  std::vector<float> x(kRows * kInner), w(kInner * kCols);
  for (int i = 0; i < kRows; ++i) {
    for (int p = 0; p < kInner; ++p) x[i * kInner + p] = x_value(i, p);
  }
  for (int p = 0; p < kInner; ++p) {
    for (int j = 0; j < kCols; ++j) w[p * kCols + j] = w_value(p, j);
  }
  KILN_ASSERT_OK(write_floats(*nodes, "x", x));
  KILN_ASSERT_OK(write_floats(*nodes, "w", w));

  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(*device));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile(program, "step", {.shared = true, .lower = {}}));
  std::vector<ContextRef> contexts;
  std::vector<RoutineRef> steps;
  for (int s = 0; s < 2; ++s) {
    KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
    KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
    KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked linked, backend->link(root, code, "step"));
    contexts.push_back(linked.context);
    steps.push_back(linked.routine);
  }
  // Both streams' runs are scheduled before any has finished; only w's readers meet.
  const int runs = kSanitized ? 100 : 1000;
  for (int r = 0; r < runs; ++r) {
    for (const RoutineRef& step : steps) KILN_ASSERT_OK(step->run());
  }
  KILN_ASSERT_OK(backend->await(wait_limit()));

  // y = x @ w and z = y @ w^T, from the host.
  std::vector<double> y(kRows * kCols, 0.0), z(kRows * kCols, 0.0);
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) {
      for (int p = 0; p < kInner; ++p) y[i * kCols + j] += x_value(i, p) * w_value(p, j);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) {
      for (int p = 0; p < kInner; ++p) z[i * kCols + j] += y[i * kCols + p] * w_value(j, p);
    }
  }
  nodes->set_automatic_transfers(false);
  for (size_t s = 0; s < contexts.size(); ++s) {
    SCOPED_TRACE("stream " + std::to_string(s));
    ASSERT_TRUE(runtime::to_host(contexts[s], "z").ok());
    KILN_ASSERT_OK(backend->await(wait_limit()));
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> got, read_floats(*nodes, "z"));
    ASSERT_EQ(got.size(), z.size());
    for (size_t k = 0; k < z.size(); ++k) ASSERT_EQ(got[k], z[k]) << "z at " << k;
  }
}

}  // namespace
}  // namespace kiln::runtime_test
