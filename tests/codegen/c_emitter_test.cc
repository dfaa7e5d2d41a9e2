// The C emitter's output: golden files for hand-built kernels (KILN_UPDATE_GOLDEN=1 rewrites
// them), warning-free compilation of that output, and the errors of the API.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "base/process.h"
#include "codegen/kernels.h"
#include "kiln/codegen/c_emitter.h"

namespace kiln::codegen_test {
namespace {

namespace fs = std::filesystem;
using codegen::Dialect;
using codegen::EmitOptions;
using codegen::emit_kernels;

const fs::path kSourceDir = KILN_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool update_golden() {
  const char* env = getenv("KILN_UPDATE_GOLDEN");
  return env && std::string(env) == "1";
}

// Compares `text` with tests/codegen/golden/NAME.c, or rewrites that file under
// KILN_UPDATE_GOLDEN=1.
void expect_golden(const std::string& name, const std::string& text) {
  const fs::path path = kSourceDir / "tests" / "codegen" / "golden" / (name + ".c");
  if (update_golden()) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with KILN_UPDATE_GOLDEN=1 to create it";
  EXPECT_EQ(text, read_text(path))
      << "generated code differs from " << path
      << "; if the change is intended, run with KILN_UPDATE_GOLDEN=1 and review the diff";
}

// Compiles `source` as the CPU driver would (kernel_abi.h first) with every warning an error.
void expect_compiles_without_warnings(const std::string& source, const std::string& tag) {
  const char* cc_env = getenv("KILN_CC");
  Result<std::string> cc = find_program(cc_env && *cc_env ? cc_env : "cc");
  if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
  std::string dir_template = (fs::temp_directory_path() / "kiln-codegen-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_template.data()), nullptr);
  const fs::path dir = dir_template;
  const fs::path file = dir / (tag + ".c");
  {
    std::ofstream out(file, std::ios::binary);
    out << read_text(kSourceDir / "include" / "kiln" / "kernel_abi.h") << "\n" << source;
  }
  Result<ProcessResult> run = run_process(
      {*cc, "-std=gnu11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-c", "-o",
       (dir / (tag + ".o")).string(), file.string()},
      120000);
  std::error_code ec;
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(!run->signalled && run->exit_code == 0) << tag << ":\n" << run->output;
  fs::remove_all(dir, ec);
}

// Golden comparison plus the warning check, for one source.
void check_output(const std::string& name, std::span<const ir::Kernel> kernels,
                  const ir::Program* program, const EmitOptions& options = {}) {
  Result<std::string> source = emit_kernels(kernels, program, options);
  ASSERT_TRUE(source.ok()) << source.status();
  expect_golden(name, *source);
  expect_compiles_without_warnings(*source, name);
}

TEST(CEmitterGolden, Elementwise) {
  ir::Program program = elementwise_program();
  std::vector<Kernel> kernels = {elementwise_kernel()};
  check_output("elementwise", kernels, &program);
}

TEST(CEmitterGolden, ElementwiseWithoutProgramOrComments) {
  std::vector<Kernel> kernels = {elementwise_kernel()};
  EmitOptions options;
  options.comments = false;
  check_output("elementwise_bare", kernels, nullptr, options);
}

TEST(CEmitterGolden, ReductionIntoLocalAccumulator) {
  ir::Program program = reduction_program();
  std::vector<Kernel> kernels = reduction_kernels();
  check_output("reduction", kernels, &program);
}

TEST(CEmitterGolden, ParallelSplitWithGuardedLoads) {
  ir::Program program = split_program();
  std::vector<Kernel> kernels = {split_kernel()};
  check_output("parallel_split", kernels, &program);
}

TEST(CEmitterGolden, EveryOp) {
  ir::Program program = all_ops_program();
  std::vector<Kernel> kernels = {all_ops_kernel()};
  check_output("all_ops", kernels, &program);
}

// Language version 3: what each element type's code looks like (c_emitter's other dialects and
// element_type_ops_test.cc run them).
TEST(CEmitterGolden, ElementTypes) {
  ir::Program program = element_types_program();
  std::vector<Kernel> kernels = {element_types_kernel()};
  check_output("element_types", kernels, &program);
}

TEST(CEmitterGolden, CommentsUnusedBindingAndHeapLocals) {
  std::vector<Kernel> kernels = {comments_kernel()};
  check_output("comments", kernels, nullptr);
}

TEST(CEmitterGolden, ConstantsAndOffsetArithmetic) {
  std::vector<Kernel> kernels = {constants_kernel()};
  check_output("constants", kernels, nullptr);
}

TEST(CEmitter, OutputIsDeterministic) {
  ir::Program program = all_ops_program();
  std::vector<Kernel> kernels = {all_ops_kernel(), elementwise_kernel()};
  Result<std::string> a = emit_kernels(kernels, nullptr, {});
  Result<std::string> b = emit_kernels(kernels, nullptr, {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
}

TEST(CEmitter, DialectsOtherThanC) {
  std::vector<Kernel> kernels = {elementwise_kernel(), all_ops_kernel()};
  {
    // CUDA C: extern "C" __global__ kernels of the CUDA kernel ABI, one block per workgroup,
    // nothing included (NVRTC has no system headers), infinities by their bits.
    EmitOptions options;
    options.dialect = Dialect::kCuda;
    Result<std::string> out = emit_kernels(kernels, nullptr, options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NE(out->find("extern \"C\" __global__ void"), std::string::npos) << *out;
    EXPECT_NE(out->find("blockIdx.x"), std::string::npos) << *out;
    EXPECT_NE(out->find("static __device__ __forceinline__"), std::string::npos) << *out;
    EXPECT_EQ(out->find("#include"), std::string::npos) << *out;
    EXPECT_EQ(out->find("INFINITY"), std::string::npos) << *out;
    EXPECT_EQ(out->find("INT32_M"), out->find("KILN_INT32_M") == std::string::npos ? std::string::npos
                                                                                     : out->find("KILN_INT32_M") + 5)
        << *out;
    // C++ keywords and CUDA's names are not kernel names there.
    for (const char* name : {"class", "template", "blockIdx", "__syncthreads"}) {
      std::vector<Kernel> one = {elementwise_kernel()};
      one[0].name = name;
      Result<std::string> refused = emit_kernels(one, nullptr, options);
      ASSERT_FALSE(refused.ok()) << name;
      EXPECT_NE(refused.status().message().find("reserved"), std::string::npos) << refused.status();
    }
  }
  {
    // OpenCL C: a __kernel of the OpenCL kernel ABI; fp64 is enabled only when f64 is used.
    EmitOptions options;
    options.dialect = Dialect::kOpenCL;
    Result<std::string> out = emit_kernels(kernels, nullptr, options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NE(out->find("__kernel void"), std::string::npos) << *out;
    EXPECT_NE(out->find("get_group_id(0)"), std::string::npos) << *out;
    EXPECT_EQ(out->find("cl_khr_fp64"), out->find("double") == std::string::npos
                                            ? std::string::npos
                                            : out->find("cl_khr_fp64"))
        << *out;
  }
  {
    // A cast of f32 to an integer (and f16 / bf16 elements) needs no fp64: the helpers convert
    // in float.
    Kernel k = elementwise_kernel();
    k.nodes = {0, 1, 2};
    k.var_count = 1;
    k.body = ploop(0, 8, {store(1, v(0), ir::lop(Op::kCastI32, DType::kI32, {ir::lload(0, DType::kF32, v(0))})),
                          store(2, v(0), ir::lop(Op::kCastBF16, DType::kBF16, {ir::lload(0, DType::kF32, v(0))}))});
    std::vector<Kernel> one = {k};
    EmitOptions options;
    options.dialect = Dialect::kOpenCL;
    Result<std::string> out = emit_kernels(one, nullptr, options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->find("double"), std::string::npos) << *out;
    EXPECT_EQ(out->find("cl_khr_fp64"), std::string::npos) << *out;
  }
  EXPECT_EQ(codegen::dialect_format(Dialect::kC), "c");
  EXPECT_EQ(codegen::dialect_format(Dialect::kOpenCL), "opencl-c");
  EXPECT_EQ(codegen::dialect_format(Dialect::kCuda), "cuda-c");
}

TEST(CEmitter, MaxWorkgroups) {
  EXPECT_EQ(codegen::max_workgroups(elementwise_kernel()), 8);
  EXPECT_EQ(codegen::max_workgroups(split_kernel()), kSplitExtent);
  EXPECT_EQ(codegen::max_workgroups(comments_kernel()), 1);
}

// Emits one kernel and expects INVALID_ARGUMENT whose message contains `needle`.
void expect_invalid(const Kernel& kernel, const std::string& needle,
                    const ir::Program* program = nullptr) {
  std::vector<Kernel> kernels = {kernel};
  Result<std::string> out = emit_kernels(kernels, program, {});
  ASSERT_FALSE(out.ok()) << "accepted:\n" << *out;
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status();
  EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status();
}

TEST(CEmitter, RejectsMalformedKernels) {
  Kernel good = elementwise_kernel();
  {
    Kernel k = good;
    k.name = "2bad";
    expect_invalid(k, "not a C identifier");
  }
  {
    Kernel k = good;
    k.name = "kiln_helper";
    expect_invalid(k, "reserved");
  }
  {
    Kernel k = good;
    k.name = "for";
    expect_invalid(k, "reserved");
  }
  {
    std::vector<Kernel> kernels = {good, good};
    Result<std::string> out = emit_kernels(kernels, nullptr, {});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("two kernels"), std::string::npos) << out.status();
  }
  {
    Kernel k = good;
    k.nodes = {0, 2};  // node 1 is loaded but not bound
    expect_invalid(k, "not bound");
  }
  {
    Kernel k = good;
    k.nodes = {0, 1, 1};
    expect_invalid(k, "bound twice");
  }
  {
    Kernel k = good;
    k.var_count = 1;
    expect_invalid(k, "out of range");
  }
  {
    Kernel k = good;
    k.body = nullptr;
    expect_invalid(k, "no body");
  }
  {
    Kernel k = good;
    k.var_count = 2;
    k.body = ploop(0, 4, {store(2, v(1), ir::lconst(DType::kF32, 1))});  // v1 outside its loop
    expect_invalid(k, "outside its loop");
  }
  {
    Kernel k = good;
    k.body = ploop(0, 4, {loop(0, 2, {store(2, v(0), ir::lconst(DType::kF32, 1))})});
    expect_invalid(k, "reused by a nested loop");
  }
  {
    Kernel k = good;
    k.body = ploop(0, 4, {store(2, v(0), ir::lop(Op::kAdd, DType::kF32, {ir::lconst(DType::kF32, 1)}))});
    expect_invalid(k, "takes 2 operands");
  }
  {
    Kernel k = good;
    k.local_count = 1;
    k.body = ploop(0, 4, {local_store(0, i64(0), ir::lconst(DType::kF32, 1))});
    expect_invalid(k, "outside its scope");
  }
  {
    Kernel k = good;
    k.local_count = 1;
    k.body = ploop(0, 4, {local(0, DType::kF32, 1, {local(0, DType::kF32, 1, {})})});
    expect_invalid(k, "declared again");
  }
  {
    Kernel k = good;
    k.local_count = 1;
    k.body = ploop(0, 4, {local(0, DType::kF32, 1, {local_store(0, i64(0), ir::lconst(DType::kI32, 1))})});
    expect_invalid(k, "to local l0");
  }
  {
    Kernel k = good;
    k.local_count = 1;
    k.body = ploop(0, 4, {local(0, DType::kF32, 0, {})});
    expect_invalid(k, "no elements");
  }
  {
    // Loads and stores of one node disagree on its type.
    Kernel k = good;
    k.body = ploop(0, 4, {store(2, v(0), ir::lconst(DType::kF64, 1)),
                          store(0, v(0), ir::lload(2, DType::kF32, v(0)))});
    expect_invalid(k, "different types");
  }
  {
    // The program says f32; the kernel stores i32.
    ir::Program program = elementwise_program();
    Kernel k = good;
    k.body = ploop(0, 4, {store(2, v(0), ir::lconst(DType::kI32, 1))});
    expect_invalid(k, "different types", &program);
  }
  {
    ir::Program program = elementwise_program();
    Kernel k = good;
    k.nodes = {0, 1, 2, 3};
    expect_invalid(k, "not in the program", &program);
  }
}

}  // namespace
}  // namespace kiln::codegen_test
