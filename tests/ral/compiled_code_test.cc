// Context injection with real compiled code: a C shared object, built by the system C compiler,
// receives its inputs, calls a host-registered function and sends its output, all through the
// kiln_ral_context_t it is given, and names no kiln symbol (checked with nm -D and ldd).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/process.h"
#include "common/temp_dir.h"
#include "kiln/ral/execution_context.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::ral {
namespace {

// An entry as a compiler would emit it: y = x * scale (through a registered function), with the
// output's length decided when it runs (the elements of x above `threshold`).
constexpr const char* kEntrySource = R"C(
#include "kiln/ral/abi.h"
#include <stdlib.h>

typedef kiln_ral_memref(1) memref1;

int entry(kiln_ral_context_t* ctx, float threshold, float scale) {
  int64_t index = 0;
  kiln_ral_buffer_t x;
  void* recv_args[] = {&ctx, &index, &x};
  int rc = ctx->call(ctx, "recv_input___cpu___pvoid_i64___buf", recv_args);
  if (rc) return rc;
  if (x.rank != 1 || x.dtype != 0) return 100;
  const float* in = (const float*)x.data;
  static float kept[64];
  int64_t n = 0;
  for (int64_t i = 0; i < x.sizes[0] && n < 64; ++i) {
    if (in[i] > threshold) kept[n++] = in[i];
  }
  memref1 m = {kept, {n}};
  void* scale_args[] = {&ctx, &m, &scale};
  rc = ctx->call(ctx, "scale___cpu___pvoid_m1df32_f32___void", scale_args);
  if (rc) return rc;
  kiln_ral_buffer_t y = {kept, 0, 1, &n};
  void* send_args[] = {&ctx, &index, &y};
  return ctx->call(ctx, "send_output___cpu___pvoid_i64_buf___void", send_args);
}
)C";

Status scale(ExecutionContext*, MemRef<float, 1> x, float by) {
  if (by == 0) return invalid_argument_error("a scale of 0 is refused");
  for (int64_t i = 0; i < x.size(0); ++i) x.data[i] *= by;
  return Status();
}

// Registered the way a host program does it: at startup, in the global registry.
KILN_RAL_API("scale", "cpu", &scale);

class CompiledCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> cc = find_program("cc");
    if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
    ASSERT_FALSE(dir_.path().empty());
    const std::string source = dir_.file("entry.c");
    std::ofstream(source) << kEntrySource;
    so_ = dir_.file("entry.so");
    Result<ProcessResult> built = run_process(
        {*cc, "-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-I", std::string(KILN_SOURCE_DIR) + "/include",
         "-o", so_, source},
        120000);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_EQ(built->exit_code, 0) << built->output;
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  using EntryFn = int (*)(kiln_ral_context_t*, float, float);
  EntryFn load() {
    handle_ = dlopen(so_.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle_, nullptr) << dlerror();
    return handle_ ? reinterpret_cast<EntryFn>(dlsym(handle_, "entry")) : nullptr;
  }

  test::TempDir dir_{"kiln-ral"};
  std::string so_;
  void* handle_ = nullptr;
};

TEST_F(CompiledCodeTest, EntryRunsThroughTheContext) {
  EntryFn entry = load();
  ASSERT_NE(entry, nullptr);
  Context context("cpu");
  float x[6] = {0.5f, 3, -1, 4, 2.5f, 1};
  const int64_t sizes[1] = {6};
  ExecutionContext execution(context);
  execution.set_input(0, kiln_ral_buffer_t{x, 0, 1, sizes});
  ASSERT_EQ(entry(execution.abi(), 1.0f, 10.0f), 0) << execution.status();
  auto y = execution.output(0);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->sizes, std::vector<int64_t>{3});
  const float* values = static_cast<const float*>(y->buffer.data);
  EXPECT_EQ(std::vector<float>(values, values + 3), (std::vector<float>{30, 40, 25}));
  EXPECT_TRUE(execution.finish().ok());
}

TEST_F(CompiledCodeTest, AFailingCallIsAStatusAndTheProcessLives) {
  EntryFn entry = load();
  ASSERT_NE(entry, nullptr);
  Context context("cpu");
  float x[2] = {5, 6};
  const int64_t sizes[1] = {2};
  ExecutionContext execution(context);
  execution.set_input(0, kiln_ral_buffer_t{x, 0, 1, sizes});
  EXPECT_NE(entry(execution.abi(), 0.0f, 0.0f), 0);
  Status status = execution.finish();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "RAL function 'scale' on device 'cpu': a scale of 0 is refused");
  EXPECT_EQ(execution.output(0).status().code(), StatusCode::kNotFound);  // stopped before sending
}

TEST_F(CompiledCodeTest, TheSharedObjectNamesNoKilnSymbol) {
  Result<std::string> nm = find_program("nm");
  Result<std::string> ldd = find_program("ldd");
  if (!nm.ok() || !ldd.ok()) GTEST_SKIP() << "nm or ldd is missing";
  Result<ProcessResult> symbols = run_process({*nm, "-D", so_}, 60000);
  ASSERT_TRUE(symbols.ok() && symbols->exit_code == 0);
  EXPECT_NE(symbols->output.find(" T entry"), std::string::npos) << symbols->output;
  EXPECT_EQ(symbols->output.find("kiln"), std::string::npos) << symbols->output;
  Result<ProcessResult> libraries = run_process({*ldd, so_}, 60000);
  ASSERT_TRUE(libraries.ok() && libraries->exit_code == 0);
  EXPECT_EQ(libraries->output.find("libkiln"), std::string::npos) << libraries->output;
}

}  // namespace
}  // namespace kiln::ral
