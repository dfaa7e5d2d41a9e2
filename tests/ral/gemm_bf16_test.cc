// kiln's own kernels for bf16 products (ral/library/gemm_bf16.h), AMX and AVX-512 BF16, each into
// f32 and bf16, against sums in double of the same bf16 values: shapes with partial tiles and
// blocks in every dimension, k odd and not a multiple of a tile's depth, both transposes, alpha and
// beta, on the calling thread and spread over a cpu device's threads. A kernel is skipped on CPUs
// that cannot run it (it is then never called); one that cannot is refused, not run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/context.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/gemm_bf16.h"

namespace kiln::ral::library {
namespace {

struct Case {
  int64_t m, n, k;
  bool transpose_a, transpose_b;
  float alpha, beta;
};

// Values that are not exact in a sum of a few terms, so that a misplaced element shows.
std::vector<uint16_t> bf16_values(size_t count, uint32_t seed) {
  std::vector<uint16_t> out(count);
  uint32_t x = seed * 2654435761u + 12345u;
  for (uint16_t& v : out) {
    x = x * 1664525u + 1013904223u;
    const float f = static_cast<float>(static_cast<int32_t>(x >> 8) % 2001 - 1000) / 977.0f;
    v = ir::bf16_bits(f);
  }
  return out;
}

double value(uint16_t bits) { return ir::bf16_value(bits); }

float as_float(float x) { return x; }
float as_float(BFloat16 x) { return static_cast<float>(value(x.bits)); }
void set(float v, float* out) { *out = v; }
void set(float v, BFloat16* out) { out->bits = ir::bf16_bits(v); }

// One product into a c of type TC (f32, or bf16: rounded once, within half a bf16 step).
template <typename TC>
void check(Bf16Kernel kernel, const Case& t, const ExecutionContext* context) {
  SCOPED_TRACE("m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
               " transposes " + std::to_string(t.transpose_a) + std::to_string(t.transpose_b) + " alpha " +
               std::to_string(t.alpha) + " beta " + std::to_string(t.beta) +
               (std::is_same_v<TC, float> ? " into f32" : " into bf16"));
  const GemmShape s{1, t.m, t.n, t.k, t.transpose_a, t.transpose_b};
  const std::vector<uint16_t> a = bf16_values(static_cast<size_t>(t.m * t.k), 1);
  const std::vector<uint16_t> b = bf16_values(static_cast<size_t>(t.k * t.n), 2);
  std::vector<TC> c(static_cast<size_t>(t.m * t.n));
  for (size_t i = 0; i < c.size(); ++i) {
    // beta = 0 must not read c: NaNs there stay out of the result.
    set(t.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i % 13) - 6, &c[i]);
  }
  const std::vector<TC> before = c;
  ASSERT_TRUE(gemm_bf16(kernel, context, s, a.data(), b.data(), c.data(), t.alpha, t.beta).ok());
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = value(t.transpose_a ? a[p * t.m + i] : a[i * t.k + p]);
        const double y = value(t.transpose_b ? b[j * t.k + p] : b[p * t.n + j]);
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double old = as_float(before[static_cast<size_t>(i * t.n + j)]);
      const double kept = t.beta == 0 ? 0.0 : t.beta * old;
      const double want = t.alpha * sum + kept;
      // f32 sums of k terms: within k roundings of the terms' magnitude; bf16 half a step more.
      double tolerance = 1e-6 * (std::fabs(t.alpha) * magnitude + std::fabs(kept)) + 1e-30;
      if (!std::is_same_v<TC, float>) tolerance += std::fabs(want) / 256;
      ASSERT_NEAR(as_float(c[static_cast<size_t>(i * t.n + j)]), want, tolerance) << "at " << i << ", " << j;
    }
  }
}

const Case kCases[] = {
    {32, 32, 32, false, false, 1, 0},      // one block, in place
    {64, 96, 128, false, false, 1, 0},     // whole blocks, a read in place
    {33, 17, 5, false, false, 1, 0},       // partial tiles everywhere, k below a tile
    {16, 16, 31, false, false, 1, 0},      // the smallest the cpu device sends here
    {14, 32, 7, false, false, 1, 0},       // one AVX-512 block, k odd: a packed
    {100, 70, 50, true, false, 1, 0},      // op(a) transposed: a packed
    {64, 48, 96, false, true, 1, 0},       // op(b) transposed: b packed element by element
    {37, 95, 64, true, true, 2.5f, 0.5f},  // both, alpha and beta
    {40, 1000, 33, false, true, 1, 1},     // many column blocks, beta 1
    {257, 130, 300, false, false, -0.75f, 0},
    {48, 40, 0, false, false, 2, 0.5f},    // k = 0: c = beta * c
};

class Bf16GemmTest : public ::testing::TestWithParam<Bf16Kernel> {
 protected:
  void SetUp() override {
    if (!bf16_kernel_runs(GetParam())) {
      GTEST_SKIP() << "this CPU cannot run the " << bf16_kernel_name(GetParam()) << " kernel";
    }
  }
};

TEST_P(Bf16GemmTest, OnTheCallingThread) {
  for (const Case& t : kCases) {
    check<float>(GetParam(), t, nullptr);
    check<BFloat16>(GetParam(), t, nullptr);
  }
}

TEST_P(Bf16GemmTest, SpreadOverACpuDevicesThreads) {
  // Two threads and three (parts of uneven size).
  for (const uint32_t threads : {2u, 3u}) {
    hal::DeviceOptions options;
    options.worker_threads = threads;
    Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("cpu", options);
    ASSERT_TRUE(device.ok()) << device.status().message();
    Context context("cpu");
    context.set_host_device(*device);
    ExecutionContext execution(context);
    // Large enough to be spread (2^22 multiply-adds and more), with partial blocks at the edges;
    // c += a @ b (the kernels start from c's values); a single column pair (the parts split rows,
    // each packing the same b); a depth whose packed b fills half an L2 of 2 MiB or less in one or
    // two column pairs (the parts sweep their pairs in several groups).
    for (const Case& t : {Case{256, 256, 64, false, false, 1, 0}, Case{300, 200, 100, false, false, 1, 0},
                          Case{161, 300, 96, true, true, 1.5f, -1}, Case{300, 200, 100, false, false, 1, 1},
                          Case{700, 20, 400, false, false, 1, 0}, Case{45, 200, 8200, false, false, 1, 0}}) {
      check<float>(GetParam(), t, &execution);
      check<BFloat16>(GetParam(), t, &execution);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16GemmTest, ::testing::Values(Bf16Kernel::kAmx, Bf16Kernel::kAvx512),
                         [](const ::testing::TestParamInfo<Bf16Kernel>& info) {
                           return std::string(info.param == Bf16Kernel::kAmx ? "Amx" : "Avx512");
                         });

// The kernel the cpu device uses is one that runs here, and a kernel that cannot run is refused.
TEST(Bf16Kernels, TheChosenKernelRunsAndOthersAreRefused) {
  const Bf16Kernel chosen = bf16_kernel();
  EXPECT_TRUE(chosen == Bf16Kernel::kNone || bf16_kernel_runs(chosen)) << bf16_kernel_name(chosen);
  EXPECT_FALSE(bf16_kernel_runs(Bf16Kernel::kNone));
  const uint16_t one = ir::bf16_bits(1.0f);
  float c = 0;
  for (Bf16Kernel kernel : {Bf16Kernel::kNone, Bf16Kernel::kAmx, Bf16Kernel::kAvx512}) {
    if (bf16_kernel_runs(kernel)) continue;
    const Status status = gemm_bf16(kernel, nullptr, GemmShape{1, 1, 1, 1, false, false}, &one, &one, &c, 1, 0);
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.message();
    EXPECT_EQ(c, 0) << bf16_kernel_name(kernel);
  }
}

}  // namespace
}  // namespace kiln::ral::library
