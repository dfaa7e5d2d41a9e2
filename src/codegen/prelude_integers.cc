// The prelude's integer helpers, one per integer type that needs it: wrapping arithmetic
// computed in the unsigned type of 32 or 64 bits (C promotes narrower types to int, whose
// overflow is undefined: u16 * u16 overflows int), division without traps, shifts by any amount,
// and conversions from floats that saturate. Conversions of out-of-range unsigned values to
// signed types wrap (two's complement) in every compiler kiln supports; signed arithmetic is
// never allowed to overflow, and no shift reaches its type's width.
#include "codegen/prelude_texts.h"

namespace kiln::codegen::internal {

namespace {

// The integer types by kind (bool's arithmetic is i32's, normalized; kernel_expressions.cc).
#define KILN_SIGNED "i8 i16 i32 i64"
#define KILN_UNSIGNED "u8 u16 u32 u64"
#define KILN_INTEGERS KILN_SIGNED " " KILN_UNSIGNED

// Tokens of a typed helper: $T its type, $t its name, $U the unsigned type it wraps in, $BITS
// its width, $MIN / $MAX its limits, and as f64 literals $LO its least value, $HI the least
// value above its range (2^bits, or 2^(bits-1) when signed) and $TOP the greatest f64 not above
// $MAX; $LOf, $HIf and $TOPf are f32 literals of the same for f32.
const HelperText kIntegerHelpers[] = {
    // Conversions from floats: truncate toward zero, saturate, NaN -> 0. Without jumps, so that
    // a loop of them vectorizes: x clamped (as a float) to [$LO, $TOP], the floats that convert
    // exactly, and $MAX where x reaches 2^bits (past $TOP, where $MAX has no float).
    {"kiln_f64_to_$t", KILN_INTEGERS, "kiln_pick_f64",
     "$Q $T kiln_f64_to_$t($f64 x) {\n"
     "  const $f64 c = kiln_pick_f64(x == x, 0.0, kiln_pick_f64(x > $LO, $LO, kiln_pick_f64(x < $TOP, $TOP, x)));\n"
     "  const $U m = ($U)0 - ($U)(x >= $HI);\n"
     "  return ($T)((($U)($T)c & ~m) | (($U)$MAX & m));\n"
     "}\n"},
    {"kiln_f32_to_$t", KILN_INTEGERS, "kiln_pick_f32",
     "$Q $T kiln_f32_to_$t($f32 x) {\n"
     "  const $f32 c = kiln_pick_f32(x == x, 0.0f, kiln_pick_f32(x > $LOf, $LOf, kiln_pick_f32(x < $TOPf, $TOPf, x)));\n"
     "  const $U m = ($U)0 - ($U)(x >= $HIf);\n"
     "  return ($T)((($U)($T)c & ~m) | (($U)$MAX & m));\n"
     "}\n"},
    // + - * and negation wrap around: computed in unsigned arithmetic.
    {"kiln_add_$t", KILN_INTEGERS, "",
     "$Q $T kiln_add_$t($T a, $T b) { return ($T)(($U)a + ($U)b); }\n"},
    {"kiln_sub_$t", KILN_INTEGERS, "",
     "$Q $T kiln_sub_$t($T a, $T b) { return ($T)(($U)a - ($U)b); }\n"},
    {"kiln_mul_$t", KILN_INTEGERS, "",
     "$Q $T kiln_mul_$t($T a, $T b) { return ($T)(($U)a * ($U)b); }\n"},
    {"kiln_neg_$t", KILN_INTEGERS, "", "$Q $T kiln_neg_$t($T a) { return ($T)(0u - ($U)a); }\n"},
    {"kiln_abs_$t", KILN_SIGNED, "kiln_neg_$t",
     "$Q $T kiln_abs_$t($T a) { return a < 0 ? kiln_neg_$t(a) : a; }\n"},
    // Division truncates toward zero; x / 0 == 0 and MIN / -1 == MIN (never a trap).
    {"kiln_div_$t", KILN_SIGNED, "kiln_neg_$t",
     "$Q $T kiln_div_$t($T a, $T b) {\n"
     "  if (b == 0) return 0;\n"
     "  if (b == -1) return kiln_neg_$t(a);\n"
     "  return a / b;\n"
     "}\n"},
    {"kiln_div_$t", KILN_UNSIGNED, "", "$Q $T kiln_div_$t($T a, $T b) { return b == 0 ? 0 : a / b; }\n"},
    {"kiln_max_$t", "bool " KILN_INTEGERS, "", "$Q $T kiln_max_$t($T a, $T b) { return a < b ? b : a; }\n"},
    {"kiln_min_$t", "bool " KILN_INTEGERS, "", "$Q $T kiln_min_$t($T a, $T b) { return b < a ? b : a; }\n"},
    {"kiln_relu_$t", KILN_SIGNED, "", "$Q $T kiln_relu_$t($T x) { return x < 0 ? 0 : x; }\n"},
    // a << n and a >> n (arithmetic for signed a); n below 0 or at least the width gives 0, or
    // -1 for >> of a negative value.
    {"kiln_shl_$t", KILN_INTEGERS, "",
     "$Q $T kiln_shl_$t($T a, $i64 n) { return n < 0 || n >= $BITS ? 0 : ($T)(($U)a << n); }\n"},
    {"kiln_shr_$t", KILN_SIGNED, "",
     "$Q $T kiln_shr_$t($T a, $i64 n) { return n < 0 || n >= $BITS ? (a < 0 ? -1 : 0) : ($T)(a >> n); }\n"},
    {"kiln_shr_$t", KILN_UNSIGNED, "",
     "$Q $T kiln_shr_$t($T a, $i64 n) { return n < 0 || n >= $BITS ? 0 : ($T)(a >> n); }\n"},
};

#undef KILN_SIGNED
#undef KILN_UNSIGNED
#undef KILN_INTEGERS

}  // namespace

std::span<const HelperText> integer_helpers() { return kIntegerHelpers; }

}  // namespace kiln::codegen::internal
