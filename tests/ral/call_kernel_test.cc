// Call statements as generated C: the kernel that the CPU device builds for a `call` reaches the
// runtime only through the RAL context in its dispatch state. Built here by the system C
// compiler from what codegen emits for a bound call, it names no kiln symbol it needs (nm -D,
// ldd), passes its tensors as memrefs and its attributes with their exact values, and a failing
// function comes back as the function's status.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/process.h"
#include "common/temp_dir.h"
#include "kiln/codegen/call_kernel.h"
#include "kiln/kernel_abi.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/bound_call.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::ral {
namespace {

// y = x * factor + shift; refuses a factor of 0. The attributes of a host function arrive as f64.
Status affine(ExecutionContext*, MemRef<float, 2> x, MemRef<float, 2> y, double factor, double shift) {
  if (factor == 0) return invalid_argument_error("a factor of 0 is refused");
  if (x.size(0) != y.size(0) || x.size(1) != y.size(1)) return invalid_argument_error("shapes differ");
  for (int64_t i = 0; i < x.size(0) * x.size(1); ++i) y.data[i] = static_cast<float>(x.data[i] * factor + shift);
  return Status();
}
KILN_RAL_API("call_kernel_affine", "cpu", &affine);

class CallKernelTest : public ::testing::Test {
 protected:
  // Builds the call kernel of the program's one call statement into a shared object.
  void build(const std::string& program_text) {
    Result<std::string> cc = find_program("cc");
    if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
    Result<ir::Program> program = lang::parse_program(program_text, "call.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    const ir::Call* call = nullptr;
    for (const ir::Routine& r : program->routines) {
      for (const ir::Call& c : r.calls) call = &c;
    }
    ASSERT_NE(call, nullptr);
    Result<BoundCall> bound = BoundCall::bind(*call, *program, 0, "cpu", Registry::global());
    ASSERT_TRUE(bound.ok()) << bound.status();
    const codegen::CallKernel kernel = bound->kernel("kiln_call_0_0");
    Result<std::string> text = codegen::emit_call_kernels({&kernel, 1});
    ASSERT_TRUE(text.ok()) << text.status();
    source_ = "#include \"kiln/kernel_abi.h\"\n" + *text;
    const std::string path = dir_.file("call.c");
    std::ofstream(path) << source_;
    so_ = dir_.file("call.so");
    Result<ProcessResult> built = run_process({*cc, "-std=gnu11", "-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-I",
                                               std::string(KILN_SOURCE_DIR) + "/include", "-o", so_, path},
                                              120000);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_EQ(built->exit_code, 0) << built->output << "\n" << source_;
    handle_ = dlopen(so_.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    fn_ = reinterpret_cast<kiln_kernel_fn_t>(dlsym(handle_, "kiln_call_0_0"));
    ASSERT_NE(fn_, nullptr);
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  // Runs workgroup 0 with two f32[2, 3] bindings and `context`.
  int run(float* x, float* y, void* context) {
    void* bindings[2] = {x, y};
    const size_t lengths[2] = {6 * sizeof(float), 6 * sizeof(float)};
    kiln_dispatch_state_t state{};
    state.abi_version = KILN_KERNEL_ABI_VERSION;
    state.workgroup_count[0] = state.workgroup_count[1] = state.workgroup_count[2] = 1;
    state.binding_count = 2;
    state.bindings = bindings;
    state.binding_lengths = lengths;
    state.context = context;
    const kiln_workgroup_id_t id{0, 0, 0};
    return fn_(&state, &id);
  }

  static constexpr const char* kProgram =
      "input x : f32[2, 3]\noutput y : f32[2, 3]\ncall call_kernel_affine(x, factor=0.1, shift=-3) -> y\n";
  test::TempDir dir_{"kiln-call-kernel"};
  std::string source_, so_;
  void* handle_ = nullptr;
  kiln_kernel_fn_t fn_ = nullptr;
};

TEST_F(CallKernelTest, TheKernelCallsTheFunctionThroughTheContext) {
  build(kProgram);
  if (!fn_) return;
  EXPECT_NE(source_.find("\"call_kernel_affine___cpu___pvoid_m2df32_m2df32_f64_f64___void\""), std::string::npos)
      << source_;
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {};
  Context context("cpu");
  ExecutionContext execution(context);
  ASSERT_EQ(run(x, y, execution.abi()), 0) << execution.status();
  // 0.1 reaches the function as the double 0.1, not a rounded print of it.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], static_cast<float>(x[i] * 0.1 + -3.0)) << i;
  EXPECT_TRUE(execution.finish().ok());
}

TEST_F(CallKernelTest, AFailureIsTheFunctionsStatus) {
  build("input x : f32[2, 3]\noutput y : f32[2, 3]\ncall call_kernel_affine(x, factor=0, shift=1) -> y\n");
  if (!fn_) return;
  float x[6] = {}, y[6] = {};
  Context context("cpu");
  ExecutionContext execution(context);
  EXPECT_NE(run(x, y, execution.abi()), 0);
  EXPECT_EQ(execution.status().message(), "RAL function 'call_kernel_affine' on device 'cpu': a factor of 0 is refused");
  // Without a context, or with too few bindings, the kernel refuses to run and calls nothing.
  EXPECT_EQ(run(x, y, nullptr), 3);
}

TEST_F(CallKernelTest, TheSharedObjectNeedsNoKilnSymbol) {
  build(kProgram);
  if (!fn_) return;
  Result<std::string> nm = find_program("nm");
  Result<std::string> ldd = find_program("ldd");
  if (!nm.ok() || !ldd.ok()) GTEST_SKIP() << "nm or ldd is missing";
  Result<ProcessResult> undefined = run_process({*nm, "-D", "--undefined-only", so_}, 60000);
  ASSERT_TRUE(undefined.ok() && undefined->exit_code == 0);
  EXPECT_EQ(undefined->output.find("kiln"), std::string::npos) << undefined->output;
  Result<ProcessResult> libraries = run_process({*ldd, so_}, 60000);
  ASSERT_TRUE(libraries.ok() && libraries->exit_code == 0);
  EXPECT_EQ(libraries->output.find("libkiln"), std::string::npos) << libraries->output;
}

TEST(CallKernelSource, RefusesNamesThatAreNotCIdentifiers) {
  codegen::CallKernel k;
  k.name = "1bad";
  k.function = "f___cpu___pvoid___void";
  EXPECT_EQ(codegen::emit_call_kernels({&k, 1}).status().code(), StatusCode::kInvalidArgument);
  k.name = "good";
  k.function = "f\"); abort(); (\"";
  EXPECT_EQ(codegen::emit_call_kernels({&k, 1}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::ral
