// The C dialect's own exp of f32 (kiln_exp_f32 in the prelude, a branch-free polynomial that
// vectorizes) against the correctly rounded value, over a sweep of inputs: at most 1 ulp, and the
// special values exactly as libm gives them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "codegen/run_kernels.h"
#include "kiln/loop/loop.h"

namespace kiln::codegen_test {
namespace {

// Floats in an order where neighbours differ by one: the ulp distance is a difference.
int64_t ordinal(float f) {
  const int32_t bits = std::bit_cast<int32_t>(f);
  return bits < 0 ? int64_t{INT32_MIN} - bits : bits;
}

// y[i] = exp(x[i]) for every x, on the cpu device (4 workgroups).
std::vector<float> exp_on_cpu(const std::vector<float>& x) {
  const std::string n = std::to_string(x.size());
  Result<std::vector<Kernel>> kernels = ir::parse_kernels(
      "(kernel exp_sweep (nodes 0 1) (vars 1) (locals 0)\n"
      "  (for v0 " + n + " parallel (store 1 v0 (exp f32 (load f32 0 v0)))))\n");
  EXPECT_TRUE(kernels.ok()) << kernels.status();
  if (!kernels.ok()) return {};
  NodeData data = {{0, bytes_of(x)}, {1, bytes_of(std::vector<float>(x.size(), -1.0f))}};
  Status status = compile_and_run(*kernels, nullptr, &data, 4);
  EXPECT_TRUE(status.ok()) << status;
  return values_of<float>(data[1]);
}

TEST(ExpAccuracy, F32IsWithinOneUlpOfTheCorrectlyRoundedValue) {
  // Even steps over the whole finite range of results (and beyond it on both sides), densely
  // around 0, and through the subnormal results.
  std::vector<float> x;
  auto sweep = [&](double lo, double hi, int count) {
    for (int i = 0; i <= count; ++i) x.push_back(static_cast<float>(lo + (hi - lo) * i / count));
  };
  sweep(-110.0, 95.0, 1 << 20);
  sweep(-1.0, 1.0, 1 << 18);
  sweep(-104.0, -87.0, 1 << 18);
  sweep(88.0, 88.8, 1 << 16);
  for (float f = 1e-30f; f < 1e-3f; f *= 1.5f) {
    x.push_back(f);
    x.push_back(-f);
  }
  const std::vector<float> got = exp_on_cpu(x);
  ASSERT_EQ(got.size(), x.size());
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    const int64_t ulps = std::llabs(ordinal(got[i]) - ordinal(want));
    if (ulps > worst) {
      worst = ulps;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, 1) << "exp(" << worst_x << ") is " << worst << " ulp off";
}

TEST(ExpAccuracy, F32SpecialValuesAreLibmsExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                                88.7228394f, 88.72283f, -103.972084f, -103.9f, -87.5f,
                                std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::denorm_min()};
  const std::vector<float> got = exp_on_cpu(x);
  ASSERT_EQ(got.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "exp(" << x[i] << ")";
    } else {
      EXPECT_LE(std::llabs(ordinal(got[i]) - ordinal(want)), 1) << "exp(" << x[i] << ") = " << got[i];
      EXPECT_EQ(std::isinf(got[i]), std::isinf(want)) << "exp(" << x[i] << ")";
      EXPECT_EQ(got[i] == 0.0f, want == 0.0f) << "exp(" << x[i] << ")";
    }
  }
}

}  // namespace
}  // namespace kiln::codegen_test
