// The reference semantics of the element types (kiln/loop/op_eval.h), checked against values
// written from the rules of docs/language.md and, for the f16 rounding, against the C++
// compiler's own _Float16 conversion where it has one.
#include "kiln/loop/op_eval.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kiln::ir {
namespace {

using D = DType;

Scalar I(int64_t v) { return Scalar{0, v}; }
Scalar F(double v) { return Scalar{v, 0}; }

int64_t binary_i(Op op, D t, int64_t a, int64_t b) {
  const D types[] = {t, t};
  const Scalar args[] = {I(a), I(b)};
  return eval_op(op, t, types, args).i;
}

Scalar cast(D from, Scalar v, D to) {
  const D types[] = {from};
  const Scalar args[] = {v};
  return eval_op(cast_op(to), to, types, args);
}

TEST(OpEvalTest, IntegersWrapAtTheirWidth) {
  EXPECT_EQ(binary_i(Op::kAdd, D::kI8, 127, 1), -128);
  EXPECT_EQ(binary_i(Op::kAdd, D::kU8, 255, 1), 0);
  EXPECT_EQ(binary_i(Op::kSub, D::kU8, 0, 1), 255);
  EXPECT_EQ(binary_i(Op::kMul, D::kI16, 300, 300), static_cast<int16_t>(90000 & 0xffff));
  EXPECT_EQ(binary_i(Op::kAdd, D::kU16, 65535, 2), 1);
  EXPECT_EQ(binary_i(Op::kAdd, D::kI32, INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(binary_i(Op::kAdd, D::kU32, 4294967295LL, 1), 0);
  EXPECT_EQ(binary_i(Op::kAdd, D::kI64, INT64_MAX, 1), INT64_MIN);
  // u64 holds its bit pattern: 2^64 - 1 + 1 wraps to 0.
  EXPECT_EQ(binary_i(Op::kAdd, D::kU64, -1, 1), 0);
}

TEST(OpEvalTest, DivisionByZeroAndMinOverMinusOne) {
  EXPECT_EQ(binary_i(Op::kDiv, D::kI8, 7, 0), 0);
  EXPECT_EQ(binary_i(Op::kDiv, D::kU32, 7, 0), 0);
  EXPECT_EQ(binary_i(Op::kDiv, D::kI8, -128, -1), -128);
  EXPECT_EQ(binary_i(Op::kDiv, D::kI16, -32768, -1), -32768);
  EXPECT_EQ(binary_i(Op::kDiv, D::kI64, INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(binary_i(Op::kDiv, D::kI32, -7, 2), -3);  // toward zero
  // u64 divides unsigned: (2^64 - 2) / 2 = 2^63 - 1.
  EXPECT_EQ(binary_i(Op::kDiv, D::kU64, -2, 2), INT64_MAX);
}

TEST(OpEvalTest, U64ComparesUnsigned) {
  const D types[] = {D::kU64, D::kU64};
  const Scalar args[] = {I(std::numeric_limits<int64_t>::min()), I(1)};  // 2^63 > 1
  EXPECT_EQ(eval_op(Op::kGt, D::kBool, types, args).i, 1);
  EXPECT_EQ(binary_i(Op::kMax, D::kU64, INT64_MIN, 1), INT64_MIN);
  EXPECT_EQ(binary_i(Op::kMin, D::kU64, INT64_MIN, 1), 1);
}

TEST(OpEvalTest, BitwiseOpsAndShifts) {
  EXPECT_EQ(binary_i(Op::kBitAnd, D::kU8, 0xf0, 0x3c), 0x30);
  EXPECT_EQ(binary_i(Op::kBitOr, D::kI8, 0x0f, -128), -113);
  EXPECT_EQ(binary_i(Op::kBitXor, D::kBool, 1, 1), 0);
  const D u8[] = {D::kU8};
  EXPECT_EQ(eval_op(Op::kBitNot, D::kU8, u8, std::vector<Scalar>{I(0)}).i, 255);
  const D b[] = {D::kBool};
  EXPECT_EQ(eval_op(Op::kBitNot, D::kBool, b, std::vector<Scalar>{I(1)}).i, 0);
  EXPECT_EQ(binary_i(Op::kShl, D::kU8, 0x81, 1), 0x02);
  EXPECT_EQ(binary_i(Op::kShl, D::kI32, 1, 31), INT32_MIN);
  EXPECT_EQ(binary_i(Op::kShl, D::kI32, 1, 32), 0);   // at the width
  EXPECT_EQ(binary_i(Op::kShl, D::kI32, 1, -1), 0);   // negative
  EXPECT_EQ(binary_i(Op::kShr, D::kI8, -128, 3), -16);  // arithmetic
  EXPECT_EQ(binary_i(Op::kShr, D::kI8, -128, 8), -1);   // a negative value by the width
  EXPECT_EQ(binary_i(Op::kShr, D::kI8, 100, 8), 0);
  EXPECT_EQ(binary_i(Op::kShr, D::kU64, -1, 63), 1);    // logical
  // The amount keeps its own type: a u8 shifted by an i32 257 is past the width.
  const D mixed[] = {D::kU8, D::kI32};
  const Scalar args[] = {I(1), I(257)};
  EXPECT_EQ(eval_op(Op::kShl, D::kU8, mixed, args).i, 0);
}

TEST(OpEvalTest, FloatToIntegerCastsTruncateAndSaturate) {
  EXPECT_EQ(cast(D::kF32, F(2.9), D::kI8).i, 2);
  EXPECT_EQ(cast(D::kF32, F(-2.9), D::kI8).i, -2);
  EXPECT_EQ(cast(D::kF32, F(1000), D::kI8).i, 127);
  EXPECT_EQ(cast(D::kF32, F(-1000), D::kI8).i, -128);
  EXPECT_EQ(cast(D::kF32, F(-5), D::kU8).i, 0);
  EXPECT_EQ(cast(D::kF32, F(300), D::kU8).i, 255);
  EXPECT_EQ(cast(D::kF64, F(1e30), D::kU64).i, -1);  // 2^64 - 1
  EXPECT_EQ(cast(D::kF64, F(-1e30), D::kI64).i, INT64_MIN);
  EXPECT_EQ(cast(D::kF64, F(std::ldexp(1.0, 63)), D::kU64).i, INT64_MIN);  // 2^63 exactly
  EXPECT_EQ(cast(D::kF32, F(std::numeric_limits<double>::quiet_NaN()), D::kI32).i, 0);
  EXPECT_EQ(cast(D::kF32, F(std::numeric_limits<double>::infinity()), D::kU16).i, 65535);
  // To bool: != 0, NaN included.
  EXPECT_EQ(cast(D::kF32, F(0.25), D::kBool).i, 1);
  EXPECT_EQ(cast(D::kF32, F(-0.0), D::kBool).i, 0);
  EXPECT_EQ(cast(D::kF32, F(std::numeric_limits<double>::quiet_NaN()), D::kBool).i, 1);
  EXPECT_EQ(cast(D::kI32, I(256), D::kBool).i, 1);
}

TEST(OpEvalTest, IntegerConversionsWrap) {
  EXPECT_EQ(cast(D::kI32, I(300), D::kU8).i, 44);
  EXPECT_EQ(cast(D::kI32, I(-1), D::kU16).i, 65535);
  EXPECT_EQ(cast(D::kU8, I(200), D::kI8).i, -56);
  EXPECT_EQ(cast(D::kI64, I(-1), D::kU64).i, -1);
  EXPECT_EQ(cast(D::kU64, I(-1), D::kF64).f, std::ldexp(1.0, 64));  // read unsigned
  EXPECT_EQ(cast(D::kBool, I(1), D::kF16).f, 1.0);
}

TEST(OpEvalTest, F16AndBf16RoundToNearestEven) {
  EXPECT_EQ(f16_bits(1.0), 0x3c00);
  EXPECT_EQ(f16_bits(65504.0), 0x7bff);
  EXPECT_EQ(f16_bits(65519.99), 0x7bff);
  EXPECT_EQ(f16_bits(65520.0), 0x7c00);  // halfway to 2^16 rounds up: inf
  EXPECT_EQ(f16_bits(-1e9), 0xfc00);
  EXPECT_EQ(f16_bits(std::ldexp(1.0, -24)), 0x0001);   // the least subnormal
  EXPECT_EQ(f16_bits(std::ldexp(1.0, -25)), 0x0000);   // halfway to it: even is 0
  EXPECT_EQ(f16_bits(std::ldexp(3.0, -25)), 0x0002);   // 1.5 quanta: even is 2
  EXPECT_EQ(f16_bits(1.0 + std::ldexp(1.0, -11)), 0x3c00);      // halfway: even
  EXPECT_EQ(f16_bits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);  // halfway: even
  EXPECT_EQ(f16_bits(-0.0), 0x8000);
  EXPECT_EQ(f16_bits(std::numeric_limits<double>::quiet_NaN()) & 0x7c00, 0x7c00);
  EXPECT_NE(f16_bits(std::numeric_limits<double>::quiet_NaN()) & 0x3ff, 0);
  EXPECT_EQ(bf16_bits(1.0), 0x3f80);
  EXPECT_EQ(bf16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // halfway: even
  EXPECT_EQ(bf16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // halfway: even
  EXPECT_EQ(bf16_bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_bits(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // f32's largest: inf
  EXPECT_EQ(bf16_bits(std::bit_cast<float>(0x00010000u)), 0x0001);  // a subnormal stays
  EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(std::numeric_limits<double>::quiet_NaN()))));
}

TEST(OpEvalTest, EveryF16AndBf16PatternReadsBackToItself) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double f = f16_value(bits), g = bf16_value(bits);
    if (!std::isnan(f)) {
      EXPECT_EQ(f16_bits(f), bits) << std::hex << b;
    }
    if (std::isnan(g)) continue;
    EXPECT_EQ(bf16_bits(g), bits) << std::hex << b;
    // bf16 is the upper half of an f32.
    EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(g)) >> 16, b) << std::hex << b;
  }
}

TEST(OpEvalTest, Bf16RoundingMatchesTheF32BitRule) {
  // Round to nearest even on the f32 bits: add 0x7fff plus the lowest kept bit.
  std::mt19937 rng(7);
  for (int n = 0; n < 200000; ++n) {
    const auto u = static_cast<uint32_t>(rng());
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    const uint32_t rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
    EXPECT_EQ(bf16_bits(x), rounded) << std::hex << u;
  }
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
TEST(OpEvalTest, F16RoundingMatchesTheCompilersFloat16) {
  std::mt19937 rng(11);
  for (int n = 0; n < 200000; ++n) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t expected = 0;
    std::memcpy(&expected, &h, sizeof expected);
    EXPECT_EQ(f16_bits(x), expected) << x;
  }
}
#endif

TEST(OpEvalTest, ElementsInMemory) {
  unsigned char bytes[8] = {};
  store_scalar(D::kBF16, F(1.0), bytes);
  EXPECT_EQ(bytes[0] | (bytes[1] << 8), 0x3f80);
  EXPECT_EQ(load_scalar(D::kBF16, bytes).f, 1.0);
  store_scalar(D::kU8, I(-1), bytes);
  EXPECT_EQ(load_scalar(D::kU8, bytes).i, 255);
  EXPECT_EQ(load_scalar(D::kI8, bytes).i, -1);
  store_scalar(D::kF16, F(0.1), bytes);
  EXPECT_EQ(load_scalar(D::kF16, bytes).f, f16_value(0x2e66));
  bytes[0] = 7;
  EXPECT_EQ(load_scalar(D::kBool, bytes).i, 1);  // any non-zero byte is true
}

TEST(OpEvalTest, PromotionTable) {
  EXPECT_EQ(promote_types(D::kU8, D::kI8), D::kI16);
  EXPECT_EQ(promote_types(D::kU16, D::kI16), D::kI32);
  EXPECT_EQ(promote_types(D::kU32, D::kI32), D::kI64);
  EXPECT_EQ(promote_types(D::kU64, D::kI8), std::nullopt);
  EXPECT_EQ(promote_types(D::kU32, D::kI8), D::kU32);  // the wider wins
  EXPECT_EQ(promote_types(D::kF16, D::kBF16), D::kF32);
  EXPECT_EQ(promote_types(D::kBool, D::kU8), D::kU8);
  EXPECT_EQ(promote_types(D::kI64, D::kF16), D::kF16);
  EXPECT_EQ(promote_types(D::kF16, D::kF64), D::kF64);
  for (D a : kAllDTypes) {
    for (D b : kAllDTypes) EXPECT_EQ(promote_types(a, b), promote_types(b, a));
  }
}

TEST(OpEvalTest, AccumulationTypes) {
  EXPECT_EQ(accumulation_type(Reduce::kSum, D::kU8), D::kU64);
  EXPECT_EQ(accumulation_type(Reduce::kSum, D::kBool), D::kI64);
  EXPECT_EQ(accumulation_type(Reduce::kProd, D::kI16), D::kI64);
  EXPECT_EQ(accumulation_type(Reduce::kSum, D::kBF16), D::kF32);
  EXPECT_EQ(accumulation_type(Reduce::kMean, D::kI32), D::kF64);
  EXPECT_EQ(accumulation_type(Reduce::kMax, D::kU8), D::kU8);
  EXPECT_EQ(accumulation_type(Reduce::kSum, D::kF32), D::kF32);
}

}  // namespace
}  // namespace kiln::ir
