// Call statements run on every device: the library functions against a direct evaluation in
// double (gemm) or the standard library (sorting), cpu and opencl bit for bit against interp
// (random numbers), calls between statements in the order written, host functions, and failures
// that become statuses naming the function and the device.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "common/scoped_env.h"
#include "kiln/ir/call.h"
#include "kiln/ir/library_calls.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/loop.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"
#include "kiln/runtime/backend.h"
#include "ral/library/cublas.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

// Host functions for the tests, registered for every device: y = x * factor, and one that fails.
Status scale(ral::ExecutionContext*, ral::MemRef<float, 1> x, ral::MemRef<float, 1> y, double factor) {
  if (x.size(0) != y.size(0)) return invalid_argument_error("scale: x and y differ in length");
  for (int64_t i = 0; i < x.size(0); ++i) y.data[i] = static_cast<float>(x.data[i] * factor);
  return Status();
}
Status refuse(ral::ExecutionContext*, ral::MemRef<float, 1>, ral::MemRef<float, 1>) {
  return failed_precondition_error("the test function refuses on purpose");
}
void register_test_functions() {
  static const bool done = [] {
    ral::Registry& r = ral::Registry::global();
    for (Status s : {r.add(ral::make_function<"test_scale", "cpu", &scale>()),
                     r.add(ral::make_function<"test_scale", "interp", &scale>()),
                     r.add(ral::make_function<"test_scale", "opencl", &scale>()),
                     r.add(ral::make_function<"test_scale", "cuda", &scale>()),
                     r.add(ral::make_function<"test_refuse", "cpu", &refuse>()),
                     r.add(ral::make_function<"test_refuse", "interp", &refuse>()),
                     r.add(ral::make_function<"test_refuse", "opencl", &refuse>()),
                     r.add(ral::make_function<"test_refuse", "cuda", &refuse>())}) {
      EXPECT_TRUE(s.ok()) << s;
    }
    return true;
  }();
  (void)done;
}

using Tensors = std::map<std::string, HostTensor>;

class CallStatementTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    register_test_functions();
    if (Status available = driver_availability(GetParam()); !available.ok()) {
      GTEST_SKIP() << GetParam() << " is not available here: " << available;
    }
    auto device = open_device(GetParam(), cache_.path());
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
  }

  Result<ir::Program> parse(const std::string& text) { return lang::parse_program(text, "calls.kiln"); }

  // Runs `routine` of `text` `runs` times on `device` with `inputs`; the results afterwards.
  Result<Tensors> run(const hal::DeviceRef& device, const std::string& text, const Tensors& inputs,
                      int runs = 1, const std::string& routine = "main",
                      const runtime::ProgramOptions& options = {}) {
    KILN_ASSIGN_OR_RETURN(ir::Program program, parse(text));
    KILN_ASSIGN_OR_RETURN(auto instance, runtime::ProgramInstance::create(device, program, options));
    for (const auto& [name, t] : inputs) KILN_RETURN_IF_ERROR(write_tensor(*instance, name, t));
    for (int i = 0; i < runs; ++i) KILN_RETURN_IF_ERROR(instance->run(routine, Timeout::after_ms(120000)));
    Tensors out;
    for (const ir::TensorNode* node : result_nodes(program)) {
      KILN_ASSIGN_OR_RETURN(out[node->name], read_tensor(*instance, *node));
    }
    return out;
  }

  Tensors random_inputs(const std::string& text, uint64_t seed) {
    Tensors in;
    Result<ir::Program> program = parse(text);
    EXPECT_TRUE(program.ok()) << program.status();
    if (!program.ok()) return in;
    for (const ir::TensorNode& n : program->nodes) {
      if (n.role == ir::Role::kInput) in[n.name] = random_tensor(n, seed);
    }
    return in;
  }

  // `text` run with its automatic calls and without (LowerOptions::auto_calls = false) gives the
  // same `outputs`, within `tol`, from inputs drawn from `seed`.
  void expect_calls_match_loops(const std::string& text, uint64_t seed, std::initializer_list<const char*> outputs,
                                Tolerance tol = {}) {
    Tensors in = random_inputs(text, seed);
    runtime::ProgramOptions no_calls;
    no_calls.lower.auto_calls = false;
    Result<Tensors> with = run(device_, text, in), without = run(device_, text, in, 1, "main", no_calls);
    ASSERT_TRUE(with.ok()) << with.status();
    ASSERT_TRUE(without.ok()) << without.status();
    for (const char* name : outputs) {
      std::optional<std::string> diff = first_difference(name, (*without)[name], (*with)[name], tol);
      EXPECT_FALSE(diff) << *diff;
    }
  }

  void expect_gemm_cases();
  // A 2x2 gemm fails with `code` and a message that contains `message`.
  void expect_gemm_fails(StatusCode code, const std::string& message) {
    const std::string text = "input a : f32[2, 2]\ninput b : f32[2, 2]\noutput c : f32[2, 2]\ncall gemm(a, b) -> c\n";
    Result<Tensors> out = run(device_, text, random_inputs(text, 1));
    EXPECT_EQ(out.status().code(), code) << out.status();
    EXPECT_NE(out.status().message().find(message), std::string::npos) << out.status();
  }

  TempDir cache_;
  hal::DeviceRef device_;
};

// c = alpha * op(a) @ op(b) + beta * c0, in double.
std::vector<double> gemm_expected(const HostTensor& a, const HostTensor& b, const std::vector<double>& c0,
                                  int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha, double beta) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += a.at(ta ? p * m + i : i * k + p) * b.at(tb ? j * k + p : p * n + j);
      c[static_cast<size_t>(i * n + j)] = alpha * sum + (beta == 0 ? 0 : beta * c0[static_cast<size_t>(i * n + j)]);
    }
  }
  return c;
}

// gemm against gemm_expected for 1x1, primes, both transposes, alpha and beta, f32 and f64.
void CallStatementTest::expect_gemm_cases() {
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
    double alpha, beta;
    const char* type;
  };
  for (const Case& c : {Case{1, 1, 1, false, false, 1, 0, "f32"}, Case{7, 13, 5, false, false, 1, 0, "f32"},
                        Case{7, 13, 5, true, false, 2, 0, "f64"}, Case{11, 3, 17, false, true, -0.5, 1, "f32"},
                        Case{5, 7, 3, true, true, 1, 0.5, "f64"}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " + c.type);
    auto dims = [](int64_t r, int64_t s, bool t) {
      return "[" + std::to_string(t ? s : r) + ", " + std::to_string(t ? r : s) + "]";
    };
    const std::string text = std::string("input a : ") + c.type + dims(c.m, c.k, c.ta) + "\ninput b : " + c.type +
                             dims(c.k, c.n, c.tb) + "\noutput c : " + c.type + dims(c.m, c.n, false) +
                             "\nc[i, j] = 0.25\ncall gemm(a, b, transpose_a=" + std::to_string(int(c.ta)) +
                             ", transpose_b=" + std::to_string(int(c.tb)) + ", alpha=" + std::to_string(c.alpha) +
                             ", beta=" + std::to_string(c.beta) + ") -> c\n";
    Tensors in = random_inputs(text, 3);
    Result<Tensors> out = run(device_, text, in);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> c0(static_cast<size_t>(c.m * c.n), 0.25);
    std::vector<double> want = gemm_expected(in["a"], in["b"], c0, c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta);
    HostTensor expected = (*out)["c"];
    for (size_t i = 0; i < want.size(); ++i) expected.set(static_cast<int64_t>(i), want[i]);
    std::optional<std::string> diff = first_difference("c", expected, (*out)["c"]);
    EXPECT_FALSE(diff) << *diff;
  }
}

TEST_P(CallStatementTest, GemmWithTransposesAlphaAndBeta) { expect_gemm_cases(); }

// On opencl, gemm runs on the device through CLBlast or on the host over mapped buffers
// (KILN_OPENCL_GEMM); both give the reference's results, and a bad choice is a clear error.
TEST_P(CallStatementTest, OpenClGemmRunsOnTheDeviceAndOnTheHost) {
  if (GetParam() != "opencl") GTEST_SKIP() << "KILN_OPENCL_GEMM is the opencl device's";
  {
    test::ScopedEnv env("KILN_OPENCL_GEMM", "host");
    SCOPED_TRACE("host");
    expect_gemm_cases();
  }
  void* clblast = dlopen("libclblast.so.1", RTLD_NOW | RTLD_LOCAL);
  {
    test::ScopedEnv env("KILN_OPENCL_GEMM", "clblast");
    SCOPED_TRACE("clblast");
    if (clblast) {
      expect_gemm_cases();
    } else {
      expect_gemm_fails(StatusCode::kUnavailable, "CLBlast was not found");
    }
  }
  if (clblast) dlclose(clblast);
  test::ScopedEnv env("KILN_OPENCL_GEMM", "cuBLAS");
  expect_gemm_fails(StatusCode::kInvalidArgument, "KILN_OPENCL_GEMM='cuBLAS' is not one of clblast, host");
}

// On cuda, gemm runs on the device through cuBLAS or on the host over mapped buffers
// (KILN_CUDA_GEMM); both give the reference's results, and a bad choice is a clear error.
TEST_P(CallStatementTest, CudaGemmRunsOnTheDeviceAndOnTheHost) {
  if (GetParam() != "cuda") GTEST_SKIP() << "KILN_CUDA_GEMM is the cuda device's";
  for (const char* place : {"host", "cublas"}) {
    test::ScopedEnv env("KILN_CUDA_GEMM", place);
    SCOPED_TRACE(place);
    if (std::string(place) == "cublas" && !ral::library::cublas().status.ok()) {
      expect_gemm_fails(StatusCode::kUnavailable, "cuBLAS was not found");
    } else {
      expect_gemm_cases();
    }
  }
  test::ScopedEnv env("KILN_CUDA_GEMM", "clblast");
  expect_gemm_fails(StatusCode::kInvalidArgument, "KILN_CUDA_GEMM='clblast' is not one of cublas, host");
}

TEST_P(CallStatementTest, SortingMatchesTheStandardLibrary) {
  const std::string text = R"(
input x : f32[3, 9]
output up : f32[3, 9]
output down : f32[3, 9]
output order : i32[3, 9]
output best : f32[3, 4]
output at : i32[3, 4]
call sort(x) -> up
call sort(x, descending=1) -> down
call argsort(x) -> order
call topk(x) -> best, at
)";
  Tensors in = random_inputs(text, 5);
  HostTensor& x = in["x"];
  // Ties, a NaN and signed zeros in every row.
  for (int64_t r = 0; r < 3; ++r) {
    x.set(r * 9 + 1, 0.5);
    x.set(r * 9 + 4, 0.5);
    x.set(r * 9 + 2, std::nan(""));
    x.set(r * 9 + 6, -0.0);
    x.set(r * 9 + 7, 0.0);
  }
  Result<Tensors> out = run(device_, text, in);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<double> row(9);
    for (int64_t i = 0; i < 9; ++i) row[static_cast<size_t>(i)] = x.at(r * 9 + i);
    auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
    auto greater = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a > b); };
    std::vector<int> idx(9);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return less(row[a], row[b]); });
    std::vector<int> down(9);
    std::iota(down.begin(), down.end(), 0);
    std::stable_sort(down.begin(), down.end(), [&](int a, int b) { return greater(row[a], row[b]); });
    for (int64_t i = 0; i < 9; ++i) {
      const double up_want = row[idx[i]], down_want = row[down[i]];
      const double up_got = (*out)["up"].at(r * 9 + i), down_got = (*out)["down"].at(r * 9 + i);
      EXPECT_TRUE(std::isnan(up_want) ? std::isnan(up_got) : std::signbit(up_want) == std::signbit(up_got) && up_want == up_got)
          << "row " << r << " up[" << i << "]: " << up_want << " vs " << up_got;
      EXPECT_TRUE(std::isnan(down_want) ? std::isnan(down_got) : down_want == down_got && std::signbit(down_want) == std::signbit(down_got))
          << "row " << r << " down[" << i << "]";
      EXPECT_EQ((*out)["order"].at(r * 9 + i), idx[i]) << "row " << r << " order[" << i << "]";
      if (i < 4) {
        EXPECT_EQ((*out)["at"].at(r * 4 + i), down[i]) << "row " << r << " at[" << i << "]";
        EXPECT_EQ((*out)["best"].at(r * 4 + i), row[down[i]]) << "row " << r << " best[" << i << "]";
      }
    }
  }
}

TEST_P(CallStatementTest, RandomNumbersAreTheSameBitsAsOnInterp) {
  const std::string text = R"(
output u : f32[5, 7]
output n : f64[33]
output u2 : f32[5, 7]
call random_uniform(lo=-2, hi=3) -> u
call random_normal(mean=1, std=0.5) -> n
call random_uniform(lo=-2, hi=3) -> u2
)";
  auto reference_device = open_device("interp", cache_.path());
  ASSERT_TRUE(reference_device.ok()) << reference_device.status();
  for (int runs : {1, 2}) {
    Result<Tensors> got = run(device_, text, {}, runs);
    Result<Tensors> want = run(*reference_device, text, {}, runs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (const char* name : {"u", "n", "u2"}) {
      // cuda's normals come from the device's log, sin and cos, within a few ulp of the host's.
      if (GetParam() == "cuda" && std::string(name) == "n") {
        const std::vector<double> g = (*got)[name].values(), w = (*want)[name].values();
        ASSERT_EQ(g.size(), w.size());
        for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-13 * std::abs(w[i])) << name << "[" << i << "]";
        continue;
      }
      EXPECT_EQ((*got)[name].bytes, (*want)[name].bytes) << name << " after " << runs << " runs";
    }
    for (double v : (*got)["u"].values()) EXPECT_TRUE(v >= -2 && v < 3) << v;
    // Two call sites draw different numbers, and so does the second run.
    EXPECT_NE((*got)["u"].bytes, (*got)["u2"].bytes);
  }
  Result<Tensors> once = run(device_, text, {}, 1), twice = run(device_, text, {}, 2);
  ASSERT_TRUE(once.ok() && twice.ok());
  EXPECT_NE((*once)["u"].bytes, (*twice)["u"].bytes);
}

// Statements and calls run in the order written: a call reads the values from before it, and a
// statement after it reads what it wrote (no inlining or fusion across it).
TEST_P(CallStatementTest, CallsRunBetweenStatementsInOrder) {
  const std::string text = R"(
input x : f32[6]
output y : f32[6]
output z : f32[6]
tensor t : f32[6]
tensor s : f32[6]
tensor w : f32[6]
w[i] = x[i] + 1
t[i] = w[i] * 2
call sort(t, descending=1) -> s
t[i] = 100
call test_scale(s, factor=3) -> y
z[i] = s[i] + t[i] + y[i]
)";
  Tensors in = random_inputs(text, 9);
  Result<Tensors> out = run(device_, text, in);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> t(6);
  for (int i = 0; i < 6; ++i) t[i] = static_cast<float>((static_cast<float>(in["x"].at(i)) + 1.0f) * 2.0f);
  std::sort(t.begin(), t.end(), std::greater<>());
  for (int i = 0; i < 6; ++i) {
    const double y = static_cast<float>(t[i] * 3);
    EXPECT_EQ((*out)["y"].at(i), y) << i;
    EXPECT_NEAR((*out)["z"].at(i), t[i] + 100 + y, 1e-4) << i;
  }
}

// Automatic gemm: products (transposed operands, +=, f64, a product feeding another statement)
// give the same results with the call as the generated loops give without it.
TEST_P(CallStatementTest, AutomaticGemmMatchesTheGeneratedLoops) {
  const std::string text = R"(
input a : f32[40, 24]
input b : f32[40, 17]
input w : f64[17, 19]
input v : f64[19, 23]
output c : f32[24, 17]
output d : f64[17, 23]
output e : f32[24, 17]
c[i, j] = sum(b[k, j] * a[k, i])
c[i, j] += sum(a[k, i] * b[k, j])
d[i, j] = sum(w[i, k] * v[k, j])
e[i, j] = relu(c[i, j]) * 2
)";
  Result<ir::Program> program = parse(text);
  ASSERT_TRUE(program.ok()) << program.status();
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->routines[0].calls.size(), 3u) << ir::print_lowered(*lowered);
  EXPECT_EQ(ir::call_attribute(lowered->routines[0].calls[1].call, "beta"), 1);
  expect_calls_match_loops(text, 4, {"c", "d", "e"});
}

// Contractions over several contiguous dimensions and batched products (issue 33): the calls the
// matcher makes compute what the loop nests compute, on every device.
TEST_P(CallStatementTest, ContractionsAndBatchesMatchTheGeneratedLoops) {
  const std::string text = R"(
input h : f32[64, 32, 4, 4]
input wd : f32[32, 4, 4, 10]
input a : f32[6, 5, 24]
input b : f32[6, 5, 18]
input e : f32[4, 8, 18]
input p : f32[3, 20, 16]
input q : f32[3, 16, 24]
input u : f64[2, 3, 16, 20]
input v : f64[2, 3, 20, 16]
output z : f32[64, 10]
output c : f32[24, 18]
output g : f32[24, 4, 8]
output r : f32[3, 20, 24]
output o : f64[2, 3, 16, 16]
z[n, k] = sum(h[n, ch, y, x] * wd[ch, y, x, k])
c[i, j] = sum(b[k, l, j] * a[k, l, i])
g[i, j, l] = sum(c[i, k] * e[j, l, k])
r[n, i, j] = sum(p[n, i, k] * q[n, k, j])
r[n, i, j] += sum(q[n, k, j] * p[n, i, k])
o[s, t, i, j] = sum(u[s, t, i, k] * v[s, t, k, j])
)";
  Result<ir::Program> program = parse(text);
  ASSERT_TRUE(program.ok()) << program.status();
  const std::string printed = ir::print_program(ir::with_library_calls(*program));
  for (const char* call : {"call gemm(h, wd) -> z\n", "call gemm(a, b, transpose_a=1) -> c\n",
                           "call gemm(c, e, transpose_b=1) -> g\n", "call gemm(p, q, batch=1) -> r\n",
                           "call gemm(p, q, beta=1, batch=1) -> r\n", "call gemm(u, v, batch=2) -> o\n"}) {
    EXPECT_NE(printed.find(call), std::string::npos) << call << printed;
  }
  // Sums of up to 512 products in another order: rounding apart, the same.
  expect_calls_match_loops(text, 8, {"z", "c", "g", "r", "o"}, Tolerance{1e-4, 1e-4});
  // On opencl the products also through CLBlast on the device, each at its offsets in the buffers.
  void* clblast = GetParam() == "opencl" ? dlopen("libclblast.so.1", RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (clblast) {
    test::ScopedEnv env("KILN_OPENCL_GEMM", "clblast");
    SCOPED_TRACE("clblast");
    expect_calls_match_loops(text, 8, {"z", "c", "g", "r", "o"}, Tolerance{1e-4, 1e-4});
    dlclose(clblast);
  }
}

TEST_P(CallStatementTest, AFailingFunctionFailsTheRunWithItsNameAndDevice) {
  const std::string text = "input x : f32[4]\noutput y : f32[4]\ncall test_refuse(x) -> y\n";
  Result<Tensors> out = run(device_, text, random_inputs(text, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition) << out.status();
  EXPECT_NE(out.status().message().find("RAL function 'test_refuse' on device '" + GetParam() + "'"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("refuses on purpose"), std::string::npos) << out.status();
}

// Through the multi-stream runtime: the failing call fails its routine's semaphores, a later
// routine that reads what it wrote fails with the same status, and the process goes on.
TEST_P(CallStatementTest, LaterRoutinesFailWithTheCallsStatus) {
  Result<ir::Program> program = parse(R"(
input x : f32[4]
output y : f32[4]
output z : f32[4]
routine bad {
  call test_refuse(x) -> y
}
routine after {
  z[i] = y[i] + 1
}
)");
  ASSERT_TRUE(program.ok()) << program.status();
  auto nodes = runtime::NodeTable::create(*program);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto backend = runtime::Backend::create(device_);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto stream = (*backend)->new_stream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<std::string> names = {"bad", "after"};
  auto code = (*backend)->compile_batch(*program, names, {});
  ASSERT_TRUE(code.ok()) << code.status();
  auto root = (*backend)->make_context(*stream, *nodes);
  ASSERT_TRUE(root.ok()) << root.status();
  auto linked = (*backend)->link_batch(*root, *code);
  ASSERT_TRUE(linked.ok()) << linked.status();
  for (const runtime::RoutineRef& r : linked->routines) ASSERT_TRUE(r->run().ok());
  const Status awaited = (*backend)->await(Timeout::after_ms(120000));
  ASSERT_FALSE(awaited.ok());
  EXPECT_NE(awaited.message().find("RAL function 'test_refuse' on device '" + GetParam() + "'"), std::string::npos)
      << awaited;
  auto z = (*nodes)->tensor("z");
  ASSERT_TRUE(z.ok()) << z.status();
  Result<std::vector<float>> read = z->read_as<float>(Timeout::after_ms(120000));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kFailedPrecondition) << read.status();
  EXPECT_NE(read.status().message().find("refuses on purpose"), std::string::npos) << read.status();
}

TEST_P(CallStatementTest, AnUnknownFunctionFailsAtLinkTime) {
  Result<ir::Program> program = parse("input x : f32[4]\noutput y : f32[4]\ncall no_such_kernel(x, k=2) -> y\n");
  ASSERT_TRUE(program.ok()) << program.status();
  auto instance = runtime::ProgramInstance::create(device_, *program, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kNotFound) << instance.status();
  EXPECT_NE(instance.status().message().find("no function 'no_such_kernel' is registered for device '" + GetParam() + "'"),
            std::string::npos)
      << instance.status();
  // A registered name with other argument types says what is registered.
  program = parse("input x : f64[4]\noutput y : f64[4]\ncall test_scale(x, factor=2) -> y\n");
  ASSERT_TRUE(program.ok()) << program.status();
  instance = runtime::ProgramInstance::create(device_, *program, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.status().message().find("registered: test_scale___" + GetParam() + "___pvoid_m1df32_m1df32_f64___void"),
            std::string::npos)
      << instance.status();
}

TEST_P(CallStatementTest, AVirtualRequestForACallTensorIsRefused) {
  Result<ir::Program> program = parse("input x : f32[4]\noutput y : f32[4]\ntensor t : f32[4]\nt[i] = x[i]\ncall sort(t) -> y\n");
  ASSERT_TRUE(program.ok()) << program.status();
  program->nodes[static_cast<size_t>(program->find_node("t")->id)].memory = ir::MemoryMode::kVirtual;
  auto instance = runtime::ProgramInstance::create(device_, *program, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.status().message().find("cannot be virtual: call sort"), std::string::npos) << instance.status();
}

INSTANTIATE_TEST_SUITE_P(Devices, CallStatementTest, ::testing::Values("interp", "cpu", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::e2e
