// The prelude's f16 and bf16 conversions: values of those types are computed as float and
// stored as their 16-bit patterns, rounded to nearest even (overflow to infinity, NaN kept,
// subnormals exact), bit for bit what kiln/loop/op_eval.h's f16_bits / bf16_bits give. They are
// written without jumps so that a loop of them vectorizes: GCC vectorizes no `?:` with the CPU
// driver's -fno-tree-loop-if-convert (cpu_compiler.cc), and it turns a comparison used as a
// number (`(uint32_t)(a > b) << 9`) into one; so every condition is a mask of all ones or none,
// the sign of a difference spread by an arithmetic shift (a difference of values below 2^31,
// which cannot overflow). A loop of f16 loads, f32 arithmetic and f16 stores then runs at about
// the speed of the same loop with F16C's conversions (docs/optimize.md).
#include "codegen/prelude_texts.h"

namespace kiln::codegen::internal {

namespace {

const HelperText kHalfHelpers[] = {
    // float -> f16 bits. |x| below 2^-14 (an f16 subnormal): adding 0.5 (whose ulp, 2^-24, is the
    // f16 subnormal step) rounds |x| with the FPU, and the result's low bits are the f16's. Else
    // the exponent is rebiased and the mantissa rounded to nearest even by adding 0xfff and the
    // kept mantissa's lowest bit (a carry into the exponent, up to infinity, is right). From
    // 65536 up (65520 rounds up to it there), infinity; NaN a quiet NaN. The sign as it was.
    {"kiln_f16_bits", "", "",
     "$Q $u16 kiln_f16_bits($f32 x) {\n"
     "  union { $f32 f; $u32 u; } v, d;\n"
     "  v.f = x;\n"
     "  const $u32 sign = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;\n"
     "  v.u = a;\n"
     "  d.f = v.f + 0.5f;\n"
     "  const $u32 small = d.u - 0x3f000000u;\n"
     "  const $u32 normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;\n"
     "  const $u32 is_nan = ($u32)(($i32)(0x7f800000u - a) >> 31);\n"
     "  const $u32 special = 0x7c00u | (is_nan & 0x200u);\n"
     "  const $u32 is_small = ($u32)(($i32)(a - 0x38800000u) >> 31), is_special = ~($u32)(($i32)(a - 0x47800000u) >> 31);\n"
     "  return ($u16)(sign | (special & is_special) | (~is_special & ((small & is_small) | (normal & ~is_small))));\n"
     "}\n"},
    // f16 bits -> float: exact. The exponent rebiased (twice for infinity and NaN); a subnormal
    // f16 m 2^-24 as (2^-14 + m 2^-24) - 2^-14, exact in float.
    {"kiln_f16_value", "", "",
     "$Q $f32 kiln_f16_value($u16 h) {\n"
     "  union { $f32 f; $u32 u; } o, s;\n"
     "  const $u32 a = ($u32)h & 0x7fffu, e = a & 0x7c00u;\n"
     "  const $u32 is_special = ($u32)(($i32)((e + 0x400u) << 16) >> 31), is_subnormal = ($u32)(($i32)(e - 1u) >> 31);\n"
     "  o.u = (a << 13) + 0x38000000u + (is_special & 0x38000000u);\n"
     "  s.u = o.u + 0x00800000u;\n"
     "  s.f -= 6.103515625e-05f;\n"
     "  o.u = ((s.u & is_subnormal) | (o.u & ~is_subnormal)) | ((($u32)h & 0x8000u) << 16);\n"
     "  return o.f;\n"
     "}\n"},
    // float -> bf16 bits: the upper half of the float, rounded to nearest even (a carry up to
    // infinity is right); NaN the quiet NaN of its sign.
    {"kiln_bf16_bits", "", "",
     "$Q $u16 kiln_bf16_bits($f32 x) {\n"
     "  union { $f32 f; $u32 u; } v;\n"
     "  v.f = x;\n"
     "  const $u32 is_nan = ($u32)(($i32)(0x7f800000u - (v.u & 0x7fffffffu)) >> 31);\n"
     "  const $u32 rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16;\n"
     "  const $u32 nan = ((v.u >> 16) & 0x8000u) | 0x7fc0u;\n"
     "  return ($u16)((nan & is_nan) | (rounded & ~is_nan));\n"
     "}\n"},
    {"kiln_bf16_value", "", "",
     "$Q $f32 kiln_bf16_value($u16 h) {\n"
     "  union { $u32 u; $f32 f; } v;\n"
     "  v.u = ($u32)h << 16;\n"
     "  return v.f;\n"
     "}\n"},
    // A float rounded to f16 / bf16, as the float it then is (a cast to f16 / bf16).
    {"kiln_round_f16", "", "kiln_f16_bits kiln_f16_value",
     "$Q $f32 kiln_round_f16($f32 x) { return kiln_f16_value(kiln_f16_bits(x)); }\n"},
    {"kiln_round_bf16", "", "kiln_bf16_bits kiln_bf16_value",
     "$Q $f32 kiln_round_bf16($f32 x) { return kiln_bf16_value(kiln_bf16_bits(x)); }\n"},
    // A double rounded to float toward zero, its last bit set where that was inexact (round to
    // odd): rounded on to f16 or bf16 (at least 2 bits fewer), it gives what rounding the double
    // once would, where rounding it to nearest float first could round twice.
    {"kiln_f64_odd_f32", "", "",
     "$Q $f32 kiln_f64_odd_f32($f64 x) {\n"
     "  union { $f32 f; $u32 u; } v;\n"
     "  v.f = ($f32)x;\n"
     "  const $f64 back = ($f64)v.f;\n"
     "  const $u32 inexact = ($u32)(back != x && x == x);\n"
     "  v.u -= inexact & ($u32)((back > x) == (x > 0.0));\n"
     "  v.u |= inexact;\n"
     "  return v.f;\n"
     "}\n"},
    {"kiln_round_f16_f64", "", "kiln_f64_odd_f32 kiln_round_f16",
     "$Q $f32 kiln_round_f16_f64($f64 x) { return kiln_round_f16(kiln_f64_odd_f32(x)); }\n"},
    {"kiln_round_bf16_f64", "", "kiln_f64_odd_f32 kiln_round_bf16",
     "$Q $f32 kiln_round_bf16_f64($f64 x) { return kiln_round_bf16(kiln_f64_odd_f32(x)); }\n"},
};

}  // namespace

std::span<const HelperText> half_helpers() { return kHalfHelpers; }

}  // namespace kiln::codegen::internal
