// The loop-IR optimization passes (kiln/loop/optimize.h) on hand-built kernels: the printed result
// of each pass, and every safety rule — reference semantics when folding (wrap-around, x / 0,
// saturating casts, NaN, f32 rounding), no inexact float identity, and no hoisting of a load
// that the loop would not always run (if bodies, select operands, extent-0 loops) or of anything
// the loop writes. Every result must stay valid: parse_kernel(print_kernel(k)) reproduces it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/loop/loop.h"
#include "kiln/loop/optimize.h"
#include "loop/loop_builders.h"

namespace kiln::ir {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr DType kF32 = DType::kF32;
constexpr DType kF64 = DType::kF64;
constexpr DType kI32 = DType::kI32;
constexpr DType kI64 = DType::kI64;

using namespace loop_builders;

Kernel kernel(std::vector<int> nodes, int vars, int locals, LStmtRef body) {
  Kernel k;
  k.name = "k";
  k.nodes = std::move(nodes);
  k.var_count = vars;
  k.local_count = locals;
  k.body = std::move(body);
  return k;
}

// A kernel storing expression i (without loop variables) at element i of one node per type.
Kernel stores(std::vector<LExprRef> values) {
  std::vector<LStmtRef> body;
  for (size_t i = 0; i < values.size(); ++i) {
    body.push_back(lstore(static_cast<int>(values[i]->type), i64(static_cast<int64_t>(i)), values[i]));
  }
  return kernel({0, 1, 2, 3}, 0, 0, lblock(std::move(body)));
}

// Runs `pass` on `k` and returns the printed result, after checking that it is valid (it
// parses, and prints back identically) and that the pass is idempotent.
std::string after(const std::function<void(Kernel&)>& pass, Kernel k) {
  pass(k);
  const std::string text = print_kernel(k);
  Result<Kernel> parsed = parse_kernel(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string() << "\n" << text;
  if (parsed.ok()) {
    EXPECT_EQ(print_kernel(*parsed), text);
  }
  Kernel again = k;
  pass(again);
  EXPECT_EQ(print_kernel(again), text) << "the pass is not idempotent";
  return text;
}

// The value stored by statement i of a `stores` kernel after folding.
LExprRef folded_value(Kernel k, size_t i) {
  fold_constants(k);
  return k.body->body.at(i)->value;
}

// ---------------------------------------------------------------------------------------------
// fold_constants

TEST(FoldConstantsTest, IntegerArithmeticWrapsAndDividesLikeTheReference) {
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  Kernel k = stores({
      add(c(kI32, 2147483647), c(kI32, 1), kI32),                  // wraps to INT32_MIN
      mul(c(kI32, 65536), c(kI32, 65536), kI32),                   // 2^32 wraps to 0
      op(Op::kDiv, kI32, {c(kI32, 7), c(kI32, 0)}),                // x / 0 == 0
      op(Op::kDiv, kI32, {c(kI32, min32), c(kI32, -1)}),           // INT32_MIN / -1
      op(Op::kDiv, kI32, {c(kI32, -7), c(kI32, 2)}),               // truncates toward zero
      op(Op::kNeg, kI32, {c(kI32, min32)}),                        // wraps
      op(Op::kAbs, kI32, {c(kI32, min32)}),                        // abs(INT32_MIN) == INT32_MIN
      op(Op::kPow, kI32, {c(kI32, 3), c(kI32, 40)}),               // in f64, saturated back
      mul(c(kI64, 4611686018427387904.0), c(kI64, 2), kI64),       // 2^63 wraps to INT64_MIN
      op(Op::kCastI32, kI32, {c(kF32, 3e9)}),                      // saturates
      op(Op::kCastI32, kI32, {c(kF64, -2.7)}),                     // truncates
      op(Op::kCastI32, kI32, {c(kF64, kNaN)}),                     // NaN becomes 0
      op(Op::kCastI32, kI32, {c(kI64, -1e12)}),                    // integers wrap (2^32 - 10^12 % 2^32)
      op(Op::kLt, kI32, {c(kI32, -1), c(kI32, 0)}),                // comparisons give 1 / 0
  });
  const std::vector<double> expected = {-2147483648.0, 0, 0, -2147483648.0, -3, -2147483648.0,
                                        -2147483648.0, 2147483647.0, -9223372036854775808.0,
                                        2147483647.0, -2, 0, 727379968.0, 1};
  for (size_t i = 0; i < expected.size(); ++i) {
    LExprRef e = folded_value(k, i);
    ASSERT_EQ(e->kind, LExpr::Kind::kConst) << "statement " << i;
    EXPECT_EQ(e->value, expected[i]) << "statement " << i;
  }
  after(fold_constants, k);
}

TEST(FoldConstantsTest, I64ValuesWithoutAnExactDoubleAreNotFolded) {
  // A constant holds a double: 2^62 + 1 cannot be one, so a sum whose constant part would be it
  // stays as written (+ 0 included); where the constants cancel, the sum folds.
  const double big = 4611686018427387904.0;  // 2^62
  Kernel k = kernel({0, 1}, 1, 0, lfor(0, 2, false, {
      lstore(1, add(i64(0), add(c(kI64, big), i64(1))), load(0, kF32, v(0))),
      lstore(1, sub(add(add(v(0), c(kI64, big)), i64(1)), c(kI64, big)), load(0, kF32, v(0))),
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1) (vars 1) (locals 0)\n"
            "  (for v0 2\n"
            "    (store 1 (+ 0 (+ 4611686018427387904 1)) (load f32 0 v0))\n"
            "    (store 1 (+ v0 1) (load f32 0 v0))))\n");
}

TEST(FoldConstantsTest, FloatResultsFollowTheReferenceAndRoundToF32) {
  Kernel k = stores({
      add(c(kF32, 0.1), c(kF32, 0.2), kF32),
      add(c(kF64, 0.1), c(kF64, 0.2), kF64),
      op(Op::kCastF32, kF32, {c(kF64, 1.0 / 3.0)}),
      op(Op::kExp, kF32, {c(kF32, 1)}),
      op(Op::kSigmoid, kF64, {c(kF64, 0)}),
      op(Op::kFma, kF64, {c(kF64, 2), c(kF64, 3), c(kF64, 4)}),
  });
  const double f32_sum = static_cast<double>(static_cast<float>(
      static_cast<double>(0.1f) + static_cast<double>(0.2f)));
  const std::vector<double> expected = {f32_sum, 0.1 + 0.2,
                                        static_cast<double>(static_cast<float>(1.0 / 3.0)),
                                        static_cast<double>(static_cast<float>(std::exp(1.0))),
                                        0.5, 10};
  for (size_t i = 0; i < expected.size(); ++i) {
    LExprRef e = folded_value(k, i);
    ASSERT_EQ(e->kind, LExpr::Kind::kConst) << "statement " << i;
    EXPECT_EQ(e->value, expected[i]) << "statement " << i;
  }
  after(fold_constants, k);
}

// f16 and bf16 values are computed in f32 and rounded only where they are stored or cast, but a
// constant of those types holds a rounded value: only results the type holds exactly fold
// (sin(1.5) folded into a bf16 constant would be 0.99609375 instead of 0.997495).
TEST(FoldConstantsTest, NarrowFloatResultsFoldOnlyWhereTheTypeHoldsThem) {
  constexpr DType kF16 = DType::kF16, kBF16 = DType::kBF16;
  Kernel k = kernel({0, 1}, 0, 0, lblock({
      lstore(0, i64(0), op(Op::kSin, kBF16, {c(kBF16, 1.5)})),
      lstore(1, i64(1), mul(c(kF16, 1.5), c(kF16, 1.5), kF16)),           // 2.25
      lstore(1, i64(2), op(Op::kDiv, kF16, {c(kF16, 1), c(kF16, 3)})),    // 1/3: not an f16
      lstore(0, i64(3), op(Op::kCastBF16, kBF16, {c(kF32, 1.0 / 3.0)})),  // a cast rounds
  }));
  EXPECT_EQ(folded_value(k, 0)->kind, LExpr::Kind::kOp);
  EXPECT_EQ(folded_value(k, 1)->kind, LExpr::Kind::kConst);
  EXPECT_EQ(folded_value(k, 1)->value, 2.25);
  EXPECT_EQ(folded_value(k, 2)->kind, LExpr::Kind::kOp);
  EXPECT_EQ(folded_value(k, 3)->kind, LExpr::Kind::kConst);
  EXPECT_EQ(folded_value(k, 3)->value, 0.333984375);
  after(fold_constants, k);
}

TEST(FoldConstantsTest, NaNRules) {
  Kernel k = stores({
      op(Op::kMax, kF32, {c(kF32, kNaN), c(kF32, 1)}),
      op(Op::kMin, kF64, {c(kF64, 1), c(kF64, kNaN)}),
      op(Op::kRelu, kF32, {c(kF32, kNaN)}),
      op(Op::kSqrt, kF64, {c(kF64, -1)}),
      add(c(kF32, std::numeric_limits<double>::infinity()),
          c(kF32, -std::numeric_limits<double>::infinity()), kF32),
      op(Op::kEq, kF32, {c(kF32, kNaN), c(kF32, kNaN)}),
      op(Op::kNe, kF32, {c(kF32, kNaN), c(kF32, kNaN)}),
  });
  for (size_t i = 0; i < 5; ++i) {
    LExprRef e = folded_value(k, i);
    ASSERT_EQ(e->kind, LExpr::Kind::kConst) << "statement " << i;
    EXPECT_TRUE(std::isnan(e->value)) << "statement " << i;
  }
  EXPECT_EQ(folded_value(k, 5)->value, 0);
  EXPECT_EQ(folded_value(k, 6)->value, 1);
  after(fold_constants, k);
}

TEST(FoldConstantsTest, FloatAdditionOfZeroIsKept) {
  // -0.0 + 0.0 is +0.0, so x + 0.0 is not x; x - 0.0, x * 0.0 are not folded either. x * 1 and
  // x / 1 are exact for every float (NaN, infinities and -0.0 included).
  LExprRef x = load(1, kF32, i64(0));
  LExprRef y = load(2, kF64, i64(0));
  Kernel k = kernel({0, 1, 2, 3}, 0, 0, lblock({
      lstore(0, i64(0), add(x, c(kF32, 0), kF32)),
      lstore(0, i64(1), add(c(kF32, 0), x, kF32)),
      lstore(0, i64(2), sub(x, c(kF32, 0), kF32)),
      lstore(0, i64(3), mul(x, c(kF32, 0), kF32)),
      lstore(0, i64(4), mul(x, c(kF32, 1), kF32)),
      lstore(0, i64(5), mul(c(kF32, 1), x, kF32)),
      lstore(3, i64(0), op(Op::kDiv, kF64, {y, c(kF64, 1)})),
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1 2 3) (vars 0) (locals 0)\n"
            "  (block\n"
            "    (store 0 0 (+ f32 (load f32 1 0) (const f32 0)))\n"
            "    (store 0 1 (+ f32 (const f32 0) (load f32 1 0)))\n"
            "    (store 0 2 (- f32 (load f32 1 0) (const f32 0)))\n"
            "    (store 0 3 (* f32 (load f32 1 0) (const f32 0)))\n"
            "    (store 0 4 (load f32 1 0))\n"
            "    (store 0 5 (load f32 1 0))\n"
            "    (store 3 0 (load f64 2 0))))\n");
}

TEST(FoldConstantsTest, IntegerIdentities) {
  LExprRef x = load(1, kI32, i64(0));
  Kernel k = kernel({0, 1}, 0, 0, lblock({
      lstore(0, i64(0), add(x, c(kI32, 0), kI32)),
      lstore(0, i64(1), sub(x, c(kI32, 0), kI32)),
      lstore(0, i64(2), mul(x, c(kI32, 0), kI32)),
      lstore(0, i64(3), mul(c(kI32, 1), x, kI32)),
      lstore(0, i64(4), op(Op::kDiv, kI32, {x, c(kI32, 1)})),
      lstore(0, i64(5), sub(x, x, kI32)),
      lstore(0, i64(6), add(x, add(x, c(kI32, 2147483647), kI32), kI32)),
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1) (vars 0) (locals 0)\n"
            "  (block\n"
            "    (store 0 0 (load i32 1 0))\n"
            "    (store 0 1 (load i32 1 0))\n"
            "    (store 0 2 (const i32 0))\n"
            "    (store 0 3 (load i32 1 0))\n"
            "    (store 0 4 (load i32 1 0))\n"
            "    (store 0 5 (const i32 0))\n"
            "    (store 0 6 (+ i32 (* i32 (load i32 1 0) (const i32 2)) (const i32 2147483647)))))\n");
}

// Language version 3: every integer width folds modulo its own 2^bits, a coefficient or
// constant that reads negative in the type subtracted (x - 1 in u8, not x + 255); bool is no
// ring (its + is op_eval's or), so it is left as written; casts, shifts and bitwise ops of
// constants fold like the reference.
TEST(FoldConstantsTest, NarrowIntegersFoldModuloTheirWidth) {
  const DType u8 = DType::kU8, i8 = DType::kI8, u16 = DType::kU16, u64 = DType::kU64, b = DType::kBool;
  Kernel k = kernel({0, 1, 2, 3, 4, 5}, 0, 0, lblock({
      lstore(0, i64(0), add(add(load(1, u8, i64(0)), c(u8, 200), u8), c(u8, 100), u8)),
      lstore(0, i64(1), add(load(1, u8, i64(0)), c(u8, 255), u8)),
      lstore(2, i64(0), sub(c(i8, 127), sub(c(i8, -128), load(2, i8, i64(1)), i8), i8)),
      lstore(3, i64(0), mul(mul(load(3, u16, i64(0)), c(u16, 256), u16), c(u16, 256), u16)),
      lstore(4, i64(0), add(load(4, u64, i64(0)), c(u64, 18446744073709551616.0), u64)),
      lstore(5, i64(0), add(load(5, b, i64(0)), load(5, b, i64(0)), b)),
      lstore(5, i64(1), op(Op::kBitNot, b, {c(b, 1)})),
      lstore(2, i64(1), op(Op::kShr, i8, {c(i8, -128), c(DType::kU8, 9)})),
      lstore(0, i64(2), op(Op::kCastU8, u8, {c(DType::kF32, -3.5)})),
      lstore(0, i64(3), op(Op::kCastU8, u8, {c(DType::kI32, 1000)})),
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1 2 3 4 5) (vars 0) (locals 0)\n"
            "  (block\n"
            "    (store 0 0 (+ u8 (load u8 1 0) (const u8 44)))\n"
            "    (store 0 1 (- u8 (load u8 1 0) (const u8 1)))\n"
            "    (store 2 0 (- i8 (load i8 2 1) (const i8 1)))\n"
            "    (store 3 0 (const u16 0))\n"
            "    (store 4 0 (- u64 (load u64 4 0) (const u64 1)))\n"
            "    (store 5 0 (+ bool (load bool 5 0) (load bool 5 0)))\n"
            "    (store 5 1 (const bool 0))\n"
            "    (store 2 1 (const i8 -1))\n"
            "    (store 0 2 (const u8 0))\n"
            "    (store 0 3 (const u8 232))))\n");
}

TEST(FoldConstantsTest, OffsetArithmeticCombinesConstants) {
  // ((v0 + 1) * 8 + (v1 + 0)) * 1 - 3  ==>  v0 * 8 + v1 + 5; 2 * v0 + v0 * 3 ==> v0 * 5.
  LExprRef offset = sub(mul(add(mul(add(v(0), i64(1)), i64(8)), add(v(1), i64(0))), i64(1)), i64(3));
  Kernel k = kernel({0, 1}, 2, 0, lfor(0, 4, true, {lfor(1, 8, false, {
      lstore(1, offset, load(0, kF32, add(mul(i64(2), v(0)), mul(v(0), i64(3))))),
      lstore(1, sub(i64(5), v(1)), load(0, kF32, sub(add(v(1), i64(3)), i64(3)))),
      lstore(1, sub(i64(0), v(1)), load(0, kF32, add(mul(v(0), i64(0)), v(1)))),
  })}));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1) (vars 2) (locals 0)\n"
            "  (for v0 4 parallel\n"
            "    (for v1 8\n"
            "      (store 1 (+ (+ (* v0 8) v1) 5) (load f32 0 (* v0 5)))\n"
            "      (store 1 (- 5 v1) (load f32 0 v1))\n"
            "      (store 1 (neg v1) (load f32 0 v1)))))\n");
}

TEST(FoldConstantsTest, FloatSquaresBecomeProducts) {
  LExprRef x = load(4, kF32, i64(0));
  LExprRef n = load(5, kI32, i64(0));
  Kernel k = kernel({0, 1, 2, 3, 4, 5}, 0, 0, lblock({
      lstore(0, i64(0), op(Op::kPow, kF32, {x, c(kF32, 2)})),
      lstore(0, i64(1), op(Op::kPow, kF32, {x, c(kF32, 3)})),   // not one rounding: kept
      lstore(2, i64(0), op(Op::kPow, kI32, {n, c(kI32, 2)})),   // integers saturate: kept
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1 2 3 4 5) (vars 0) (locals 0)\n"
            "  (block\n"
            "    (store 0 0 (* f32 (load f32 4 0) (load f32 4 0)))\n"
            "    (store 0 1 (pow f32 (load f32 4 0) (const f32 3)))\n"
            "    (store 2 0 (pow i32 (load i32 5 0) (const i32 2)))))\n");
}

TEST(FoldConstantsTest, SelectAndIfWithConstantConditions) {
  LExprRef a = load(1, kF32, i64(0));
  LExprRef b = load(1, kF32, i64(99));  // out of range: must stay unevaluated
  Kernel k = kernel({0, 1}, 0, 0, lblock({
      lstore(0, i64(0), op(Op::kSelect, kF32, {c(kI64, 1), a, b})),
      lstore(0, i64(1), op(Op::kSelect, kF32, {c(kI32, 0), b, a})),
      lstore(0, i64(2), op(Op::kSelect, kF32, {c(kF32, kNaN), a, b})),  // NaN != 0 holds
      lif(op(Op::kLt, kI64, {i64(1), i64(2)}), {lstore(0, i64(3), a)}),
      lif(op(Op::kGt, kI64, {i64(1), i64(2)}), {lstore(0, i64(4), b)}),
  }));
  EXPECT_EQ(after(fold_constants, k),
            "(kernel k (nodes 0 1) (vars 0) (locals 0)\n"
            "  (block\n"
            "    (store 0 0 (load f32 1 0))\n"
            "    (store 0 1 (load f32 1 0))\n"
            "    (store 0 2 (load f32 1 0))\n"
            "    (store 0 3 (load f32 1 0))))\n");
}

// ---------------------------------------------------------------------------------------------
// split_borders

// split_borders, then the folding that removes the checks it decided.
void split_and_fold(Kernel& k) {
  split_borders(k);
  fold_constants(k);
}

TEST(SplitBordersTest, TheInteriorLosesItsRangeChecks) {
  // y[c, j] = x[c, j + 1] where that is inside x, else 0: the last column reads past the row.
  LExprRef inside = op(Op::kLt, kI64, {add(v(1), i64(1)), i64(16)});
  LExprRef at = add(mul(v(0), i64(16)), add(v(1), i64(1)));
  Kernel k = kernel({0, 1}, 2, 0, for_(0, 4, {for_(1, 16, {
      store(0, add(mul(v(0), i64(16)), v(1)),
            op(Op::kSelect, kF32, {inside, load(1, kF32, op(Op::kSelect, kI64, {inside, at, i64(0)})), c(kF32, 0)})),
  })}, /*parallel=*/true));
  EXPECT_EQ(after(split_and_fold, k),
            "(kernel k (nodes 0 1) (vars 2) (locals 0)\n"
            "  (for v0 4 parallel\n"
            "    (block\n"
            "      (for v1 15\n"
            "        (store 0 (+ (* v0 16) v1) (load f32 1 (+ (+ (* v0 16) v1) 1))))\n"
            "      (for v1 1\n"
            "        (store 0 (+ (+ (* v0 16) v1) 15) (select f32 (< (+ v1 16) 16) "
            "(load f32 1 (select (< (+ v1 16) 16) (+ (+ (* v0 16) v1) 16) 0)) (const f32 0)))))))\n");
}

TEST(SplitBordersTest, LeavesShortInteriorsParallelLoopsAndChecksOfTwoVariables) {
  // The parallel loop itself; an interior of 3 in 8; a check that also reads v2.
  LExprRef parallel_check = op(Op::kLt, kI64, {v(0), i64(60)});
  LExprRef short_check = op(Op::kGe, kI64, {sub(v(1), i64(5)), i64(0)});
  LExprRef two_vars = op(Op::kLt, kI64, {add(v(1), v(2)), i64(16)});
  Kernel k = kernel({0}, 3, 0, for_(0, 64, {
      for_(1, 8, {store(0, v(1), op(Op::kSelect, kF32, {short_check, c(kF32, 1), c(kF32, 2)}))}),
      for_(1, 16, {for_(2, 4, {store(0, v(1), op(Op::kSelect, kF32, {two_vars, c(kF32, 1), c(kF32, 2)}))})}),
      store(0, v(0), op(Op::kSelect, kF32, {parallel_check, c(kF32, 1), c(kF32, 2)})),
  }, /*parallel=*/true));
  Kernel split = k;
  EXPECT_FALSE(split_borders(split));
  EXPECT_EQ(print_kernel(split), print_kernel(k));
}

// ---------------------------------------------------------------------------------------------
// form_fma

TEST(FormFmaTest, FloatMultiplyAddsBecomeFma) {
  LExprRef a = load(1, kF32, v(0)), b = load(2, kF32, v(0)), cc = load(3, kF32, v(0));
  LExprRef d = load(4, kF64, v(0));
  LExprRef n = load(5, kI32, v(0));
  Kernel k = kernel({0, 1, 2, 3, 4, 5}, 1, 0, lfor(0, 8, true, {
      lstore(0, v(0), add(mul(a, b, kF32), cc, kF32)),
      lstore(0, add(v(0), i64(8)), add(cc, mul(a, b, kF32), kF32)),
      lstore(0, add(v(0), i64(16)), add(mul(a, b, kF32), mul(b, cc, kF32), kF32)),
      lstore(0, add(v(0), i64(24)), sub(mul(a, b, kF32), cc, kF32)),  // not fused
      lstore(4, v(0), add(mul(d, d, kF64), d, kF64)),
      lstore(5, v(0), add(mul(n, n, kI32), n, kI32)),                 // integers: not fused
  }));
  EXPECT_EQ(after(form_fma, k),
            "(kernel k (nodes 0 1 2 3 4 5) (vars 1) (locals 0)\n"
            "  (for v0 8 parallel\n"
            "    (store 0 v0 (fma f32 (load f32 1 v0) (load f32 2 v0) (load f32 3 v0)))\n"
            "    (store 0 (+ v0 8) (fma f32 (load f32 1 v0) (load f32 2 v0) (load f32 3 v0)))\n"
            "    (store 0 (+ v0 16) (fma f32 (load f32 1 v0) (load f32 2 v0) (* f32 (load f32 2 v0) (load f32 3 v0))))\n"
            "    (store 0 (+ v0 24) (- f32 (* f32 (load f32 1 v0) (load f32 2 v0)) (load f32 3 v0)))\n"
            "    (store 4 v0 (fma f64 (load f64 4 v0) (load f64 4 v0) (load f64 4 v0)))\n"
            "    (store 5 v0 (+ i32 (* i32 (load i32 5 v0) (load i32 5 v0)) (load i32 5 v0)))))\n");
}

// ---------------------------------------------------------------------------------------------
// hoist_invariants

TEST(HoistInvariantsTest, InvariantOfAnInnerLoopMovesBeforeIt) {
  // The top parallel loop is never hoisted out of; (load 3 0) is invariant there too, but goes
  // only before the inner loop. Pure index arithmetic ((* v0 8)) is not worth a local.
  LExprRef row = load(2, kF32, v(0));
  Kernel k = kernel({0, 1, 2, 3}, 2, 0, lfor(0, 4, true, {lfor(1, 8, false, {
      lstore(1, add(mul(v(0), i64(8)), v(1)),
             add(load(0, kF32, add(mul(v(0), i64(8)), v(1))),
                 mul(op(Op::kExp, kF32, {row}), load(3, kF32, i64(0)), kF32), kF32)),
  })}));
  EXPECT_EQ(after(hoist_invariants, k),
            "(kernel k (nodes 0 1 2 3) (vars 2) (locals 1)\n"
            "  (for v0 4 parallel\n"
            "    (local 0 f32 1\n"
            "      (local_store 0 0 (* f32 (exp f32 (load f32 2 v0)) (load f32 3 0)))\n"
            "      (for v1 8\n"
            "        (store 1 (+ (* v0 8) v1) (+ f32 (load f32 0 (+ (* v0 8) v1)) (local_load f32 0 0)))))))\n");
}

TEST(HoistInvariantsTest, GoesBeforeTheOutermostLoopItIsInvariantIn) {
  // A top loop that is not parallel can be hoisted out of; one local per distinct expression.
  LExprRef x = load(0, kF32, i64(2));
  Kernel k = kernel({0, 1}, 2, 3, lfor(0, 4, false, {lfor(1, 8, false, {
      lstore(1, add(mul(v(0), i64(8)), v(1)), add(x, load(0, kF32, v(1)), kF32)),
      lstore(1, add(mul(v(0), i64(8)), v(1)), mul(x, load(0, kF32, v(0)), kF32)),
  })}));
  EXPECT_EQ(after(hoist_invariants, k),
            "(kernel k (nodes 0 1) (vars 2) (locals 5)\n"
            "  (local 3 f32 1\n"
            "    (local_store 3 0 (load f32 0 2))\n"
            "    (for v0 4\n"
            "      (local 4 f32 1\n"
            "        (local_store 4 0 (* f32 (local_load f32 3 0) (load f32 0 v0)))\n"
            "        (for v1 8\n"
            "          (store 1 (+ (* v0 8) v1) (+ f32 (local_load f32 3 0) (load f32 0 v1)))\n"
            "          (store 1 (+ (* v0 8) v1) (local_load f32 4 0)))))))\n");
}

TEST(HoistInvariantsTest, GuardedLoadsStayInTheLoop) {
  // Loads in an `if` body or in a select operand may be out of range when not evaluated: they
  // stay. The select's condition is always evaluated; a costly op without loads cannot fail. (A
  // whole invariant select could move: it still evaluates only the operand it picks.)
  LExprRef guarded = load(0, kF32, i64(100));
  LExprRef cond = op(Op::kLt, kI64, {add(v(1), load(2, kI64, i64(0))), i64(4)});
  Kernel k = kernel({0, 1, 2}, 2, 0, lfor(0, 4, true, {lfor(1, 8, false, {
      lif(op(Op::kLt, kI64, {v(1), i64(4)}), {lstore(1, v(1), op(Op::kExp, kF32, {guarded}))}),
      lstore(1, add(v(1), i64(8)), op(Op::kSelect, kF32, {cond, guarded, op(Op::kExp, kF32, {op(Op::kCastF32, kF32, {v(0)})})})),
  })}));
  EXPECT_EQ(after(hoist_invariants, k),
            "(kernel k (nodes 0 1 2) (vars 2) (locals 2)\n"
            "  (for v0 4 parallel\n"
            "    (local 0 i64 1\n"
            "      (local_store 0 0 (load i64 2 0))\n"
            "      (local 1 f32 1\n"
            "        (local_store 1 0 (exp f32 (f32 v0)))\n"
            "        (for v1 8\n"
            "          (if (< v1 4)\n"
            "            (store 1 v1 (exp f32 (load f32 0 100))))\n"
            "          (store 1 (+ v1 8) (select f32 (< (+ v1 (local_load i64 0 0)) 4) (load f32 0 100) (local_load f32 1 0))))))))\n");
}

TEST(HoistInvariantsTest, GuardedLoadsTheLoopEvaluatesAnywayMove) {
  // A gather's position (load 2 v0) is read by its range check on every iteration, so the row
  // start computed from it in the select's operand moves too, and the check is reused there.
  LExprRef at = op(Op::kCastI32, kI64, {load(2, kI32, v(0))});
  LExprRef check = op(Op::kLt, kI64, {at, i64(5)});
  Kernel k = kernel({0, 1, 2}, 2, 0, lfor(0, 4, true, {lfor(1, 8, false, {
      lstore(1, add(mul(v(0), i64(8)), v(1)),
             op(Op::kSelect, kF32, {check, load(0, kF32, op(Op::kSelect, kI64, {check, add(mul(at, i64(8)), v(1)), i64(0)})),
                                    lconst(kF32, 0)})),
  })}));
  EXPECT_EQ(after(hoist_invariants, k),
            "(kernel k (nodes 0 1 2) (vars 2) (locals 2)\n"
            "  (for v0 4 parallel\n"
            "    (local 0 i64 1\n"
            "      (local_store 0 0 (< (i32 i64 (load i32 2 v0)) 5))\n"
            "      (local 1 i64 1\n"
            "        (local_store 1 0 (* (i32 i64 (load i32 2 v0)) 8))\n"
            "        (for v1 8\n"
            "          (store 1 (+ (* v0 8) v1) (select f32 (local_load i64 0 0) (load f32 0 (select (local_load i64 0 0) (+ (local_load i64 1 0) v1) 0)) (const f32 0))))))))\n");
}

TEST(HoistInvariantsTest, WhatTheLoopWritesIsNotInvariant) {
  // Node 0 is stored in the loop (even after the load): its loads stay. Local 0 is stored in the
  // loop, local 1 declared in it: their loads stay, but the invariant load beside them moves.
  LExprRef other = load(1, kF32, i64(0));
  Kernel k = kernel({0, 1}, 2, 2, lfor(0, 4, true, {
      llocal_decl(0, kF32, 1, {lfor(1, 8, false, {
          lstore(0, add(v(1), i64(8)), op(Op::kExp, kF32, {load(0, kF32, i64(3))})),
          lstore(0, v(1), load(0, kF32, i64(3))),
          llocal_store(0, i64(0), mul(llocal_load(0, kF32, i64(0)), other, kF32)),
          llocal_decl(1, kF32, 1, {lstore(0, v(1), op(Op::kExp, kF32, {llocal_load(1, kF32, i64(0))}))}),
      })}),
  }));
  EXPECT_EQ(after(hoist_invariants, k),
            "(kernel k (nodes 0 1) (vars 2) (locals 3)\n"
            "  (for v0 4 parallel\n"
            "    (local 0 f32 1\n"
            "      (local 2 f32 1\n"
            "        (local_store 2 0 (load f32 1 0))\n"
            "        (for v1 8\n"
            "          (store 0 (+ v1 8) (exp f32 (load f32 0 3)))\n"
            "          (store 0 v1 (load f32 0 3))\n"
            "          (local_store 0 0 (* f32 (local_load f32 0 0) (local_load f32 2 0)))\n"
            "          (local 1 f32 1\n"
            "            (store 0 v1 (exp f32 (local_load f32 1 0)))))))))\n");
}

TEST(HoistInvariantsTest, VariablesBoundInsideTheLoopAreNotInvariant) {
  Kernel k = kernel({0, 1}, 3, 0, lfor(0, 2, true, {lfor(1, 4, false, {lfor(2, 4, false, {
      lstore(1, add(mul(v(1), i64(4)), v(2)), load(0, kF32, v(2))),
  })})}));
  const std::string before = print_kernel(k);
  EXPECT_EQ(after(hoist_invariants, k), before);
}

TEST(HoistInvariantsTest, NothingLeavesLoopsOfExtentZeroOrOne) {
  // Extent 0: the load would run where the original runs nothing. Extent 1: nothing to gain.
  // A nested extent-0 loop makes its body conditional for the loops around it.
  LExprRef x = op(Op::kExp, kF32, {load(0, kF32, i64(7))});
  Kernel k = kernel({0, 1}, 3, 0, lblock({
      lfor(0, 0, false, {lstore(1, v(0), x)}),
      lfor(1, 1, false, {lstore(1, v(1), x)}),
      lfor(2, 8, false, {lfor(0, 0, false, {lstore(1, add(v(2), v(0)), x)})}),
  }));
  const std::string before = print_kernel(k);
  EXPECT_EQ(after(hoist_invariants, k), before);
}

// ---------------------------------------------------------------------------------------------
// split_reductions

// for v0 parallel { local 0 { acc = init; for v1 in [0, n) { acc = op(acc, x[v0 * n + v1]) };
// y[v0] = acc } }, as lowering writes a reduction.
Kernel reduction(Op o, DType t, int64_t n) {
  LExprRef acc = llocal_load(0, t, i64(0));
  return kernel({0, 1}, 2, 1, lfor(0, 4, true, {llocal_decl(0, t, 1, {
      llocal_store(0, i64(0), c(t, 0)),
      lfor(1, n, false, {llocal_store(0, i64(0), op(o, t, {acc, load(0, t, add(mul(v(0), i64(n)), v(1)))}))}),
      lstore(1, v(0), acc),
  })}));
}

std::string split(const Kernel& k, bool reassociate_floats) {
  return after([&](Kernel& x) { split_reductions(x, reassociate_floats); }, k);
}

TEST(SplitReductionsTest, FloatSumBecomesThirtyTwoLanesAndATail) {
  const std::string text = split(reduction(Op::kAdd, kF32, 70), true);
  // Lanes take elements 0..31 first, then (w + 1) * 32 + u for w < 1; elements 64..69 go to the
  // accumulator in order; then the lanes, pairwise.
  EXPECT_NE(text.find("(vars 5) (locals 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("(local 1 f32 32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(for v3 32\n          (local_store 1 v3 (load f32 0 (+ (* v0 70) v3))))"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(for v2 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(+ (* (+ v2 1) 32) v3)"), std::string::npos) << text;
  EXPECT_NE(text.find("(for v4 6\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(+ 64 v4)"), std::string::npos) << text;
  EXPECT_NE(text.find("(+ f32 (+ f32 (local_load f32 1 0) (local_load f32 1 1)) (+ f32 (local_load f32 1 2)"),
            std::string::npos) << text;
}

TEST(SplitReductionsTest, StrictFloatsStayInOrderAndIntegersSplitAnyway) {
  const Kernel sum_f32 = reduction(Op::kAdd, kF32, 100), max_f64 = reduction(Op::kMax, kF64, 100);
  EXPECT_EQ(split(sum_f32, false), print_kernel(sum_f32));
  EXPECT_EQ(split(max_f64, false), print_kernel(max_f64));
  EXPECT_NE(split(max_f64, true).find("(local 1 f64 16\n"), std::string::npos);
  // Wrapping integer arithmetic is associative: the same bits in any order.
  EXPECT_NE(split(reduction(Op::kAdd, kI32, 100), false).find("(local 1 i32 32\n"), std::string::npos);
  EXPECT_NE(split(reduction(Op::kMul, kI64, 100), false).find("(local 1 i64 16\n"), std::string::npos);
}

// Language version 3: every integer type and bool splits (wrapping arithmetic, or or and and on
// bool, in any order); 1- and 2-byte types into 32 lanes; f16 and bf16 only as floats may.
TEST(SplitReductionsTest, EveryTypeSplitsWhereItsOrderDoesNotMatter) {
  EXPECT_NE(split(reduction(Op::kAdd, DType::kU8, 100), false).find("(local 1 u8 32\n"), std::string::npos);
  EXPECT_NE(split(reduction(Op::kMax, DType::kBool, 100), false).find("(local 1 bool 32\n"), std::string::npos);
  EXPECT_NE(split(reduction(Op::kMul, DType::kU64, 100), false).find("(local 1 u64 16\n"), std::string::npos);
  const Kernel max_f16 = reduction(Op::kMax, DType::kF16, 100), sum_bf16 = reduction(Op::kAdd, DType::kBF16, 100);
  EXPECT_EQ(split(max_f16, false), print_kernel(max_f16));
  EXPECT_EQ(split(sum_bf16, false), print_kernel(sum_bf16));
  EXPECT_NE(split(sum_bf16, true).find("(local 1 bf16 32\n"), std::string::npos);
}

TEST(SplitReductionsTest, LeavesWhatIsNotAReduction) {
  // Too short to pay; not associative; the operand reads the accumulator's local; the
  // accumulator's place moves with the loop.
  for (const Kernel& k : {reduction(Op::kAdd, kF32, 63), reduction(Op::kSub, kF32, 100)}) {
    EXPECT_EQ(split(k, true), print_kernel(k));
  }
  LExprRef acc = llocal_load(0, kF32, i64(0));
  Kernel reads_acc = kernel({0}, 2, 1, llocal_decl(0, kF32, 2, {
      lfor(1, 100, false, {llocal_store(0, i64(0), add(acc, llocal_load(0, kF32, i64(1)), kF32))}),
      lstore(0, i64(0), acc)}));
  EXPECT_EQ(split(reads_acc, true), print_kernel(reads_acc));
  Kernel moving = kernel({0, 1}, 2, 1, llocal_decl(0, kF32, 100, {
      lfor(1, 100, false, {llocal_store(0, v(1), add(llocal_load(0, kF32, v(1)), load(0, kF32, v(1)), kF32))}),
      lstore(1, i64(0), acc)}));
  EXPECT_EQ(split(moving, true), print_kernel(moving));
}

// ---------------------------------------------------------------------------------------------
// tile_contractions

// for v0 in [0, rows) parallel { for v1 in [0, n) { y[v0 * n + v1] = 0 };
//   for v2 in [0, k) { for v1 in [0, n) { y[v0 * n + v1] = y[...] + a[v0 * k + v2] * b[v2 * n + v1] } } }
// as lowering writes a product, with `y_at` and `value` replaceable to make near misses.
Kernel product(int64_t rows, int64_t n, int64_t k, DType t = kF32, LExprRef y_at = nullptr,
               LExprRef value = nullptr) {
  if (!y_at) y_at = add(mul(v(0), i64(n)), v(1));
  if (!value) {
    value = add(load(2, t, y_at), mul(load(0, t, add(mul(v(0), i64(k)), v(2))), load(1, t, add(mul(v(2), i64(n)), v(1))), t), t);
  }
  return kernel({0, 1, 2}, 3, 0, lfor(0, rows, true, {
      lcomment("y"),
      lfor(1, n, false, {lstore(2, add(mul(v(0), i64(n)), v(1)), c(t, 0))}),
      lfor(2, k, false, {lfor(1, n, false, {lstore(2, y_at, value)})}),
  }));
}

std::string tiled(const Kernel& k) {
  return after([](Kernel& x) { tile_contractions(x); }, k);
}

TEST(TileContractionsTest, ProductRunsInSixRowTilesOverPackedOperands) {
  const std::string text = tiled(product(8, 20, 3));
  // Steps of 6 rows here (2 steps for 8 rows; up to 264 rows, an even number of steps, when
  // there are enough): each zeroes its rows, packs a[its rows, k] tile by tile with the tile's
  // 6 rows side by side into local 1, then per 16 columns packs b[k, 16 columns] into local 0
  // and runs its tiles: 6 accumulators of 16 (locals 2..7) loaded from y, updated for every k
  // from the two packed locals, stored back.
  EXPECT_NE(text.find("(vars 12) (locals 8)\n  (for v3 2 parallel\n    (comment \"y\")\n    (for v4 6\n      (if (< (+ (* v3 6) v4) 8)\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(local 0 f32 48\n      (local 1 f32 18\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(for v11 6\n                  (if (< (+ (+ (* v3 6) (* v5 6)) v11) 8)\n                    (for v10 3\n"
                      "                      (local_store 1 (+ (* (+ (* v5 3) v10) 6) v11) (load f32 0 (+ (* (+ (+ (* v3 6) (* v5 6)) v11) 3) v10))))))"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(for v6 1\n              (for v10 3\n                (for v7 16\n"
                      "                  (local_store 0 (+ (* v10 16) v7) (load f32 1 (+ (* v10 20) (+ (* v6 16) v7))))))"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(local_store 2 v7 (+ f32 (local_load f32 2 v7) (* f32 (local_load f32 1 (+ (* (+ (* v5 3) v10) 6) 0)) "
                      "(local_load f32 0 (+ (* v10 16) v7)))))"),
            std::string::npos) << text;
  // Rows 8..11 of the last tile exist only as padding: their loads and stores are guarded.
  EXPECT_NE(text.find("(if (< (+ (+ (* v3 6) (* v5 6)) 5) 8)\n                                  (for v7 16\n"
                      "                                    (store 2 (+ (* (+ (+ (* v3 6) (* v5 6)) 5) 20) (+ (* v6 16) v7)) (local_load f32 7 v7))))"),
            std::string::npos) << text;
  // Columns 16..19 are a tile too: their b packed with zeros past column 19, their 4 columns
  // loaded and stored. No row or column runs the original loops.
  EXPECT_NE(text.find("(for v7 4\n                (local_store 0 (+ (* v10 16) v7) (load f32 1 (+ (* v10 20) (+ 16 v7)))))\n"
                      "              (for v7 12\n                (local_store 0 (+ (* v10 16) (+ v7 4)) (const f32 0))))"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(store 2 (+ (* (+ (+ (* v3 6) (* v5 6)) 0) 20) (+ 16 v7)) (local_load f32 2 v7))"), std::string::npos) << text;
  EXPECT_EQ(text.find("(for v8 "), std::string::npos) << text;
  EXPECT_EQ(text.find("(for v2 "), std::string::npos) << text;
  // Whole steps and whole tiles need no guards; f64 tiles are 8 columns wide; a long reduction
  // runs in blocks of ks whose packed panel is 16 KiB (up to 256 ks of 16 f32), split evenly:
  // 1100 ks are 5 blocks of 220.
  const std::string whole = tiled(product(12, 16, 3));
  EXPECT_EQ(whole.find("(if "), std::string::npos) << whole;
  EXPECT_NE(tiled(product(6, 8, 3, kF64)).find("(local 2 f64 8\n"), std::string::npos);
  const std::string blocks = tiled(product(12, 16, 1100));
  EXPECT_NE(blocks.find("(local 0 f32 3520\n      (local 1 f32 1320\n        (block\n          (for v9 5\n"), std::string::npos) << blocks;
  EXPECT_NE(blocks.find("(load f32 1 (+ (* (+ (* v9 220) v10) 16) (+ (* v6 16) v7)))"), std::string::npos) << blocks;
  // Packed rows over 40 KiB are declared at least 64 KiB + 64 long (the C dialect puts them on
  // the heap, and keeps the panel and the accumulators on the stack): 264 rows of 256 ks, 60
  // rows of 256 ks (60 KiB); 30 rows of 256 ks (30 KiB) stay as they are.
  EXPECT_NE(tiled(product(528, 16, 256)).find("(local 1 f32 67584\n"), std::string::npos);
  EXPECT_NE(tiled(product(120, 16, 256)).find("(local 1 f32 16400\n"), std::string::npos);
  EXPECT_NE(tiled(product(60, 16, 256)).find("(local 1 f32 7680\n"), std::string::npos);
}

// A product whose value is not safe on padding (a division) keeps the original loops for the
// rows past the last whole tile and the columns past the last whole tile of columns.
TEST(TileContractionsTest, ValuesUnsafeOnPaddingKeepTheOriginalTails) {
  const LExprRef y_row = add(mul(v(0), i64(20)), v(1));
  const LExprRef a_ik = load(0, kF32, add(mul(v(0), i64(3)), v(2)));
  const LExprRef b_kj = load(1, kF32, add(mul(v(2), i64(20)), v(1)));
  const std::string text = tiled(product(8, 20, 3, kF32, y_row, add(load(2, kF32, y_row), op(Op::kDiv, kF32, {a_ik, b_kj}), kF32)));
  EXPECT_NE(text.find("(if (<= (+ (+ (* v3 6) (* v5 6)) 6) 8)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(for v8 4\n            (store 2 (+ (* (+ (* v3 6) v4) 20) (+ 16 v8))"), std::string::npos) << text;
  EXPECT_NE(text.find("(if (>= (+ (* v3 6) v4) 6)\n        (if (< (+ (* v3 6) v4) 8)\n          (for v2 3\n            (for v1 16\n"),
            std::string::npos) << text;
}

TEST(TileContractionsTest, LeavesWhatIsNotAContraction) {
  const LExprRef y_row = add(mul(v(0), i64(16)), v(1));
  const LExprRef a_ik = load(0, kF32, add(mul(v(0), i64(3)), v(2)));
  const LExprRef b_kj = load(1, kF32, add(mul(v(2), i64(16)), v(1)));
  auto term = [&](LExprRef acc) { return add(acc, mul(a_ik, b_kj, kF32), kF32); };
  const LExprRef moving = add(y_row, v(2));       // the element moves with k
  const LExprRef column = add(mul(v(0), i64(16)), i64(0));  // every j the same element
  const std::vector<Kernel> kernels = {
      product(5, 16, 3),  // fewer rows than a tile
      product(6, 15, 3),  // fewer columns than a tile
      product(6, 16, 3, kF32, moving, term(load(2, kF32, moving))),
      product(6, 16, 3, kF32, column, term(load(2, kF32, column))),
      // reads another element of y, or reads y only where a select may skip it
      product(6, 16, 3, kF32, y_row, term(load(2, kF32, add(y_row, i64(1))))),
      product(6, 16, 3, kF32, y_row,
              op(Op::kSelect, kF32, {v(2), term(load(2, kF32, y_row)), c(kF32, 0)})),
      // does not read y at all: not an accumulation
      product(6, 16, 3, kF32, y_row, mul(a_ik, b_kj, kF32)),
  };
  for (const Kernel& k : kernels) EXPECT_EQ(tiled(k), print_kernel(k));
  // Not a parallel loop over rows.
  Kernel serial = product(6, 16, 3);
  serial.body = lfor(0, 6, false, serial.body->body);
  EXPECT_EQ(tiled(serial), print_kernel(serial));
}

// ---------------------------------------------------------------------------------------------
// optimize_kernel

TEST(OptimizeKernelTest, MatmulInPlaceGetsHoistedRowAndFma) {
  // for i parallel { for k { for j { c[i, j] = c[i, j] + a[i, k] * b[k, j] } } }, offsets with
  // a trivial * 1 and + 0 as lowering might leave them.
  LExprRef c_at = add(mul(v(0), i64(4)), mul(v(2), i64(1)));
  LExprRef a_at = add(add(mul(v(0), i64(3)), v(1)), i64(0));
  LExprRef b_at = add(mul(v(1), i64(4)), v(2));
  Kernel k = kernel({0, 1, 2}, 3, 0, lfor(0, 2, true, {lfor(1, 3, false, {lfor(2, 4, false, {
      lstore(2, c_at, add(load(2, kF32, c_at), mul(load(0, kF32, a_at), load(1, kF32, b_at), kF32), kF32)),
  })})}));
  EXPECT_EQ(after([](Kernel& k) { optimize_kernel(k); }, k),
            "(kernel k (nodes 0 1 2) (vars 3) (locals 1)\n"
            "  (for v0 2 parallel\n"
            "    (for v1 3\n"
            "      (local 0 f32 1\n"
            "        (local_store 0 0 (load f32 0 (+ (* v0 3) v1)))\n"
            "        (for v2 4\n"
            "          (store 2 (+ (* v0 4) v2) (fma f32 (local_load f32 0 0) (load f32 1 (+ (* v1 4) v2)) (load f32 2 (+ (* v0 4) v2)))))))))\n");
}

}  // namespace
}  // namespace kiln::ir
