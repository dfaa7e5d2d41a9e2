// Language version 3's element types in the tensor IR: names, sizes, the promotion of every pair
// of types (a table written from the language's rules, docs/language.md, not from the code), and
// the typing rule of the bitwise ops, shifts, comparisons and casts.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir {
namespace {

using D = DType;

TEST(ElementTypes, NamesSizesAndKinds) {
  struct Case {
    DType type;
    const char* name;
    size_t size;
    const char* kind;  // b: bool, i: signed, u: unsigned, f: float
  };
  const Case cases[] = {
      {D::kBool, "bool", 1, "b"}, {D::kI8, "i8", 1, "i"},    {D::kU8, "u8", 1, "u"},     {D::kI16, "i16", 2, "i"},
      {D::kU16, "u16", 2, "u"},   {D::kI32, "i32", 4, "i"},  {D::kU32, "u32", 4, "u"},   {D::kI64, "i64", 8, "i"},
      {D::kU64, "u64", 8, "u"},   {D::kF16, "f16", 2, "f"},  {D::kBF16, "bf16", 2, "f"}, {D::kF32, "f32", 4, "f"},
      {D::kF64, "f64", 8, "f"},
  };
  ASSERT_EQ(std::size(kAllDTypes), std::size(cases));
  std::string list;
  for (size_t n = 0; n < std::size(cases); ++n) {
    const Case& c = cases[n];
    EXPECT_EQ(kAllDTypes[n], c.type) << c.name;
    EXPECT_EQ(dtype_name(c.type), c.name);
    EXPECT_EQ(dtype_from_name(c.name), c.type);
    EXPECT_EQ(dtype_size(c.type), c.size) << c.name;
    EXPECT_EQ(is_float_type(c.type), std::string(c.kind) == "f") << c.name;
    EXPECT_EQ(is_integer_type(c.type), std::string(c.kind) == "i" || std::string(c.kind) == "u") << c.name;
    EXPECT_EQ(is_unsigned_type(c.type), std::string(c.kind) == "u") << c.name;
    EXPECT_EQ(is_narrow_float(c.type), c.type == D::kF16 || c.type == D::kBF16) << c.name;
    // A cast to every type, named after it.
    EXPECT_EQ(cast_target(cast_op(c.type)), c.type) << c.name;
    EXPECT_EQ(op_name(cast_op(c.type)), c.name);
    list += (n ? ", " : "") + std::string(c.name);
  }
  EXPECT_EQ(dtype_list(), list);
  EXPECT_EQ(dtype_from_name("f8"), std::nullopt);
  EXPECT_EQ(dtype_from_name("F32"), std::nullopt);
  EXPECT_EQ(cast_target(Op::kAdd), std::nullopt);
}

// The promotion of two tensor operands (docs/language.md, "Promotion"): bool < integers < floats;
// within a kind the wider wins; a signed and an unsigned integer of one width give the next wider
// signed type; u64 with a signed type has none (--); f16 with bf16 gives f32; an integer with a
// float gives the float. Rows and columns in the order of kAllDTypes.
const char* const kPromotionTable[] = {
    //       bool i8   u8   i16  u16  i32  u32  i64  u64  f16  bf16 f32  f64
    /*bool*/ "bool i8   u8   i16  u16  i32  u32  i64  u64  f16  bf16 f32  f64",
    /*i8  */ "i8   i8   i16  i16  u16  i32  u32  i64  --   f16  bf16 f32  f64",
    /*u8  */ "u8   i16  u8   i16  u16  i32  u32  i64  u64  f16  bf16 f32  f64",
    /*i16 */ "i16  i16  i16  i16  i32  i32  u32  i64  --   f16  bf16 f32  f64",
    /*u16 */ "u16  u16  u16  i32  u16  i32  u32  i64  u64  f16  bf16 f32  f64",
    /*i32 */ "i32  i32  i32  i32  i32  i32  i64  i64  --   f16  bf16 f32  f64",
    /*u32 */ "u32  u32  u32  u32  u32  i64  u32  i64  u64  f16  bf16 f32  f64",
    /*i64 */ "i64  i64  i64  i64  i64  i64  i64  i64  --   f16  bf16 f32  f64",
    /*u64 */ "u64  --   u64  --   u64  --   u64  --   u64  f16  bf16 f32  f64",
    /*f16 */ "f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f32  f64",
    /*bf16*/ "bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 f32  bf16 f32  f64",
    /*f32 */ "f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64",
    /*f64 */ "f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64",
};

TEST(ElementTypes, PromotionOfEveryPair) {
  ASSERT_EQ(std::size(kPromotionTable), std::size(kAllDTypes));
  for (size_t r = 0; r < std::size(kAllDTypes); ++r) {
    std::istringstream row(kPromotionTable[r]);
    for (size_t c = 0; c < std::size(kAllDTypes); ++c) {
      std::string expected;
      ASSERT_TRUE(row >> expected) << "row " << r;
      const DType a = kAllDTypes[r], b = kAllDTypes[c];
      const std::optional<DType> got = promote_types(a, b);
      const std::string what = std::string(dtype_name(a)) + " with " + std::string(dtype_name(b));
      if (expected == "--") {
        EXPECT_EQ(got, std::nullopt) << what;
        EXPECT_EQ(promote(a, b), D::kU64) << what;  // past typing, which refused it
      } else {
        ASSERT_TRUE(got.has_value()) << what;
        EXPECT_EQ(dtype_name(*got), expected) << what;
        EXPECT_EQ(promote(a, b), *got) << what;
      }
    }
  }
}

TEST(ElementTypes, OpResultTypeOfTheNewOps) {
  // & | ^: bool (logical) or integers, promoted; not floats, not u64 with a signed type.
  for (Op op : {Op::kBitAnd, Op::kBitOr, Op::kBitXor}) {
    EXPECT_EQ(op_result_type(op, {D::kBool, D::kBool}), D::kBool) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kI8, D::kU8}), D::kI16) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kBool, D::kU32}), D::kU32) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kU64, D::kU64}), D::kU64) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kF32, D::kI32}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kF16, D::kF16}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kU64, D::kI32}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_arity(op), 2);
  }
  // ~ keeps its operand's type.
  EXPECT_EQ(op_result_type(Op::kBitNot, {D::kBool}), D::kBool);
  EXPECT_EQ(op_result_type(Op::kBitNot, {D::kU8}), D::kU8);
  EXPECT_EQ(op_result_type(Op::kBitNot, {D::kI64}), D::kI64);
  EXPECT_EQ(op_result_type(Op::kBitNot, {D::kBF16}), std::nullopt);
  EXPECT_EQ(op_result_type(Op::kBitNot, {D::kF64}), std::nullopt);
  EXPECT_EQ(op_arity(Op::kBitNot), 1);
  // << >>: the left operand's type; both integers (not bool, not floats).
  for (Op op : {Op::kShl, Op::kShr}) {
    EXPECT_EQ(op_result_type(op, {D::kU8, D::kI64}), D::kU8) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kI32, D::kU8}), D::kI32) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kU64, D::kI32}), D::kU64) << op_name(op);  // no common type needed
    EXPECT_EQ(op_result_type(op, {D::kBool, D::kI32}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kF32, D::kI32}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kI32, D::kF32}), std::nullopt) << op_name(op);
    EXPECT_EQ(op_arity(op), 2);
  }
  // Comparisons give bool, when their operands have a common type.
  for (Op op : {Op::kLt, Op::kLe, Op::kGt, Op::kGe, Op::kEq, Op::kNe}) {
    EXPECT_TRUE(is_comparison(op)) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kF16, D::kBF16}), D::kBool) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kBool, D::kBool}), D::kBool) << op_name(op);
    EXPECT_EQ(op_result_type(op, {D::kU64, D::kI32}), std::nullopt) << op_name(op);
  }
  EXPECT_FALSE(is_comparison(Op::kAdd));
  EXPECT_FALSE(is_comparison(Op::kBitAnd));
  // Casts give their type from any type.
  for (DType to : kAllDTypes) {
    for (DType from : kAllDTypes) EXPECT_EQ(op_result_type(cast_op(to), {from}), to) << dtype_name(to);
  }
  // Arithmetic: the promoted type; on bool it counts in i32.
  EXPECT_EQ(op_result_type(Op::kAdd, {D::kU8, D::kU8}), D::kU8);
  EXPECT_EQ(op_result_type(Op::kAdd, {D::kBool, D::kBool}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kNeg, {D::kBool}), D::kI32);
  EXPECT_EQ(op_result_type(Op::kMul, {D::kF16, D::kBF16}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kDiv, {D::kU64, D::kI8}), std::nullopt);
  EXPECT_EQ(op_result_type(Op::kExp, {D::kU8}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kExp, {D::kBool}), D::kF32);
  EXPECT_EQ(op_result_type(Op::kExp, {D::kF16}), D::kF16);
  EXPECT_EQ(op_result_type(Op::kAbs, {D::kI8}), D::kI8);
  EXPECT_EQ(op_result_type(Op::kMax, {D::kBool, D::kBool}), D::kBool);
  // select: the promoted type of its branches, whatever its condition's type.
  EXPECT_EQ(op_result_type(Op::kSelect, {D::kBool, D::kU8, D::kI8}), D::kI16);
  EXPECT_EQ(op_result_type(Op::kSelect, {D::kF32, D::kF16, D::kF16}), D::kF16);
  EXPECT_EQ(op_result_type(Op::kSelect, {D::kBool, D::kU64, D::kI64}), std::nullopt);
}

// Which values a literal or an INIT of an integer type may hold.
TEST(ElementTypes, IntegerValueFits) {
  EXPECT_TRUE(integer_value_fits(D::kBool, 0));
  EXPECT_TRUE(integer_value_fits(D::kBool, 1));
  EXPECT_FALSE(integer_value_fits(D::kBool, 2));
  EXPECT_FALSE(integer_value_fits(D::kBool, -1));
  EXPECT_TRUE(integer_value_fits(D::kU8, 255));
  EXPECT_FALSE(integer_value_fits(D::kU8, 256));
  EXPECT_FALSE(integer_value_fits(D::kU8, -1));
  EXPECT_TRUE(integer_value_fits(D::kI8, -128));
  EXPECT_FALSE(integer_value_fits(D::kI8, 128));
  EXPECT_FALSE(integer_value_fits(D::kI16, 0.5));
  EXPECT_TRUE(integer_value_fits(D::kI64, -9223372036854775808.0));
  EXPECT_FALSE(integer_value_fits(D::kI64, 9223372036854775808.0));
  EXPECT_TRUE(integer_value_fits(D::kU64, 18446744073709549568.0));  // the largest double below 2^64
  EXPECT_FALSE(integer_value_fits(D::kU64, 18446744073709551616.0));
}

// Reductions accumulate in a type of their own (docs/language.md, "Reductions").
TEST(ElementTypes, AccumulationTypes) {
  for (Reduce r : {Reduce::kSum, Reduce::kProd}) {
    EXPECT_EQ(accumulation_type(r, D::kBool), D::kI64);
    EXPECT_EQ(accumulation_type(r, D::kI8), D::kI64);
    EXPECT_EQ(accumulation_type(r, D::kI32), D::kI64);
    EXPECT_EQ(accumulation_type(r, D::kU8), D::kU64);
    EXPECT_EQ(accumulation_type(r, D::kU32), D::kU64);
    EXPECT_EQ(accumulation_type(r, D::kI64), D::kI64);
    EXPECT_EQ(accumulation_type(r, D::kF16), D::kF32);
    EXPECT_EQ(accumulation_type(r, D::kBF16), D::kF32);
    EXPECT_EQ(accumulation_type(r, D::kF32), D::kF32);
  }
  EXPECT_EQ(accumulation_type(Reduce::kMean, D::kU8), D::kF64);
  EXPECT_EQ(accumulation_type(Reduce::kMean, D::kBF16), D::kF32);
  EXPECT_EQ(accumulation_type(Reduce::kMax, D::kU8), D::kU8);
  EXPECT_EQ(accumulation_type(Reduce::kMin, D::kF16), D::kF16);
}

}  // namespace
}  // namespace kiln::ir
