// A framework's own kernels (Backend::compile_kernels) on the cpu, opencl and cuda devices (cuda
// where a GPU is; their CUDA C builds with NVRTC everywhere it loads): run between
// kiln's routines on one stream, read by another stream, and the errors of describing them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using runtime::KernelAccess;
using runtime::KernelBinding;
using runtime::KernelDispatch;
using runtime::KernelRoutine;
using runtime::KernelSet;

constexpr int kN = 16;

// b is written only by the hand-written kernel; kiln's routines write a before it and read b
// after it.
constexpr const char kOwnKernelsProgram[] = R"(
input  x : f32[16]
param  a : f32[16]
param  b : f32[16]
output y : f32[16]
output z : f32[16]
const  c : f32[16] = 1
routine before {
  a[i] = x[i] * 2
}
routine after {
  y[i] = b[i] + x[i]
}
routine triple {
  z[i] = b[i] * 3
}
)";

// reverse_scale: b[i] = a[n - 1 - i] * constant 0, one workgroup per element; workgroup 0 first
// spins for constant 1 iterations, so that a reader of b that did not wait for the kernel would
// see b before it is written. fail: returns 7. add_merge: b[i] += (b's merge copy)[i], one
// workgroup.
constexpr const char kCKernels[] = R"C(
int reverse_scale(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  const float* a = (const float*)s->bindings[0];
  float* b = (float*)s->bindings[1];
  uint32_t n = (uint32_t)(s->binding_lengths[1] / sizeof(float));
  if (id->x == 0) {
    for (volatile uint32_t k = 0; k < s->constants[1]; ++k) {
    }
  }
  b[id->x] = a[n - 1 - id->x] * (float)s->constants[0];
  return 0;
}
int fail(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) { return 7; }
int add_merge(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  float* b = (float*)s->bindings[0];
  const float* merged = (const float*)s->bindings[1];
  for (uint64_t i = 0; i < s->binding_lengths[0] / sizeof(float); ++i) b[i] += merged[i];
  return 0;
}
)C";

constexpr const char kOpenCLKernels[] = R"CL(
__kernel void reverse_scale(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                            KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  const __global float* a = KILN_BINDING(const float, 0);
  __global float* b = KILN_BINDING(float, 1);
  uint n = (uint)(KILN_BINDING_LENGTH(1) / sizeof(float));
  uint i = (uint)get_group_id(0);
  if (i == 0) {
    for (volatile uint k = 0; k < KILN_CONSTANT(1); ++k) {
    }
  }
  b[i] = a[n - 1 - i] * (float)KILN_CONSTANT(0);
}
__kernel void fail(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  KILN_FAIL(7);
}
__kernel void add_merge(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1)) {
  KILN_ENTRY();
  __global float* b = KILN_BINDING(float, 0);
  const __global float* merged = KILN_BINDING(const float, 1);
  for (ulong i = 0; i < KILN_BINDING_LENGTH(0) / sizeof(float); ++i) b[i] += merged[i];
}
)CL";

// The same kernels in CUDA C: the CUDA kernel ABI has OpenCL's parameters; one thread per block.
constexpr const char kCudaKernels[] = R"CU(
extern "C" __global__ void reverse_scale(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                                         KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  const float* a = KILN_BINDING(const float, 0);
  float* b = KILN_BINDING(float, 1);
  unsigned n = (unsigned)(KILN_BINDING_LENGTH(1) / sizeof(float));
  unsigned i = blockIdx.x;
  if (i == 0) {
    for (volatile unsigned k = 0; k < KILN_CONSTANT(1); ++k) {
    }
  }
  b[i] = a[n - 1 - i] * (float)KILN_CONSTANT(0);
}
extern "C" __global__ void fail(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  KILN_FAIL(7);
}
extern "C" __global__ void add_merge(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1)) {
  KILN_ENTRY();
  float* b = KILN_BINDING(float, 0);
  const float* merged = KILN_BINDING(const float, 1);
  for (unsigned long long i = 0; i < KILN_BINDING_LENGTH(0) / sizeof(float); ++i) b[i] += merged[i];
}
)CU";

std::string format_of(const std::string& device) {
  return device == "opencl" ? "opencl-c" : device == "cuda" ? "cuda-c" : "c";
}

const char* kernels_of(const std::string& device) {
  return device == "opencl" ? kOpenCLKernels : device == "cuda" ? kCudaKernels : kCKernels;
}

KernelBinding binding(const std::string& node, KernelAccess access, std::vector<int64_t> dims = {kN}) {
  KernelBinding b;
  b.node = node;
  b.dtype = ir::DType::kF32;
  b.dims = std::move(dims);
  b.access = access;
  return b;
}

KernelBinding merge_binding(const std::string& node) {
  KernelBinding b = binding(node, KernelAccess::kRead);
  b.merge = true;
  return b;
}

// The kernel set of `device`'s format: routine "reverse" (b = reverse(a) * scale, after `spin`
// iterations), routine "failing" (fail, binding b) and routine "merge_b" (b += b.merge).
KernelSet kernel_set(const std::string& device, uint32_t scale = 3, uint32_t spin = 0) {
  KernelSet set;
  set.source.format = format_of(device);
  set.source.source = kernels_of(device);
  set.source.exports = {{"reverse_scale", 2, 2}, {"fail", 1, 0}, {"add_merge", 2, 0}};
  set.source.label = "framework_kernels";
  KernelDispatch reverse;
  reverse.kernel = "reverse_scale";
  reverse.workgroups = {kN, 1, 1};
  reverse.bindings = {binding("a", KernelAccess::kRead), binding("b", KernelAccess::kWrite)};
  reverse.constants = {scale, spin};
  KernelDispatch fail;
  fail.kernel = "fail";
  fail.bindings = {binding("b", KernelAccess::kReadWrite)};
  KernelRoutine r1;
  r1.name = "reverse";
  r1.dispatches = {reverse};
  KernelRoutine r2;
  r2.name = "failing";
  r2.dispatches = {fail};
  KernelDispatch add_merge;
  add_merge.kernel = "add_merge";
  add_merge.bindings = {binding("b", KernelAccess::kReadWrite), merge_binding("b")};
  KernelRoutine r3;
  r3.name = "merge_b";
  r3.dispatches = {add_merge};
  set.routines = {r1, r2, r3};
  return set;
}

class OwnKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<hal::DriverRef> driver = drivers::builtin_registry().find(GetParam());
    ASSERT_TRUE(driver.ok()) << driver.status();
    if (Status available = (*driver)->availability(); !available.ok()) {
      GTEST_SKIP() << GetParam() << " is not available here: " << available;
    }
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kOwnKernelsProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program_, 3));
    KILN_ASSERT_OK_AND_ASSIGN(device_, drivers::builtin_registry().create_device(GetParam()));
    KILN_ASSERT_OK_AND_ASSIGN(backend_, Backend::create(device_));
    KILN_ASSERT_OK_AND_ASSIGN(stream_, backend_->new_stream());
    KILN_ASSERT_OK_AND_ASSIGN(root_, backend_->make_context(stream_, nodes_, "root"));
    const std::vector<std::string> names = {"before", "after", "triple"};
    KILN_ASSERT_OK_AND_ASSIGN(code_, backend_->compile_batch(program_, names));
  }
  void TearDown() override {
    if (backend_) (void)backend_->await(wait_limit());
  }

  Result<CodeRef> compile(KernelSet set) { return backend_->compile_kernels(program_, std::move(set)); }

  // y = reverse(2x) * scale + x, what before → reverse → after computes.
  static std::vector<float> expected_y(const std::vector<float>& x, float scale) {
    std::vector<float> y(kN);
    for (int i = 0; i < kN; ++i) y[i] = x[kN - 1 - i] * 2 * scale + x[i];
    return y;
  }

  ir::Program program_;
  std::shared_ptr<NodeTable> nodes_;
  hal::DeviceRef device_;
  std::shared_ptr<Backend> backend_;
  StreamRef stream_;
  ContextRef root_;
  CodeRef code_;
};

TEST_P(OwnKernelsTest, RunBetweenKilnRoutinesOnOneStream) {
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam())));
  EXPECT_EQ(kernels->routine_names(), (std::vector<std::string>{"reverse", "failing", "merge_b"}));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked before, backend_->link(root_, code_, "before"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked reverse, backend_->link(before.context, kernels, "reverse"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked after, backend_->link(reverse.context, code_, "after"));
  EXPECT_EQ(reverse.routine->reads(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(reverse.routine->writes(), (std::vector<std::string>{"b"}));
  EXPECT_FALSE(reverse.context->has_array("y"));
  EXPECT_TRUE(reverse.context->has_array("b"));

  // Twice, with new inputs: the second run's x reaches `before` through the automatic upload.
  for (float start : {1.0f, -20.0f}) {
    const std::vector<float> x = ramp(kN, start, 1.5f);
    KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
    KILN_ASSERT_OK(before.routine->run());
    KILN_ASSERT_OK(reverse.routine->run());
    KILN_ASSERT_OK(after.routine->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
    EXPECT_TRUE(same_bits(y, expected_y(x, 3))) << "start " << start;
  }
  KILN_EXPECT_OK(stream_->await(wait_limit()));
}

TEST_P(OwnKernelsTest, TheKernelReadsWhatTheHostWrote) {
  // No kiln routine before it: a is uploaded from the host copy when the kernel runs.
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam(), 5)));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked reverse, backend_->link(root_, kernels, "reverse"));
  const std::vector<float> a = ramp(kN, 0, 1);
  KILN_ASSERT_OK(write_floats(*nodes_, "a", a));
  KILN_ASSERT_OK(reverse.routine->run());
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> b, read_floats(*nodes_, "b"));
  std::vector<float> want(kN);
  for (int i = 0; i < kN; ++i) want[i] = a[kN - 1 - i] * 5;
  EXPECT_TRUE(same_bits(b, want));
}

TEST_P(OwnKernelsTest, AnotherStreamWaitsForTheKernel) {
  // b is a param no kiln routine writes: shared by the device's streams, so the second stream's
  // `triple` reads the array the kernel writes, after it (the kernel spins first).
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam(), 3, 20000000)));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef second, backend_->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef other_root, backend_->make_context(second, nodes_, "other"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked before, backend_->link(root_, code_, "before"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked reverse, backend_->link(before.context, kernels, "reverse"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked triple, backend_->link(other_root, code_, "triple"));
  const std::vector<float> x = ramp(kN, 2, 1);
  KILN_ASSERT_OK(write_floats(*nodes_, "x", x));
  KILN_ASSERT_OK(before.routine->run());
  KILN_ASSERT_OK(reverse.routine->run());
  KILN_ASSERT_OK(triple.routine->run());
  KILN_ASSERT_OK(second->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> z, read_floats(*nodes_, "z"));
  std::vector<float> want(kN);
  for (int i = 0; i < kN; ++i) want[i] = x[kN - 1 - i] * 2 * 3 * 3;
  EXPECT_TRUE(same_bits(z, want));
}

TEST_P(OwnKernelsTest, AFailingKernelFailsItsStream) {
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam())));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked failing, backend_->link(root_, kernels, "failing"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked after, backend_->link(failing.context, code_, "after"));
  KILN_ASSERT_OK(failing.routine->run());
  KILN_ASSERT_OK(after.routine->run());
  const Status status = stream_->await(wait_limit());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), StatusCode::kDeadlineExceeded) << status;
}

TEST_P(OwnKernelsTest, AKernelAddsTheMergeBufferFromAnotherStream) {
  // Stream A (a table of its own, so that its b is another array) computes b = reverse(2x) * 3
  // with a spinning kernel; its b goes into the merge buffer of stream B (the fixture's), whose
  // own kernel adds it to B's b. The transfer (kCopy) or B's kernel (kStreaming) must wait for
  // A's kernel, and A's next write of b for B's kernel: the same semaphores as `b += b.merge`.
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam(), 3, 20000000)));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes_a, NodeTable::create(program_, 3));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream_a, backend_->new_stream());
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root_a, backend_->make_context(stream_a, nodes_a, "A"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked before_a, backend_->link(root_a, code_, "before"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked reverse_a, backend_->link(before_a.context, kernels, "reverse"));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked merge_b, backend_->link(root_, kernels, "merge_b"));
  EXPECT_EQ(merge_b.routine->merge_node(), "b");
  EXPECT_EQ(merge_b.routine->reads(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(merge_b.routine->writes(), (std::vector<std::string>{"b"}));

  // Nothing in B's merge buffer yet: refused, naming the node.
  EXPECT_TRUE(has_error(merge_b.routine->run(), StatusCode::kFailedPrecondition, {"b.merge", "holds nothing"}));

  const std::vector<float> x = ramp(kN, 1, 0.5f);
  const std::vector<float> b0 = ramp(kN, 100, -3);
  KILN_ASSERT_OK(write_floats(*nodes_a, "x", x));
  for (MergeMode mode : {MergeMode::kCopy, MergeMode::kStreaming}) {
    SCOPED_TRACE(mode == MergeMode::kCopy ? "kCopy" : "kStreaming");
    KILN_ASSERT_OK(write_floats(*nodes_, "b", b0));
    KILN_ASSERT_OK(before_a.routine->run());
    KILN_ASSERT_OK(reverse_a.routine->run());  // A's b, after a long spin
    KILN_ASSERT_OK(runtime::device_to_device("b", mode, root_, reverse_a.context).status());
    KILN_ASSERT_OK(merge_b.routine->run());
    KILN_ASSERT_OK(merge_b.routine->run());  // the merge buffer still holds A's b: added again
    // A's next b (zeros, from x = 0) is written after B's kernels read the one before.
    KILN_ASSERT_OK(write_floats(*nodes_a, "x", std::vector<float>(kN, 0.0f)));
    KILN_ASSERT_OK(before_a.routine->run());
    KILN_ASSERT_OK(reverse_a.routine->run());
    KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> b, read_floats(*nodes_, "b"));
    std::vector<float> want(kN);
    for (int i = 0; i < kN; ++i) want[i] = b0[i] + 2 * (x[kN - 1 - i] * 2 * 3);
    EXPECT_TRUE(same_bits(b, want));
    KILN_ASSERT_OK(write_floats(*nodes_a, "x", x));
  }
  KILN_EXPECT_OK(stream_a->await(wait_limit()));
}

TEST_P(OwnKernelsTest, DescriptionErrorsNameTheKernelAndNode) {
  KernelSet unknown_export = kernel_set(GetParam());
  unknown_export.routines[0].dispatches[0].kernel = "no_such_kernel";
  EXPECT_TRUE(has_error(compile(unknown_export).status(), StatusCode::kNotFound,
                        {"no_such_kernel", "reverse", "framework_kernels"}));

  KernelSet unknown_node = kernel_set(GetParam());
  unknown_node.routines[0].dispatches[0].bindings[1].node = "nowhere";
  EXPECT_TRUE(has_error(compile(unknown_node).status(), StatusCode::kNotFound, {"nowhere", "reverse_scale"}));

  KernelSet wrong_shape = kernel_set(GetParam());
  wrong_shape.routines[0].dispatches[0].bindings[0].dims = {4, 4};
  EXPECT_TRUE(has_error(compile(wrong_shape).status(), StatusCode::kInvalidArgument,
                        {"'a'", "reverse_scale", "f32[4, 4]", "f32[16]"}));

  KernelSet wrong_dtype = kernel_set(GetParam());
  wrong_dtype.routines[0].dispatches[0].bindings[0].dtype = ir::DType::kI32;
  EXPECT_TRUE(has_error(compile(wrong_dtype).status(), StatusCode::kInvalidArgument, {"'a'", "i32[16]"}));

  KernelSet missing_binding = kernel_set(GetParam());
  missing_binding.routines[0].dispatches[0].bindings.pop_back();
  EXPECT_TRUE(has_error(compile(missing_binding).status(), StatusCode::kInvalidArgument,
                        {"reverse_scale", "binds 1", "takes 2"}));

  KernelSet missing_constant = kernel_set(GetParam());
  missing_constant.routines[0].dispatches[0].constants.pop_back();
  EXPECT_TRUE(has_error(compile(missing_constant).status(), StatusCode::kInvalidArgument, {"push constants"}));

  KernelSet no_workgroups = kernel_set(GetParam());
  no_workgroups.routines[0].dispatches[0].workgroups = {0, 1, 1};
  EXPECT_TRUE(has_error(compile(no_workgroups).status(), StatusCode::kInvalidArgument, {"workgroup count of 0"}));

  KernelSet repeated = kernel_set(GetParam());
  repeated.routines[1].name = "reverse";
  EXPECT_TRUE(has_error(compile(repeated).status(), StatusCode::kInvalidArgument, {"two routines named 'reverse'"}));

  KernelSet writes_merge = kernel_set(GetParam());
  writes_merge.routines[2].dispatches[0].bindings[1].access = KernelAccess::kReadWrite;
  EXPECT_TRUE(has_error(compile(writes_merge).status(), StatusCode::kInvalidArgument,
                        {"merge_b", "add_merge", "merge buffer of 'b'", "read only"}));

  KernelSet two_merges = kernel_set(GetParam());
  two_merges.routines[2].dispatches[0].bindings[0] = merge_binding("a");
  EXPECT_TRUE(has_error(compile(two_merges).status(), StatusCode::kInvalidArgument, {"add_merge", "two merge buffers"}));

  KernelSet two_nodes = kernel_set(GetParam());
  KernelDispatch second = two_nodes.routines[2].dispatches[0];
  second.bindings[1] = merge_binding("a");
  two_nodes.routines[2].dispatches.push_back(second);
  EXPECT_TRUE(has_error(compile(two_nodes).status(), StatusCode::kInvalidArgument,
                        {"dispatch 1", "merge buffer of 'a'", "that of 'b'", "one node at a time"}));

  KernelSet merge_shape = kernel_set(GetParam());
  merge_shape.routines[2].dispatches[0].bindings[1].dims = {8};
  EXPECT_TRUE(has_error(compile(merge_shape).status(), StatusCode::kInvalidArgument, {"'b'", "f32[8]", "f32[16]"}));

  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam())));
  EXPECT_TRUE(has_error(backend_->link(root_, kernels, "nothing").status(), StatusCode::kNotFound, {"nothing"}));
}

TEST_P(OwnKernelsTest, SourceErrorsComeFromTheDevice) {
  // The other format: refused by the device, naming the format.
  KernelSet other_format = kernel_set(GetParam());
  other_format.source.format = GetParam() == "opencl" ? "c" : "opencl-c";
  EXPECT_TRUE(has_error(compile(other_format).status(), StatusCode::kUnimplemented,
                        {"'" + other_format.source.format + "'", "framework_kernels"}));

  KernelSet broken = kernel_set(GetParam());
  broken.source.source += "\nint this is not a kernel;\n";
  const Status status = compile(broken).status();
  EXPECT_TRUE(has_error(status, StatusCode::kInvalidArgument, {"compiling the kernels of 'framework_kernels'"}));
  const char* compiler = GetParam() == "opencl" ? "clBuildProgram" : GetParam() == "cuda" ? "NVRTC could not build" : "failed";
  EXPECT_NE(status.message().find(compiler), std::string::npos) << status;
}

// The CUDA kernels build for sm_80 and sm_90 wherever NVRTC loads, so that on a GPU the suite
// fails only for what the device does.
TEST(OwnKernelsCudaTest, TheKernelsBuildWithNvrtc) {
  if (Status nvrtc = drivers::check_cuda_arch(80); !nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc;
  for (int arch : {80, 90}) {
    Result<std::string> ptx = drivers::compile_cuda_ptx(kCudaKernels, arch, "framework_kernels");
    ASSERT_TRUE(ptx.ok()) << "sm_" << arch << ": " << ptx.status();
    for (const char* name : {"reverse_scale", "fail", "add_merge"}) {
      EXPECT_NE(ptx->find(std::string(".entry ") + name + "("), std::string::npos) << name << " for sm_" << arch;
    }
  }
}

TEST_P(OwnKernelsTest, LinkChecksTheContextsNodeTable) {
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef kernels, compile(kernel_set(GetParam())));

  // A table whose b has another shape, and one without b.
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program other, parse("param a : f32[16]\nparam b : f32[8]\n"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> other_nodes, NodeTable::create(other));
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef other_root, backend_->make_context(stream_, other_nodes));
  EXPECT_TRUE(has_error(backend_->link(other_root, kernels, "reverse").status(), StatusCode::kInvalidArgument,
                        {"reverse_scale", "'b'", "f32[8]"}));
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program lacking, parse("param a : f32[16]\n"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> lacking_nodes, NodeTable::create(lacking));
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef lacking_root, backend_->make_context(stream_, lacking_nodes));
  EXPECT_TRUE(has_error(backend_->link(lacking_root, kernels, "reverse").status(), StatusCode::kNotFound,
                        {"reverse_scale", "'b'"}));

  // A kernel writing a const node.
  KernelSet writes_const = kernel_set(GetParam());
  writes_const.routines[0].dispatches[0].bindings[1].node = "c";
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef const_writer, compile(writes_const));
  EXPECT_TRUE(has_error(backend_->link(root_, const_writer, "reverse").status(), StatusCode::kInvalidArgument,
                        {"reverse_scale", "'c'", "constant"}));
}

INSTANTIATE_TEST_SUITE_P(Devices, OwnKernelsTest, ::testing::Values("cpu", "opencl", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace kiln::runtime_test
