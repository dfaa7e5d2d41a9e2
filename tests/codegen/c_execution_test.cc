// Generated C run for real: emitted, compiled by the system C compiler through the CPU device,
// dispatched on a HAL queue, and checked against the semantics of ir/loop.h, including the
// integer edge cases (division by zero, INT32_MIN / -1, saturating casts, wrap-around) and NaN
// propagation of max / min.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernels.h"
#include "codegen/run_kernels.h"
#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"

namespace kiln::codegen_test {
namespace {

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInff = std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();

// ---- The reference: the semantics of ir/loop.h, written directly in C++ --------------------------

int32_t saturate_i32(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0) return kMax32;
  if (x <= -2147483649.0) return kMin32;
  return static_cast<int32_t>(x);
}
int32_t wrap(int64_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x)); }

double math64(Op op, double x) {
  switch (op) {
    case Op::kExp: return std::exp(x);
    case Op::kLog: return std::log(x);
    case Op::kSqrt: return std::sqrt(x);
    case Op::kRsqrt: return 1.0 / std::sqrt(x);
    case Op::kTanh: return std::tanh(x);
    case Op::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::kSin: return std::sin(x);
    case Op::kCos: return std::cos(x);
    case Op::kErf: return std::erf(x);
    default: ADD_FAILURE() << "not a math op"; return 0;
  }
}

// The result of a case, as the type it has.
struct Value {
  DType type = DType::kF32;
  double f = 0;   // f32 / f64 results
  int32_t i = 0;  // i32 results
};

template <typename T>
Value make_value(DType type, T x) {
  Value v;
  v.type = type;
  if (type == DType::kI32) {
    if constexpr (std::is_floating_point_v<T>) {
      v.i = saturate_i32(static_cast<double>(x));
    } else {
      v.i = static_cast<int32_t>(x);
    }
  } else if (type == DType::kF32) {
    v.f = static_cast<float>(x);
  } else {
    v.f = static_cast<double>(x);
  }
  return v;
}

template <typename T>
T float_unary(Op op, T a) {
  switch (op) {
    case Op::kNeg: return -a;
    case Op::kExp: return std::exp(a);
    case Op::kLog: return std::log(a);
    case Op::kSqrt: return std::sqrt(a);
    case Op::kRsqrt: return T(1) / std::sqrt(a);
    case Op::kTanh: return std::tanh(a);
    case Op::kSigmoid: return T(1) / (T(1) + std::exp(-a));
    case Op::kRelu: return std::isnan(a) ? a : a > 0 ? a : T(0);
    case Op::kAbs: return std::fabs(a);
    case Op::kSin: return std::sin(a);
    case Op::kCos: return std::cos(a);
    case Op::kErf: return std::erf(a);
    case Op::kFloor: return std::floor(a);
    case Op::kCeil: return std::ceil(a);
    default: ADD_FAILURE() << "not unary"; return a;
  }
}

int32_t int_unary(Op op, int32_t a) {
  switch (op) {
    case Op::kNeg: return wrap(-int64_t{a});
    case Op::kAbs: return a < 0 ? wrap(-int64_t{a}) : a;
    case Op::kRelu: return a > 0 ? a : 0;
    case Op::kFloor:
    case Op::kCeil: return a;
    default: return saturate_i32(math64(op, a));
  }
}

template <typename T>
Value reference(const OpCase& c, T a, T b, T x) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  switch (c.op) {
    case Op::kCastF32:
    case Op::kCastF64:
    case Op::kCastI32:
      return make_value(c.out, a);
    case Op::kLt: return make_value(c.out, a < b ? 1 : 0);
    case Op::kLe: return make_value(c.out, a <= b ? 1 : 0);
    case Op::kGt: return make_value(c.out, a > b ? 1 : 0);
    case Op::kGe: return make_value(c.out, a >= b ? 1 : 0);
    case Op::kEq: return make_value(c.out, a == b ? 1 : 0);
    case Op::kNe: return make_value(c.out, a != b ? 1 : 0);
    case Op::kSelect: return make_value(c.out, a != T(0) ? b : x);
    default: break;
  }
  if constexpr (kFloat) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    switch (c.op) {
      case Op::kAdd: return make_value(c.out, a + b);
      case Op::kSub: return make_value(c.out, a - b);
      case Op::kMul: return make_value(c.out, a * b);
      case Op::kDiv: return make_value(c.out, a / b);
      case Op::kMax: return make_value(c.out, std::isnan(a) || std::isnan(b) ? nan : a < b ? b : a);
      case Op::kMin: return make_value(c.out, std::isnan(a) || std::isnan(b) ? nan : b < a ? b : a);
      case Op::kPow: return make_value(c.out, T(std::pow(a, b)));
      case Op::kFma: return make_value(c.out, a * b + x);
      default: return make_value(c.out, float_unary(c.op, a));
    }
  } else {
    switch (c.op) {
      case Op::kAdd: return make_value(c.out, wrap(int64_t{a} + b));
      case Op::kSub: return make_value(c.out, wrap(int64_t{a} - b));
      case Op::kMul: return make_value(c.out, wrap(int64_t{a} * b));
      case Op::kDiv: return make_value(c.out, b == 0 ? 0 : b == -1 ? wrap(-int64_t{a}) : a / b);
      case Op::kMax: return make_value(c.out, a < b ? b : a);
      case Op::kMin: return make_value(c.out, b < a ? b : a);
      case Op::kPow: return make_value(c.out, saturate_i32(std::pow(double(a), double(b))));
      case Op::kFma: return make_value(c.out, wrap(int64_t{wrap(int64_t{a} * b)} + x));
      default: return make_value(c.out, int_unary(c.op, a));
    }
  }
}

// Bit-exact (any NaN equals any NaN), or within a few ulps for libm functions and fma.
bool same_float(double got, double want, bool approximate, DType type) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (!approximate || std::isinf(got) || std::isinf(want)) {
    return std::bit_cast<uint64_t>(got) == std::bit_cast<uint64_t>(want);
  }
  const double tolerance = type == DType::kF32 ? 1e-6 : 1e-14;
  return std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
}

// ---- Every op -----------------------------------------------------------------------------------

struct OpInputs {
  std::vector<float> f32[3];
  std::vector<double> f64[3];
  std::vector<int32_t> i32[3];
};

OpInputs op_inputs() {
  OpInputs in;
  in.f32[0] = {kNaNf, kInff, -kInff, 1e10f, -1e10f, 2.9f, -2.9f, 0.0f,
               -0.0f, 1.5f, -3.25f, 2147483520.0f, 2147483648.0f, -2147483648.0f, 1e-3f, 100.0f};
  in.f32[1] = {1.0f, kNaNf, 2.0f, 0.0f, 3.0f, -1.0f, 0.5f, -0.0f,
               0.0f, 2.0f, 2.0f, -1.0f, 1.0f, 1.0f, kNaNf, -100.0f};
  in.f32[2] = {0.0f, 1.0f, kNaNf, -1.0f, 2.0f, 0.0f, 5.0f, 1.0f,
               -1.0f, 0.0f, 3.0f, 0.0f, 1.0f, -1.0f, 2.0f, 7.0f};
  in.f64[0] = {kNaN, kInf, -kInf, 1e10, -1e10, 2.9, -2.9, 2147483647.9,
               -2147483648.9, 2147483648.0, -2147483649.0, 4294967296.5, 0.0, -0.0, 1.5, 1e-3};
  in.f64[1] = {1.0, kNaN, 2.0, 0.0, 3.0, -1.0, 0.5, 1.0, 1.0, 2.0, 2.0, -1.0, 0.0, -0.0, kNaN, -100.0};
  in.f64[2] = {0.0, 1.0, kNaN, -1.0, 2.0, 0.0, 5.0, 1.0, -1.0, 0.0, 3.0, 0.0, 1.0, -1.0, 2.0, 7.0};
  in.i32[0] = {kMin32, kMin32, kMax32, kMax32, 46341, 100000, -7, -7,
               7, 0, 0, 5, -1, 1, kMin32, 3};
  in.i32[1] = {-1, 0, 1, -1, 46341, 100000, 2, -2, 0, 0, 5, -3, kMin32, kMax32, 1, 40};
  in.i32[2] = {0, 1, kMax32, kMin32, 7, -5, 0, 3, 1, 0, -1, 2, 3, 4, -1, 0};
  return in;
}

TEST(CExecution, EveryOpMatchesTheSemantics) {
  const std::vector<OpCase> cases = op_cases();
  int64_t counts[3];
  const std::vector<int64_t> slots = op_slots(cases, counts);
  const OpInputs in = op_inputs();
  NodeData data;
  for (int w = 0; w < 3; ++w) {
    data[input_node(DType::kF32, w)] = bytes_of(in.f32[w]);
    data[input_node(DType::kF64, w)] = bytes_of(in.f64[w]);
    data[input_node(DType::kI32, w)] = bytes_of(in.i32[w]);
  }
  data[result_node(DType::kF32)] = bytes_of(std::vector<float>(counts[0] * kOpsN, -12345.0f));
  data[result_node(DType::kF64)] = bytes_of(std::vector<double>(counts[1] * kOpsN, -12345.0));
  data[result_node(DType::kI32)] = bytes_of(std::vector<int32_t>(counts[2] * kOpsN, -12345));
  ir::Program program = all_ops_program();
  std::vector<Kernel> kernels = {all_ops_kernel()};
  Status status = compile_and_run(kernels, &program, &data, 4);
  ASSERT_TRUE(status.ok()) << status;

  const std::vector<float> r_f32 = values_of<float>(data[result_node(DType::kF32)]);
  const std::vector<double> r_f64 = values_of<double>(data[result_node(DType::kF64)]);
  const std::vector<int32_t> r_i32 = values_of<int32_t>(data[result_node(DType::kI32)]);
  int failures = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const OpCase& c = cases[k];
    for (int64_t i = 0; i < kOpsN; ++i) {
      Value want;
      std::string args;
      if (c.in == DType::kF32) {
        want = reference(c, in.f32[0][i], in.f32[1][i], in.f32[2][i]);
        args = std::to_string(in.f32[0][i]) + ", " + std::to_string(in.f32[1][i]) + ", " +
               std::to_string(in.f32[2][i]);
      } else if (c.in == DType::kF64) {
        want = reference(c, in.f64[0][i], in.f64[1][i], in.f64[2][i]);
        args = std::to_string(in.f64[0][i]) + ", " + std::to_string(in.f64[1][i]) + ", " +
               std::to_string(in.f64[2][i]);
      } else {
        want = reference(c, in.i32[0][i], in.i32[1][i], in.i32[2][i]);
        args = std::to_string(in.i32[0][i]) + ", " + std::to_string(in.i32[1][i]) + ", " +
               std::to_string(in.i32[2][i]);
      }
      const int64_t at = slots[k] * kOpsN + i;
      std::string got;
      bool ok = false;
      if (c.out == DType::kI32) {
        ok = r_i32[at] == want.i;
        got = std::to_string(r_i32[at]) + " (want " + std::to_string(want.i) + ")";
      } else {
        const double value = c.out == DType::kF32 ? double(r_f32[at]) : r_f64[at];
        ok = same_float(value, want.f, c.approximate, c.out);
        char text[128];
        std::snprintf(text, sizeof text, "%.17g (want %.17g)", value, want.f);
        got = text;
      }
      if (!ok && ++failures <= 40) {
        ADD_FAILURE() << c.label << " " << ir::op_name(c.op) << " on "
                      << (c.in == DType::kF32 ? "f32" : c.in == DType::kF64 ? "f64" : "i32")
                      << " (" << args << "): got " << got;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// The edge cases of the brief, spelled out (the table above covers them too).
TEST(CExecution, IntegerEdgeCases) {
  const OpInputs in = op_inputs();
  NodeData data;
  for (int w = 0; w < 3; ++w) {
    data[input_node(DType::kF32, w)] = bytes_of(in.f32[w]);
    data[input_node(DType::kF64, w)] = bytes_of(in.f64[w]);
    data[input_node(DType::kI32, w)] = bytes_of(in.i32[w]);
  }
  const std::vector<OpCase> cases = op_cases();
  int64_t counts[3];
  const std::vector<int64_t> slots = op_slots(cases, counts);
  data[result_node(DType::kF32)] = bytes_of(std::vector<float>(counts[0] * kOpsN));
  data[result_node(DType::kF64)] = bytes_of(std::vector<double>(counts[1] * kOpsN));
  data[result_node(DType::kI32)] = bytes_of(std::vector<int32_t>(counts[2] * kOpsN));
  std::vector<Kernel> kernels = {all_ops_kernel()};
  ASSERT_TRUE(compile_and_run(kernels, nullptr, &data, 1).ok());
  const std::vector<int32_t> r = values_of<int32_t>(data[result_node(DType::kI32)]);
  const std::vector<float> rf = values_of<float>(data[result_node(DType::kF32)]);
  auto slot_of = [&](DType in_type, DType out, Op op) {
    for (size_t k = 0; k < cases.size(); ++k) {
      if (cases[k].in == in_type && cases[k].out == out && cases[k].op == op) return slots[k];
    }
    ADD_FAILURE() << "no case";
    return int64_t{0};
  };
  auto i32 = [&](Op op, int64_t i) { return r[slot_of(DType::kI32, DType::kI32, op) * kOpsN + i]; };
  EXPECT_EQ(i32(Op::kDiv, 0), kMin32);  // INT32_MIN / -1
  EXPECT_EQ(i32(Op::kDiv, 1), 0);       // INT32_MIN / 0
  EXPECT_EQ(i32(Op::kDiv, 8), 0);       // 7 / 0
  EXPECT_EQ(i32(Op::kDiv, 9), 0);       // 0 / 0
  EXPECT_EQ(i32(Op::kDiv, 6), -3);      // -7 / 2 truncates toward zero
  EXPECT_EQ(i32(Op::kAdd, 2), kMin32);  // INT32_MAX + 1 wraps
  EXPECT_EQ(i32(Op::kMul, 4), wrap(int64_t{46341} * 46341));
  EXPECT_EQ(i32(Op::kMul, 5), wrap(int64_t{100000} * 100000));
  EXPECT_EQ(i32(Op::kNeg, 0), kMin32);  // -INT32_MIN wraps
  EXPECT_EQ(i32(Op::kAbs, 0), kMin32);
  EXPECT_EQ(i32(Op::kSub, 14), wrap(int64_t{kMin32} - 1));
  // Casts of f32 to i32: NaN, +inf, -inf, 1e10, -1e10, 2.9, -2.9, 2^31, -2^31.
  auto cast_f32 = [&](int64_t i) { return r[slot_of(DType::kF32, DType::kI32, Op::kCastI32) * kOpsN + i]; };
  EXPECT_EQ(cast_f32(0), 0);
  EXPECT_EQ(cast_f32(1), kMax32);
  EXPECT_EQ(cast_f32(2), kMin32);
  EXPECT_EQ(cast_f32(3), kMax32);
  EXPECT_EQ(cast_f32(4), kMin32);
  EXPECT_EQ(cast_f32(5), 2);
  EXPECT_EQ(cast_f32(6), -2);
  EXPECT_EQ(cast_f32(12), kMax32);
  EXPECT_EQ(cast_f32(13), kMin32);
  auto cast_f64 = [&](int64_t i) { return r[slot_of(DType::kF64, DType::kI32, Op::kCastI32) * kOpsN + i]; };
  EXPECT_EQ(cast_f64(0), 0);
  EXPECT_EQ(cast_f64(7), kMax32);   // 2147483647.9
  EXPECT_EQ(cast_f64(8), kMin32);   // -2147483648.9
  EXPECT_EQ(cast_f64(9), kMax32);   // 2^31
  EXPECT_EQ(cast_f64(10), kMin32);  // -2^31 - 1
  EXPECT_EQ(cast_f64(11), kMax32);  // 2^32 + 0.5
  // max / min of f32 with a NaN operand are NaN, whichever side.
  auto f32 = [&](Op op, int64_t i) { return rf[slot_of(DType::kF32, DType::kF32, op) * kOpsN + i]; };
  EXPECT_TRUE(std::isnan(f32(Op::kMax, 0)));  // max(NaN, 1)
  EXPECT_TRUE(std::isnan(f32(Op::kMax, 1)));  // max(inf, NaN)
  EXPECT_TRUE(std::isnan(f32(Op::kMin, 0)));
  EXPECT_TRUE(std::isnan(f32(Op::kMin, 1)));
  EXPECT_TRUE(std::isnan(f32(Op::kMax, 14)));  // max(1e-3, NaN)
  EXPECT_EQ(f32(Op::kMax, 15), 100.0f);
  EXPECT_EQ(f32(Op::kMin, 15), -100.0f);
  EXPECT_TRUE(std::isnan(f32(Op::kRelu, 0)));
}

// ---- Kernels of the golden tests, run -----------------------------------------------------------

TEST(CExecution, ElementwiseAnyWorkgroupCount) {
  std::vector<float> x(40), b(5);
  for (int i = 0; i < 40; ++i) x[i] = float(i % 7) - 3.0f;
  for (int j = 0; j < 5; ++j) b[j] = float(j) * 0.5f;
  std::vector<float> want(40);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 5; ++j) want[i * 5 + j] = std::max(0.0f, x[i * 5 + j] * 2.0f + b[j]);
  }
  ir::Program program = elementwise_program();
  std::vector<Kernel> kernels = {elementwise_kernel()};
  for (uint32_t w : {1u, 3u, 8u, 11u}) {
    NodeData data = {{0, bytes_of(x)}, {1, bytes_of(b)}, {2, bytes_of(std::vector<float>(40, -1.0f))}};
    Status status = compile_and_run(kernels, &program, &data, w);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(values_of<float>(data[2]), want) << "W = " << w;
  }
}

TEST(CExecution, ReductionsIntoLocalAccumulators) {
  std::vector<float> x(42);
  std::vector<int32_t> k(42);
  for (int i = 0; i < 42; ++i) {
    x[i] = float((i * 37) % 11) - 5.0f;
    k[i] = i % 7 == 3 ? kMax32 : i;  // each row's sum wraps around
  }
  std::vector<float> want_s(6, 0.0f), want_m(6, -kInff);
  std::vector<int32_t> want_n(6, 0);
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 7; ++c) {
      want_s[r] += x[r * 7 + c];
      want_m[r] = std::max(want_m[r], x[r * 7 + c]);
      want_n[r] = wrap(int64_t{want_n[r]} + k[r * 7 + c]);
    }
  }
  ir::Program program = reduction_program();
  std::vector<Kernel> kernels = reduction_kernels();
  for (uint32_t w : {1u, 4u, 6u}) {
    NodeData data = {{0, bytes_of(x)},
                     {1, bytes_of(std::vector<float>(6))},
                     {2, bytes_of(std::vector<float>(6))},
                     {3, bytes_of(k)},
                     {4, bytes_of(std::vector<int32_t>(6))}};
    Status status = compile_and_run(kernels, &program, &data, w);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(values_of<float>(data[1]), want_s) << "W = " << w;
    EXPECT_EQ(values_of<float>(data[2]), want_m) << "W = " << w;
    EXPECT_EQ(values_of<int32_t>(data[4]), want_n) << "W = " << w;
  }
}

TEST(CExecution, ParallelSplitGivesTheSameResultForAnyWorkgroupCount) {
  const int64_t e = kSplitExtent;
  std::vector<double> s(e);
  for (int64_t i = 0; i < e; ++i) s[i] = double(i * i) * 0.25 - 3.0;
  std::vector<double> want(e);
  for (int64_t i = 0; i < e; ++i) {
    want[i] = ((i >= 1 ? s[i - 1] : 0.0) + s[i]) + (i + 1 < e ? s[i + 1] : 0.0);
  }
  ir::Program program = split_program();
  std::vector<Kernel> kernels = {split_kernel()};
  Result<hal::ExecutableRef> executable = compile(kernels, &program);
  ASSERT_TRUE(executable.ok()) << executable.status();
  std::vector<std::vector<double>> results;
  // 1, 3 and E workgroups (and more than E, whose extra workgroups are empty), and y / z > 1,
  // whose workgroups outside the grid do nothing.
  const std::array<uint32_t, 3> grids[] = {{1, 1, 1}, {3, 1, 1}, {uint32_t(e), 1, 1},
                                           {uint32_t(e) + 5, 1, 1}, {4, 2, 3}};
  for (const auto& grid : grids) {
    NodeData data = {{0, bytes_of(s)}, {1, bytes_of(std::vector<double>(e, kNaN))}};
    Status status = run(*executable, kernels, &data, [&](const Kernel&) { return grid; });
    ASSERT_TRUE(status.ok()) << status;
    results.push_back(values_of<double>(data[1]));
    EXPECT_EQ(results.back(), want) << "workgroups " << grid[0] << "x" << grid[1] << "x" << grid[2];
  }
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
}

TEST(CExecution, NonParallelKernelRunsOnceWhateverTheGrid) {
  // y[0] = y[0] + 1 in a plain (not parallel) loop of one iteration: extra workgroups must not
  // run it again.
  Kernel k;
  k.name = "bump";
  k.nodes = {0};
  k.var_count = 1;
  k.body = loop(0, 1, {store(0, v(0), ir::lop(Op::kAdd, DType::kI32,
                                               {ir::lload(0, DType::kI32, v(0)), ir::lconst(DType::kI32, 1)}))});
  std::vector<Kernel> kernels = {k};
  Result<hal::ExecutableRef> executable = compile(kernels, nullptr);
  ASSERT_TRUE(executable.ok()) << executable.status();
  NodeData data = {{0, bytes_of(std::vector<int32_t>{41})}};
  Status status = run(*executable, kernels, &data, [](const Kernel&) { return std::array<uint32_t, 3>{3, 2, 2}; });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(values_of<int32_t>(data[0]), std::vector<int32_t>{42});
}

TEST(CExecution, LargeLocalsLiveOnTheHeap) {
  std::vector<Kernel> kernels = {comments_kernel()};
  Result<std::string> source = codegen::emit_kernels(kernels, nullptr, {});
  ASSERT_TRUE(source.ok());
  EXPECT_NE(source->find("calloc(20000, sizeof(double))"), std::string::npos);
  EXPECT_NE(source->find("double l0[4] = {0};"), std::string::npos);
  NodeData data = {{4, bytes_of(std::vector<double>{-1.0})}, {7, bytes_of(std::vector<float>(3))}};
  Status status = compile_and_run(kernels, nullptr, &data, 1);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(values_of<double>(data[4]), std::vector<double>{19999.0 * 20000.0 / 2});
}

TEST(CExecution, ConstantsArePrintedExactly) {
  std::vector<Kernel> kernels = {constants_kernel()};
  NodeData data = {{0, bytes_of(std::vector<float>(12, 7.0f))},
                   {1, bytes_of(std::vector<double>(11, 7.0))},
                   {2, bytes_of(std::vector<int32_t>(110, 0))}};
  // One workgroup: every iteration stores the same constants to the same elements.
  Status status = compile_and_run(kernels, nullptr, &data, 1);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> f = values_of<float>(data[0]);
  for (size_t i = 0; i < std::size(kF32Constants); ++i) {
    const double c = kF32Constants[i];
    const float want = std::isnan(c) ? kNaNf : std::fabs(c) > 3.5e38 ? (c < 0 ? -kInff : kInff) : float(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f[i])) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(want)) << i << ": " << f[i];
    }
  }
  const std::vector<double> d = values_of<double>(data[1]);
  for (size_t i = 0; i < std::size(kF64Constants); ++i) {
    if (std::isnan(kF64Constants[i])) {
      EXPECT_TRUE(std::isnan(d[i])) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint64_t>(d[i]), std::bit_cast<uint64_t>(kF64Constants[i])) << i;
    }
  }
  std::vector<int32_t> want(110, 0);
  const int32_t ints[] = {0, -1, kMax32, kMin32, kMax32, kMin32, 0, 2, -2};
  for (size_t i = 0; i < std::size(ints); ++i) want[i] = ints[i];
  for (int64_t x = 0; x < 4; ++x) {
    want[20 + 2 * x] = 1;
    want[30 + x] = 2;
    want[49 + x + x / 4] = 3;
    want[60 + 40 / (x + 1)] = 4;
    want[60 + x] = 5;
  }
  EXPECT_EQ(values_of<int32_t>(data[2]), want);
}

TEST(CExecution, FailedHeapAllocationFailsTheDispatch) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on a calloc that is too large instead of returning null";
#else
  // 2^59 doubles (4 EiB) cannot be allocated: calloc returns null and the kernel returns 2.
  Kernel k;
  k.name = "too_big";
  k.nodes = {0};
  k.local_count = 1;
  k.body = block({local(0, DType::kF64, int64_t{1} << 59,
                        {store(0, i64(0), ir::llocal_load(0, DType::kF64, i64(0)))})});
  std::vector<Kernel> kernels = {k};
  NodeData data = {{0, bytes_of(std::vector<double>{1.0})}};
  Status status = compile_and_run(kernels, nullptr, &data, 1);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("returned 2"), std::string::npos) << status;
#endif
}

TEST(CExecution, BindingSmallerThanItsNodeFailsTheDispatch) {
  ir::Program program = elementwise_program();
  std::vector<Kernel> kernels = {elementwise_kernel()};
  NodeData data = {{0, bytes_of(std::vector<float>(40))},
                   {1, bytes_of(std::vector<float>(5))},
                   {2, bytes_of(std::vector<float>(39))}};  // one element short
  Status status = compile_and_run(kernels, &program, &data, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("returned 1"), std::string::npos) << status;
}

}  // namespace
}  // namespace kiln::codegen_test
