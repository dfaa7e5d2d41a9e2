// The `interp` driver: the semantics of every loop-IR op (kiln/loop/loop.h) as the reference
// interpreter runs them: integer wrap-around and division, casts, float rounding and NaN rules,
// f64 evaluation of f32 expressions, comparisons, select, if and zero-filled locals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "drivers/interp_test_util.h"

namespace kiln {
namespace {

using interp_test::InterpTest;
using interp_test::kInf;

TEST_F(InterpTest, I32ArithmeticWrapsAndDivides) {
  std::vector<int32_t> v = eval<int32_t>(
      "i32", {"(+ i32 (const i32 2147483647) (const i32 1))",
              "(- i32 (const i32 -2147483648) (const i32 1))",
              "(* i32 (const i32 65536) (const i32 65536))",
              "(* i32 (const i32 -3) (const i32 1000000007))",
              "(/ i32 (const i32 7) (const i32 -2))",
              "(/ i32 (const i32 -7) (const i32 2))",
              "(/ i32 (const i32 5) (const i32 0))",
              "(/ i32 (const i32 -2147483648) (const i32 -1))",
              "(/ i32 (const i32 -2147483648) (const i32 0))",
              "(neg i32 (const i32 -2147483648))",
              "(neg i32 (const i32 5))",
              "(abs i32 (const i32 -2147483648))",
              "(abs i32 (const i32 -5))",
              "(max i32 (const i32 -3) (const i32 2))",
              "(min i32 (const i32 -3) (const i32 2))",
              "(relu i32 (const i32 -3))",
              "(relu i32 (const i32 3))",
              "(floor i32 (const i32 -9))",
              "(ceil i32 (const i32 9))",
              "(pow i32 (const i32 2) (const i32 10))",
              "(pow i32 (const i32 2) (const i32 40))",
              "(pow i32 (const i32 -2) (const i32 31))",
              "(pow i32 (const i32 -2) (const i32 33))",
              "(pow i32 (const i32 2) (const i32 -1))",
              "(fma i32 (const i32 65536) (const i32 65536) (const i32 5))",
              "(exp i32 (const i32 2))",
              "(sqrt i32 (const i32 -1))",
              "(log i32 (const i32 0))",
              "(rsqrt i32 (const i32 0))",
              "(sigmoid i32 (const i32 100))",
              "(tanh i32 (const i32 -100))",
              "(sin i32 (const i32 2))",
              "(cos i32 (const i32 0))"});
  const int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(v, (std::vector<int32_t>{kMin, kMax, 0, 1294967275, -3, -3, 0, kMin, 0,
                                     kMin, -5, kMin, 5, 2, -3, 0, 3, -9, 9, 1024, kMax, kMin, kMin,
                                     0, 5, 7, 0, kMin, kMax, 1, -1, 0, 1}));
}

TEST_F(InterpTest, I64ArithmeticWrapsAndDivides) {
  std::vector<int64_t> v = eval<int64_t>(
      "i64", {"(+ 4611686018427387904 (* 4611686018427387904 1))",  // 2^62 + 2^62 wraps
              "(/ -9223372036854775808 -1)", "(/ 9 0)", "(/ -9 4)", "(* 3 -7)",
              "(neg -9223372036854775808)", "(- 0 5)", "(max -1 1)", "(< -1 1)", "(>= -1 1)",
              "(pow 3 4)"});
  ASSERT_EQ(v.size(), 11u);
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(v[0], kMin);
  EXPECT_EQ(v[1], kMin);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], -2);
  EXPECT_EQ(v[4], -21);
  EXPECT_EQ(v[5], kMin);
  EXPECT_EQ(v[6], -5);
  EXPECT_EQ(v[7], 1);
  EXPECT_EQ(v[8], 1);
  EXPECT_EQ(v[9], 0);
  EXPECT_EQ(v[10], 81);
}

// Floats truncate and saturate; integers wrap (language version 3: 9000000000 is 410065408 in i32).
TEST_F(InterpTest, CastsToI32TruncateAndSaturate) {
  std::vector<int32_t> v = eval<int32_t>(
      "i32", {"(i32 (const f32 2.7))", "(i32 (const f32 -2.7))", "(i32 (const f64 nan))",
              "(i32 (const f32 -nan))", "(i32 (const f64 1e10))", "(i32 (const f64 -1e10))",
              "(i32 (const f32 inf))", "(i32 (const f32 -inf))", "(i32 (const f64 2147483647.9))",
              "(i32 (const f64 -2147483648.9))", "(i32 9000000000)", "(i32 -9000000000)",
              "(i32 (const f64 -0.5))", "(i32 (const i32 -4))"});
  const int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(v, (std::vector<int32_t>{2, -2, 0, 0, kMax, kMin, kMax, kMin, kMax, kMin, 410065408, -410065408,
                                     0, -4}));
}

TEST_F(InterpTest, FloatCastsAndConstantsRound) {
  std::vector<double> v = eval<double>(
      "f64", {"(f64 (const f32 0.1))", "(const f64 0.1)", "(f64 (f32 (const f64 0.1)))",
              "(f64 (const i32 -7))", "(f64 (f32 16777217))"});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], static_cast<double>(0.1f));
  EXPECT_EQ(v[1], 0.1);
  EXPECT_EQ(v[2], static_cast<double>(0.1f));
  EXPECT_EQ(v[3], -7.0);
  EXPECT_EQ(v[4], 16777216.0);  // i64 → f32 rounds to nearest even
}

TEST_F(InterpTest, F32ExpressionsAreEvaluatedInF64) {
  std::vector<float> v = eval<float>(
      "f32", {// In f32 arithmetic 1e8 + 1 would round back to 1e8 and the result would be 0.
              "(+ f32 (+ f32 (const f32 1e8) (const f32 1)) (const f32 -1e8))",
              // ... but an explicit cast to f32 rounds.
              "(+ f32 (f32 (+ f32 (const f32 1e8) (const f32 1))) (const f32 -1e8))",
              // Overflow of an intermediate f32 value does not happen in f64.
              "(/ f32 (* f32 (const f32 1e30) (const f32 1e30)) (const f32 1e30))",
              // A stored value beyond f32 becomes inf.
              "(* f32 (const f32 1e30) (const f32 1e30))"});
  EXPECT_EQ(v, (std::vector<float>{1.0f, 0.0f, 1e30f, std::numeric_limits<float>::infinity()}));
}

TEST_F(InterpTest, FloatOpsAndNaNRules) {
  std::vector<double> v = eval<double>(
      "f64", {"(max f64 (const f64 nan) (const f64 1))", "(max f64 (const f64 1) (const f64 nan))",
              "(min f64 (const f64 nan) (const f64 1))", "(min f64 (const f64 1) (const f64 nan))",
              "(max f64 (const f64 -inf) (const f64 2))", "(min f64 (const f64 -3) (const f64 2))",
              "(relu f64 (const f64 nan))", "(relu f64 (const f64 -1))", "(relu f64 (const f64 2.5))",
              "(sigmoid f64 (const f64 0))", "(rsqrt f64 (const f64 4))", "(exp f64 (const f64 0))",
              "(log f64 (const f64 1))", "(sqrt f64 (const f64 -1))", "(tanh f64 (const f64 0.5))",
              "(sin f64 (const f64 1))", "(cos f64 (const f64 1))", "(floor f64 (const f64 -2.5))",
              "(ceil f64 (const f64 -2.5))", "(abs f64 (const f64 -0))", "(neg f64 (const f64 3))",
              "(pow f64 (const f64 2) (const f64 0.5))", "(/ f64 (const f64 1) (const f64 0))",
              "(/ f64 (const f64 0) (const f64 0))", "(- f64 (const f64 1) (const f64 0.25))",
              "(fma f64 (const f64 0.1) (const f64 10) (const f64 -1))",
              "(log f64 (const f64 0))", "(sigmoid f64 (const f64 -1000))"});
  ASSERT_EQ(v.size(), 28u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[4], 2.0);
  EXPECT_EQ(v[5], -3.0);
  EXPECT_TRUE(std::isnan(v[6]));
  EXPECT_EQ(v[7], 0.0);
  EXPECT_EQ(v[8], 2.5);
  EXPECT_EQ(v[9], 0.5);
  EXPECT_EQ(v[10], 0.5);
  EXPECT_EQ(v[11], 1.0);
  EXPECT_EQ(v[12], 0.0);
  EXPECT_TRUE(std::isnan(v[13]));
  EXPECT_EQ(v[14], std::tanh(0.5));
  EXPECT_EQ(v[15], std::sin(1.0));
  EXPECT_EQ(v[16], std::cos(1.0));
  EXPECT_EQ(v[17], -3.0);
  EXPECT_EQ(v[18], -2.0);
  EXPECT_EQ(v[19], 0.0);
  EXPECT_FALSE(std::signbit(v[19]));
  EXPECT_EQ(v[20], -3.0);
  EXPECT_EQ(v[21], std::sqrt(2.0));
  EXPECT_EQ(v[22], kInf);
  EXPECT_TRUE(std::isnan(v[23]));
  EXPECT_EQ(v[24], 0.75);
  EXPECT_EQ(v[25], std::fma(0.1, 10.0, -1.0));  // the reference rounds once
  EXPECT_EQ(v[26], -kInf);
  EXPECT_EQ(v[27], 0.0);
}

TEST_F(InterpTest, ComparisonsAndSelect) {
  std::vector<float> v = eval<float>(
      "f32", {"(< f32 (const f64 nan) (const f64 1))", "(>= f32 (const f64 nan) (const f64 1))",
              "(== f32 (const f64 nan) (const f64 nan))", "(!= f32 (const f64 nan) (const f64 nan))",
              "(<= f32 (const i32 2) (const i32 2))", "(> f32 (const i32 2) (const i32 2))",
              "(== f32 (const f64 -0) (const f64 0))", "(< f32 -5 3)",
              "(select f32 (const f64 nan) (const f32 1) (const f32 2))",
              "(select f32 (const f32 -0) (const f32 1) (const f32 2))",
              "(select f32 (const i32 -1) (const f32 1) (const f32 2))",
              "(select f32 0 (const f32 1) (const f32 2))"});
  EXPECT_EQ(v, (std::vector<float>{0, 0, 0, 1, 1, 0, 1, 1, 1, 2, 1, 2}));
  std::vector<int32_t> i = eval<int32_t>("i32", {"(< i32 (const f32 1) (const f32 2))",
                                                 "(select i32 (< 1 0) (const i32 5) (const i32 6))"});
  EXPECT_EQ(i, (std::vector<int32_t>{1, 6}));
}

TEST_F(InterpTest, SelectEvaluatesOnlyTheChosenOperand) {
  // A zero-padded shift: out[i] = x[i + 2] where i + 2 < 8, else 0. The load of the branch not
  // taken would be out of range.
  hal::ExecutableRef executable = must_compile(R"(
(kernel pad (nodes 0 1) (vars 1) (locals 0)
  (for v0 8 parallel
    (store 1 v0 (select f32 (< (+ v0 2) 8) (load f32 0 (+ v0 2)) (const f32 0)))))
)");
  ASSERT_TRUE(executable);
  hal::BufferRef in = buffer(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  hal::BufferRef out = buffer(std::vector<float>(8, -1));
  ASSERT_TRUE(run(executable, 0, 4, {{in}, {out}}).ok());
  EXPECT_EQ(read<float>(out), (std::vector<float>{3, 4, 5, 6, 7, 8, 0, 0}));
}

TEST_F(InterpTest, IfAndLocalsAreZeroFilled) {
  hal::ExecutableRef executable = must_compile(R"(
(kernel odd (nodes 0) (vars 2) (locals 1)
  (for v0 6
    (local 0 i64 3
      (if (== (- v0 (* (/ v0 2) 2)) 1)
        (local_store 0 2 v0))
      (store 0 v0 (+ (local_load i64 0 2) (local_load i64 0 0))))))
)");
  ASSERT_TRUE(executable);
  hal::BufferRef out = buffer(std::vector<int64_t>(6, -1));
  ASSERT_TRUE(run(executable, 0, 1, {{out}}).ok());
  EXPECT_EQ(read<int64_t>(out), (std::vector<int64_t>{0, 1, 0, 3, 0, 5}));
}

}  // namespace
}  // namespace kiln
