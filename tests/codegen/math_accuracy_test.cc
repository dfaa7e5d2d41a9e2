// The C dialect's own exp, log and tanh of f32 (kiln_exp_f32, kiln_log_f32, kiln_tanh_f32 in the
// prelude: branch-free polynomials that vectorize) against the correctly rounded value over
// sweeps of inputs, with the bounds docs/language.md states (exp and log 1 ulp, tanh 2), and the
// special values as libm gives them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "codegen/run_kernels.h"
#include "kiln/loop/loop.h"

namespace kiln::codegen_test {
namespace {

constexpr float kFloatInf = std::numeric_limits<float>::infinity();
constexpr float kFloatNaN = std::numeric_limits<float>::quiet_NaN();

// Floats in an order where neighbours differ by one: the ulp distance is a difference.
int64_t ordinal(float f) {
  const int32_t bits = std::bit_cast<int32_t>(f);
  return bits < 0 ? int64_t{INT32_MIN} - bits : bits;
}

// y[i] = fn(x[i]) for every x (f32, or f64 for T = double), generated for and run on the cpu
// device (4 workgroups).
template <typename T = float>
std::vector<T> on_cpu(const char* fn, const std::vector<T>& x) {
  const std::string n = std::to_string(x.size());
  const std::string type = sizeof(T) == 4 ? "f32" : "f64";
  Result<std::vector<Kernel>> kernels = ir::parse_kernels(
      std::string("(kernel sweep (nodes 0 1) (vars 1) (locals 0)\n  (for v0 ") + n +
      " parallel (store 1 v0 (" + fn + " " + type + " (load " + type + " 0 v0)))))\n");
  EXPECT_TRUE(kernels.ok()) << kernels.status();
  if (!kernels.ok()) return {};
  NodeData data = {{0, bytes_of(x)}, {1, bytes_of(std::vector<T>(x.size(), T(-1)))}};
  Status status = compile_and_run(*kernels, nullptr, &data, 4);
  EXPECT_TRUE(status.ok()) << status;
  return values_of<T>(data[1]);
}

// `count + 1` evenly spaced values from lo to hi.
void sweep(std::vector<float>* x, double lo, double hi, int count) {
  for (int i = 0; i <= count; ++i) x->push_back(static_cast<float>(lo + (hi - lo) * i / count));
}

// The largest distance in ulps of fn(x) from the correctly rounded libm value (computed in
// double and rounded once), over `x`; NaN must meet NaN.
void expect_within(const char* fn, double (*reference)(double), const std::vector<float>& x,
                   int64_t max_ulps) {
  const std::vector<float> got = on_cpu(fn, x);
  ASSERT_EQ(got.size(), x.size());
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(reference(static_cast<double>(x[i])));
    if (std::isnan(want) || std::isnan(got[i])) {
      EXPECT_TRUE(std::isnan(want) && std::isnan(got[i])) << fn << "(" << x[i] << ") = " << got[i];
      continue;
    }
    const int64_t ulps = std::llabs(ordinal(got[i]) - ordinal(want));
    if (ulps > worst) {
      worst = ulps;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, max_ulps) << fn << "(" << worst_x << ") is " << worst << " ulp off";
}

TEST(MathAccuracy, ExpIsWithinOneUlp) {
  std::vector<float> x = {0.0f, -0.0f, kFloatInf, -kFloatInf, kFloatNaN, 88.7228394f, 88.72283f, -103.972084f,
                          -103.9f, -87.5f, std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()};
  sweep(&x, -110.0, 95.0, 1 << 20);  // past both ends of the finite results
  sweep(&x, -1.0, 1.0, 1 << 18);
  sweep(&x, -104.0, -87.0, 1 << 18);  // subnormal results
  sweep(&x, 88.0, 88.8, 1 << 16);     // near overflow
  for (float f = 1e-30f; f < 1e-3f; f *= 1.5f) x.insert(x.end(), {f, -f});
  expect_within("exp", [](double v) { return std::exp(v); }, x, 1);
}

TEST(MathAccuracy, LogIsWithinOneUlp) {
  std::vector<float> x = {0.0f, -0.0f, kFloatInf, -kFloatInf, kFloatNaN, -1.0f, 1.0f, 2.0f, 0.5f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min()};
  sweep(&x, 1e-3, 100.0, 1 << 19);
  sweep(&x, 0.5, 2.0, 1 << 19);  // around 1, where log cancels
  sweep(&x, 1e-45, 1e-38, 1 << 16);  // subnormal inputs
  // Every binade, 2048 values each.
  for (int e = -126; e < 128; ++e) {
    for (int i = 0; i < 2048; ++i) x.push_back(std::ldexp(1.0f + i / 2048.0f, e));
  }
  expect_within("log", [](double v) { return std::log(v); }, x, 1);
}

TEST(MathAccuracy, TanhIsWithinTwoUlps) {
  std::vector<float> x = {0.0f, -0.0f, kFloatInf, -kFloatInf, kFloatNaN, 0.55f, -0.55f, 9.0f, 50.0f, 1e-30f};
  sweep(&x, -12.0, 12.0, 1 << 20);
  sweep(&x, -1.0, 1.0, 1 << 19);  // both sides of the switch at |x| = 0.55
  for (float f = 1e-30f; f < 1e-2f; f *= 1.5f) x.insert(x.end(), {f, -f});
  expect_within("tanh", [](double v) { return std::tanh(v); }, x, 2);
  // tanh keeps the sign of zero.
  const std::vector<float> zeros = on_cpu("tanh", {0.0f, -0.0f});
  ASSERT_EQ(zeros.size(), 2u);
  EXPECT_FALSE(std::signbit(zeros[0]));
  EXPECT_TRUE(std::signbit(zeros[1]));
}

// erf (exact GELU's): kiln's own for f32, exhaustively 1 ulp when it was written (every f32, with
// and without fma contraction); here dense sweeps of both regions (|x| < 0.9: x + x q(x^2);
// above: 1 - exp(log erfc), up to 4 where it rounds to 1) and the special values.
TEST(MathAccuracy, ErfIsWithinOneUlp) {
  std::vector<float> x = {0.0f, -0.0f, kFloatInf, -kFloatInf, kFloatNaN, 0.9f, -0.9f, std::nextafter(0.9f, 0.0f), 4.0f, -4.0f,
                          3.9f, 10.0f, -50.0f, std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min()};
  sweep(&x, -6.0, 6.0, 1 << 21);
  sweep(&x, -1.0, 1.0, 1 << 19);  // both sides of the switch at |x| = 0.9
  sweep(&x, 3.5, 4.5, 1 << 16);   // where erf rounds to 1
  sweep(&x, 1e-45, 1e-37, 1 << 14);  // subnormal inputs, where x q(x^2) underflows
  for (float f = 1e-30f; f < 1e-2f; f *= 1.1f) x.insert(x.end(), {f, -f});
  expect_within("erf", [](double v) { return std::erf(v); }, x, 1);
  // Odd: erf(-0.0) is -0.0; +-1 from 4 on, and at the infinities.
  const std::vector<float> special = on_cpu("erf", {0.0f, -0.0f, kFloatInf, -kFloatInf, 4.0f, -1e30f});
  ASSERT_EQ(special.size(), 6u);
  EXPECT_FALSE(std::signbit(special[0]));
  EXPECT_TRUE(std::signbit(special[1]) && special[1] == 0.0f);
  EXPECT_EQ(special[2], 1.0f);
  EXPECT_EQ(special[3], -1.0f);
  EXPECT_EQ(special[4], 1.0f);
  EXPECT_EQ(special[5], -1.0f);
}

// erf of f64 is the C library's: within 1 ulp of the long double reference rounded to double.
TEST(MathAccuracy, ErfOfF64IsTheLibrarysWithinOneUlp) {
  std::vector<double> x = {0.0, -0.0, 0.5, -0.5, 0.84375, 1.25, 2.857, 6.0, 27.0, -27.0};
  for (int i = 0; i <= (1 << 18); ++i) x.push_back(-7.0 + 14.0 * i / (1 << 18));
  const std::vector<double> got = on_cpu<double>("erf", x);
  ASSERT_EQ(got.size(), x.size());
  auto ordinal64 = [](double d) {
    const int64_t bits = std::bit_cast<int64_t>(d);
    return bits < 0 ? INT64_MIN - bits : bits;
  };
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = static_cast<double>(erfl(static_cast<long double>(x[i])));
    worst = std::max<int64_t>(worst, std::llabs(ordinal64(got[i]) - ordinal64(want)));
  }
  EXPECT_LE(worst, 1);
}

}  // namespace
}  // namespace kiln::codegen_test
