// gemm of narrow operands (ral/library/gemm_narrow.cc) on cpu (oneDNN for bf16 and i8, OpenBLAS
// over f32 copies for f16), opencl (the same over mapped buffers), cuda where its driver starts
// (cuBLAS's cublasGemmEx and kiln's kernels: scripts/cuda-device-check.sh runs this suite on a
// GPU) and interp (the reference loops), against products computed here. The operands are small
// integers and halves, so every product and sum is exact in f32 and the results must match
// exactly; GeneralValuesMatchInterp compares products of other values with interp's within f32
// rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "kiln/lang/parser.h"

namespace kiln::e2e {
namespace {

class NarrowGemmTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "opencl" && !driver_availability("opencl").ok()) GTEST_SKIP() << "no OpenCL platform";
    if (GetParam() == "cuda") {
      if (Status cuda = driver_availability("cuda"); !cuda.ok()) GTEST_SKIP() << "no CUDA device: " << cuda;
    }
  }

  std::unique_ptr<runtime::ProgramInstance> compile(const std::string& text) { return compile_on(GetParam(), text); }
  std::unique_ptr<runtime::ProgramInstance> compile_on(const std::string& device_name, const std::string& text) {
    Result<ir::Program> program = lang::parse_program(text, "gemm.kiln");
    EXPECT_TRUE(program.ok()) << program.status().message();
    if (!program.ok()) return nullptr;
    Result<hal::DeviceRef> device = open_device(device_name, dir_.path());
    EXPECT_TRUE(device.ok()) << device.status().message();
    if (!device.ok()) return nullptr;
    Result<std::unique_ptr<runtime::ProgramInstance>> p = runtime::ProgramInstance::create(*device, *program);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? std::move(*p) : nullptr;
  }

  TempDir dir_;
};

// a (m x k) and b (k x n) of small values: a[i, p] = (i + 2p) % 7 - 3, b[p, j] = (3p + j) % 5 - 2.
constexpr int kM = 33, kN = 17, kK = 40;
double a_value(int i, int p) { return (i + 2 * p) % 7 - 3; }
double b_value(int p, int j) { return (3 * p + j) % 5 - 2; }
double product(int i, int j, double alpha) {
  double sum = 0;
  for (int p = 0; p < kK; ++p) sum += a_value(i, p) * b_value(p, j);
  return alpha * sum;
}

// The bytes of a matrix of `type` with values f(r, c), stored transposed when asked.
std::vector<unsigned char> matrix(ir::DType type, int rows, int cols, bool transposed, double (*f)(int, int)) {
  const size_t size = ir::dtype_size(type);
  std::vector<unsigned char> bytes(static_cast<size_t>(rows * cols) * size);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int at = transposed ? c * rows + r : r * cols + c;
      const double v = f(r, c);
      ir::store_scalar(type, ir::is_float_type(type) ? ir::Scalar{v, 0} : ir::Scalar{0, static_cast<int64_t>(v)},
                       &bytes[static_cast<size_t>(at) * size]);
    }
  }
  return bytes;
}

// Two sizes: the small one runs bf16 through oneDNN, the larger one (at least 64 rows and
// columns) through f32 copies where oneDNN has no AMX (gemm_narrow.cc).
TEST_P(NarrowGemmTest, ProductsOfEveryNarrowPair) {
  struct Case {
    const char* operands;
    const char* result;
  };
  struct Size {
    int m, n;
  };
  for (const Size size : {Size{kM, kN}, Size{97, 80}}) {
    const int m = size.m, n = size.n;
    for (const Case t : {Case{"bf16", "f32"}, Case{"bf16", "bf16"}, Case{"f16", "f32"}, Case{"f16", "f16"},
                         Case{"i8", "i32"}}) {
      for (const bool ta : {false, true}) {
        const std::string ms = std::to_string(m), ns = std::to_string(n), ks = std::to_string(kK);
        const std::string a_dims = ta ? "[" + ks + ", " + ms + "]" : "[" + ms + ", " + ks + "]";
        const std::string text = std::string("input a : ") + t.operands + a_dims + "\ninput b : " + t.operands + "[" +
                                 ks + ", " + ns + "]\noutput c : " + t.result + "[" + ms + ", " + ns +
                                 "]\ncall gemm(a, b, transpose_a=" + (ta ? "1" : "0") + ", alpha=2) -> c\n";
        SCOPED_TRACE(text);
        auto p = compile(text);
        if (!p) continue;
        const ir::DType operand = *ir::dtype_from_name(t.operands), result = *ir::dtype_from_name(t.result);
        const std::vector<unsigned char> a = matrix(operand, m, kK, ta, a_value), b = matrix(operand, kK, n, false, b_value);
        ASSERT_TRUE(p->write("a", a.data(), a.size()).ok());
        ASSERT_TRUE(p->write("b", b.data(), b.size()).ok());
        const Status ran = p->run("main");
        ASSERT_TRUE(ran.ok()) << ran.message();
        std::vector<unsigned char> c(static_cast<size_t>(m * n) * ir::dtype_size(result));
        ASSERT_TRUE(p->read("c", c.data(), c.size()).ok());
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            const ir::Scalar got = ir::load_scalar(result, &c[static_cast<size_t>(i * n + j) * ir::dtype_size(result)]);
            // The sums stay below 256 in magnitude: exact in bf16 only when even, so bf16 is
            // compared after rounding the expected value the same way.
            const double want =
                ir::is_float_type(result) ? ir::round_float(result, product(i, j, 2)) : product(i, j, 2);
            EXPECT_EQ(ir::is_float_type(result) ? got.f : static_cast<double>(got.i), want) << i << ", " << j;
          }
        }
      }
    }
  }
}

// An i8 product keeps its sum in i32 where i8 would wrap: 40 x 127 x 127 = 645160.
TEST_P(NarrowGemmTest, I8SumsBeyondI8) {
  auto p = compile("input a : i8[2, 40]\ninput b : i8[40, 3]\noutput c : i32[2, 3]\ncall gemm(a, b) -> c\n");
  ASSERT_TRUE(p);
  std::vector<int8_t> a(80, 127), b(120, 127);
  a[0] = -128;
  b[0] = -128;
  ASSERT_TRUE(p->write("a", a.data(), a.size()).ok());
  ASSERT_TRUE(p->write("b", b.data(), b.size()).ok());
  ASSERT_TRUE(p->run("main").ok());
  int32_t c[6] = {};
  ASSERT_TRUE(p->read("c", c, sizeof c).ok());
  EXPECT_EQ(c[0], 128 * 128 + 39 * 127 * 127);
  EXPECT_EQ(c[1], -128 * 127 + 39 * 127 * 127);
  EXPECT_EQ(c[3], 127 * -128 + 39 * 127 * 127);
  EXPECT_EQ(c[4], 40 * 127 * 127);
}

// qgemm: the i8 product's i32 sums, times a scale per row of op(a) and per column of op(b).
TEST_P(NarrowGemmTest, QuantizedProductWithScales) {
  for (const bool tb : {false, true}) {
    const std::string b_dims = tb ? "[17, 40]" : "[40, 17]";
    auto p = compile("input a : i8[33, 40]\ninput b : i8" + b_dims +
                     "\ninput sa : f32[33]\ninput sb : f32[17]\noutput c : f32[33, 17]\ncall qgemm(a, b, sa, sb, transpose_b=" +
                     (tb ? "1" : "0") + ") -> c\n");
    ASSERT_TRUE(p);
    const std::vector<unsigned char> a = matrix(ir::DType::kI8, kM, kK, false, a_value);
    const std::vector<unsigned char> b = matrix(ir::DType::kI8, kK, kN, tb, b_value);
    std::vector<float> sa(kM), sb(kN);
    for (int i = 0; i < kM; ++i) sa[static_cast<size_t>(i)] = 0.125f * static_cast<float>(i + 1);
    for (int j = 0; j < kN; ++j) sb[static_cast<size_t>(j)] = 1.0f / static_cast<float>(j + 3);
    ASSERT_TRUE(p->write("a", a.data(), a.size()).ok());
    ASSERT_TRUE(p->write("b", b.data(), b.size()).ok());
    ASSERT_TRUE(p->write("sa", sa.data(), sa.size() * 4).ok());
    ASSERT_TRUE(p->write("sb", sb.data(), sb.size() * 4).ok());
    const Status ran = p->run("main");
    ASSERT_TRUE(ran.ok()) << ran.message();
    std::vector<float> c(static_cast<size_t>(kM * kN));
    ASSERT_TRUE(p->read("c", c.data(), c.size() * 4).ok());
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        const float want = static_cast<float>(product(i, j, 1)) * sa[static_cast<size_t>(i)] * sb[static_cast<size_t>(j)];
        EXPECT_EQ(c[static_cast<size_t>(i * kN + j)], want) << i << ", " << j;
      }
    }
  }
}

// Values that round (sines in bf16 and f16; i8 across its range), in products that cuBLAS takes
// on cuda (rows of a multiple of 4, alpha 1 for i8) and ones it leaves to kiln's kernel (K = 30,
// alpha 2, and alpha 2.5, whose odd sums are ties that oneDNN alone would round away from zero):
// each device's results against interp's, the f32 results within the rounding of 96
// f32 additions in any order, the bf16 and f16 ones within one step of their type besides, the
// i8 products and qgemm exactly.
TEST_P(NarrowGemmTest, GeneralValuesMatchInterp) {
  if (GetParam() == "interp") GTEST_SKIP() << "interp is the reference";
  const std::string text = R"(input ab : bf16[64, 96]
input bb : bf16[96, 48]
input ah : f16[96, 64]
input bh : f16[96, 48]
input ai : i8[64, 96]
input bi : i8[96, 48]
input aj : i8[30, 33]
input bj : i8[17, 30]
input sa : f32[64]
input sb : f32[48]
input sj : f32[33]
input tj : f32[17]
output c_bf : f32[64, 48]
output c_bb : bf16[64, 48]
output c_hf : f32[64, 48]
output c_hh : f16[64, 48]
output c_i : i32[64, 48]
output c_j : i32[33, 17]
output c_k : i32[64, 48]
output q_i : f32[64, 48]
output q_j : f32[33, 17]
call gemm(ab, bb, alpha=0.75) -> c_bf
call gemm(ab, bb) -> c_bb
call gemm(ah, bh, transpose_a=1) -> c_hf
call gemm(ah, bh, transpose_a=1, alpha=-1.5) -> c_hh
call gemm(ai, bi) -> c_i
call gemm(aj, bj, transpose_a=1, transpose_b=1, alpha=2) -> c_j
call gemm(ai, bi, alpha=2.5) -> c_k
call qgemm(ai, bi, sa, sb) -> q_i
call qgemm(aj, bj, sj, tj, transpose_a=1, transpose_b=1) -> q_j
)";
  auto wave = [](int r, int c) { return std::sin(0.37 * r + 1.13 * c); };
  auto bytes_of = [&](ir::DType type, int rows, int cols) {
    std::vector<unsigned char> out(static_cast<size_t>(rows * cols) * ir::dtype_size(type));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const double v = wave(r, c);
        ir::store_scalar(type, type == ir::DType::kI8 ? ir::Scalar{0, static_cast<int64_t>(std::lround(127.5 * v - 0.5))}
                                                      : ir::Scalar{type == ir::DType::kF32 ? 0.5 + 0.25 * v : v, 0},
                         &out[static_cast<size_t>(r * cols + c) * ir::dtype_size(type)]);
      }
    }
    return out;
  };
  struct Tensor {
    const char* name;
    ir::DType type;
    int rows, cols;
  };
  const Tensor inputs[] = {{"ab", ir::DType::kBF16, 64, 96}, {"bb", ir::DType::kBF16, 96, 48},
                           {"ah", ir::DType::kF16, 96, 64},  {"bh", ir::DType::kF16, 96, 48},
                           {"ai", ir::DType::kI8, 64, 96},   {"bi", ir::DType::kI8, 96, 48},
                           {"aj", ir::DType::kI8, 30, 33},   {"bj", ir::DType::kI8, 17, 30},
                           {"sa", ir::DType::kF32, 64, 1},   {"sb", ir::DType::kF32, 48, 1},
                           {"sj", ir::DType::kF32, 33, 1},   {"tj", ir::DType::kF32, 17, 1}};
  const Tensor outputs[] = {{"c_bf", ir::DType::kF32, 64, 48}, {"c_bb", ir::DType::kBF16, 64, 48},
                            {"c_hf", ir::DType::kF32, 64, 48}, {"c_hh", ir::DType::kF16, 64, 48},
                            {"c_i", ir::DType::kI32, 64, 48},  {"c_j", ir::DType::kI32, 33, 17},
                            {"c_k", ir::DType::kI32, 64, 48},
                            {"q_i", ir::DType::kF32, 64, 48},  {"q_j", ir::DType::kF32, 33, 17}};
  std::map<std::string, std::vector<unsigned char>> results[2];
  const std::string devices[2] = {"interp", GetParam()};
  for (int d = 0; d < 2; ++d) {
    auto p = compile_on(devices[d], text);
    ASSERT_TRUE(p);
    for (const Tensor& t : inputs) {
      const std::vector<unsigned char> bytes = bytes_of(t.type, t.rows, t.cols);
      ASSERT_TRUE(p->write(t.name, bytes.data(), bytes.size()).ok()) << t.name;
    }
    const Status ran = p->run("main");
    ASSERT_TRUE(ran.ok()) << devices[d] << ": " << ran.message();
    for (const Tensor& t : outputs) {
      std::vector<unsigned char>& out = results[d][t.name];
      out.resize(static_cast<size_t>(t.rows * t.cols) * ir::dtype_size(t.type));
      ASSERT_TRUE(p->read(t.name, out.data(), out.size()).ok()) << t.name;
    }
  }
  for (const Tensor& t : outputs) {
    const size_t size = ir::dtype_size(t.type);
    const bool exact = t.type == ir::DType::kI32 || t.name[0] == 'q';
    // The sums are of 96 products of magnitude at most 1.5 (alpha included): in another order, f32
    // sums differ by at most 96 * 2^-24 * 96 * 1.5.
    const double step = t.type == ir::DType::kBF16 ? 0x1p-8 : t.type == ir::DType::kF16 ? 0x1p-11 : 0;
    int wrong = 0;
    for (int i = 0; i < t.rows * t.cols; ++i) {
      const ir::Scalar got = ir::load_scalar(t.type, &results[1][t.name][static_cast<size_t>(i) * size]);
      const ir::Scalar want = ir::load_scalar(t.type, &results[0][t.name][static_cast<size_t>(i) * size]);
      const bool same = exact ? (got.i == want.i && (got.f == want.f || (std::isnan(got.f) && std::isnan(want.f))))
                              : std::fabs(got.f - want.f) <= 96 * 96 * 1.5 * 0x1p-24 + std::fabs(want.f) * step * 2;
      if (!same && ++wrong <= 4) ADD_FAILURE() << t.name << "[" << i << "]: " << got.f << " / " << got.i << ", interp " << want.f << " / " << want.i;
    }
  }
}

TEST(NarrowGemmCheckTest, QgemmShapesAndTypesAreChecked) {
  struct Case {
    const char* declarations;
    const char* message;
  };
  for (const Case t : {Case{"input a : i8[4, 8]\ninput b : i8[8, 3]\ninput sa : f32[3]\ninput sb : f32[3]\noutput c : f32[4, 3]\n",
                            "'sa' is f32[3]; it must be f32[4], a scale per row of op(a)"},
                       Case{"input a : u8[4, 8]\ninput b : i8[8, 3]\ninput sa : f32[4]\ninput sb : f32[3]\noutput c : f32[4, 3]\n",
                            "'a' is u8; it must be i8"},
                       Case{"input a : i8[4, 8]\ninput b : i8[7, 3]\ninput sa : f32[4]\ninput sb : f32[3]\noutput c : f32[4, 3]\n",
                            "op(a) is 4×8 and op(b) 7×3: their inner dimensions differ"},
                       Case{"input a : i8[4, 8]\ninput b : i8[8, 3]\ninput sa : f32[4]\ninput sb : f32[3]\noutput c : i32[4, 3]\n",
                            "'c' is i32; it must be f32"}}) {
    Result<ir::Program> program = lang::parse_program(std::string(t.declarations) + "call qgemm(a, b, sa, sb) -> c\n", "q.kiln");
    ASSERT_FALSE(program.ok()) << t.message;
    EXPECT_NE(program.status().message().find(t.message), std::string::npos) << program.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NarrowGemmTest, ::testing::Values("cpu", "interp", "opencl", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace kiln::e2e
