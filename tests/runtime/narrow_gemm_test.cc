// gemm of narrow operands (ral/library/gemm_narrow.cc) on cpu (oneDNN for bf16 and i8, OpenBLAS
// over f32 copies for f16), opencl (the same over mapped buffers) and interp (the reference
// loops), against products computed here. The operands are small integers and halves, so every
// product and sum is exact in f32 and the results must match exactly.
#include <gtest/gtest.h>

#include <cstring>
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
  }

  std::unique_ptr<runtime::ProgramInstance> compile(const std::string& text) {
    Result<ir::Program> program = lang::parse_program(text, "gemm.kiln");
    EXPECT_TRUE(program.ok()) << program.status().message();
    if (!program.ok()) return nullptr;
    Result<hal::DeviceRef> device = open_device(GetParam(), dir_.path());
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

TEST_P(NarrowGemmTest, ProductsOfEveryNarrowPair) {
  struct Case {
    const char* operands;
    const char* result;
  };
  for (const Case t : {Case{"bf16", "f32"}, Case{"bf16", "bf16"}, Case{"f16", "f32"}, Case{"f16", "f16"},
                       Case{"i8", "i32"}}) {
    for (const bool ta : {false, true}) {
      const std::string a_dims = ta ? "[40, 33]" : "[33, 40]";
      const std::string text = std::string("input a : ") + t.operands + a_dims + "\ninput b : " + t.operands +
                               "[40, 17]\noutput c : " + t.result + "[33, 17]\ncall gemm(a, b, transpose_a=" +
                               (ta ? "1" : "0") + ", alpha=2) -> c\n";
      SCOPED_TRACE(text);
      auto p = compile(text);
      if (!p) continue;
      const ir::DType operand = *ir::dtype_from_name(t.operands), result = *ir::dtype_from_name(t.result);
      const std::vector<unsigned char> a = matrix(operand, kM, kK, ta, a_value), b = matrix(operand, kK, kN, false, b_value);
      ASSERT_TRUE(p->write("a", a.data(), a.size()).ok());
      ASSERT_TRUE(p->write("b", b.data(), b.size()).ok());
      const Status ran = p->run("main");
      ASSERT_TRUE(ran.ok()) << ran.message();
      std::vector<unsigned char> c(static_cast<size_t>(kM * kN) * ir::dtype_size(result));
      ASSERT_TRUE(p->read("c", c.data(), c.size()).ok());
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) {
          const ir::Scalar got = ir::load_scalar(result, &c[static_cast<size_t>(i * kN + j) * ir::dtype_size(result)]);
          // The sums stay below 256 in magnitude: exact in bf16 only when even, so bf16 is
          // compared after rounding the expected value the same way.
          const double want = ir::is_float_type(result) ? ir::round_float(result, product(i, j, 2)) : product(i, j, 2);
          EXPECT_EQ(ir::is_float_type(result) ? got.f : static_cast<double>(got.i), want) << i << ", " << j;
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

INSTANTIATE_TEST_SUITE_P(Devices, NarrowGemmTest, ::testing::Values("cpu", "interp", "opencl"));

}  // namespace
}  // namespace kiln::e2e
