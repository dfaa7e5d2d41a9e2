// The prelude's f16 and bf16 conversions: values of those types are computed as float and
// stored as their 16-bit patterns, rounded to nearest even (overflow to infinity, NaN kept,
// subnormals exact), bit for bit what kiln/loop/op_eval.h's f16_bits / bf16_bits give. They are
// written without jumps so that a loop of them vectorizes: GCC vectorizes no `?:` with the CPU
// driver's -fno-tree-loop-if-convert (cpu_compiler.cc), and it turns a comparison used as a
// number (`(uint32_t)(a > b) << 9`) into one; so every condition is a mask of all ones or none,
// the sign of a difference spread by an arithmetic shift (a difference of values below 2^31,
// which cannot overflow). A loop of f16 loads, f32 arithmetic and f16 stores then runs faster
// than with F16C's scalar conversions (docs/optimize.md); where the compiler targets F16C,
// kernel_half_blocks.cc converts whole blocks with its vector ones (kiln_f16_*_x32 below).
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
    // Blocks of 32 f16 elements to and from floats by F16C's vcvtph2ps / vcvtps2ph, 8 elements
    // an instruction (16 from f16 with AVX-512F; back to f16 always 8: GCC's loops over a block
    // write it 32 bytes at a time where it prefers 256-bit vectors, as with -march=native on
    // Intel's cores, and a 64-byte read of two 32-byte writes waits for them to reach the cache:
    // relu(a * b + c) over 2^24 f16 took 0.65-0.69x the f32 time with 16, 0.50x with 8,
    // 2026-12-01), for the loops
    // that kernel_half_blocks.cc prints in blocks; defined, like those blocks, only where the
    // compiler targets F16C. Through the compilers' builtins (GCC's and Clang's names) and vector
    // types rather than <immintrin.h>, which takes longer to parse than a kernel file takes to
    // compile. They give the bits of kiln_f16_value / kiln_f16_bits: vcvtph2ps is exact but
    // makes a signalling NaN quiet, which kiln_f16_value keeps as it is (and powf tells apart),
    // so the elements of a vector holding one (never, in practice) go through kiln_f16_value;
    // vcvtps2ph rounds to nearest even like kiln_f16_bits (immediate 0) but keeps the top of a
    // NaN's payload, so each NaN becomes the quiet NaN 0x7e00 of its sign. kiln_f16_quiet_x32 is
    // vcvtph2ps alone, for statements that cannot tell a quiet NaN from a signalling one
    // (kernel_half_blocks.cc says which).
    {"kiln_f16c_types", "", "",
     "#if defined(__F16C__)\n"
     "typedef short kiln_v8h __attribute__((vector_size(16)));\n"
     "typedef short kiln_v16h __attribute__((vector_size(32)));\n"
     "typedef $f32 kiln_v8f __attribute__((vector_size(32)));\n"
     "typedef $f32 kiln_v16f __attribute__((vector_size(64)));\n"
     "typedef long long kiln_v2q __attribute__((vector_size(16)));\n"
     "typedef long long kiln_v4q __attribute__((vector_size(32)));\n"
     "#endif\n"},
    {"kiln_f16_quiet_x32", "", "kiln_f16c_types",
     "#if defined(__F16C__)\n"
     "$Q void kiln_f16_quiet_x32($f32* out, const $u16* in) {\n"
     "#if defined(__AVX512F__)\n"
     "  for (int k = 0; k < 32; k += 16) {\n"
     "    kiln_v16h h;\n"
     "    __builtin_memcpy(&h, in + k, sizeof h);\n"
     "    const kiln_v16f x = __builtin_ia32_vcvtph2ps512_mask(h, (kiln_v16f){0}, (unsigned short)0xffff, 4);\n"
     "    __builtin_memcpy(out + k, &x, sizeof x);\n"
     "  }\n"
     "#else\n"
     "  for (int k = 0; k < 32; k += 8) {\n"
     "    kiln_v8h h;\n"
     "    __builtin_memcpy(&h, in + k, sizeof h);\n"
     "    const kiln_v8f x = __builtin_ia32_vcvtph2ps256(h);\n"
     "    __builtin_memcpy(out + k, &x, sizeof x);\n"
     "  }\n"
     "#endif\n"
     "}\n"
     "#endif\n"},
    {"kiln_f16_value_x32", "", "kiln_f16c_types kiln_f16_value",
     "#if defined(__F16C__)\n"
     "$Q void kiln_f16_value_x32($f32* out, const $u16* in) {\n"
     "#if defined(__AVX512F__)\n"
     "  for (int k = 0; k < 32; k += 16) {\n"
     "    kiln_v16h h;\n"
     "    __builtin_memcpy(&h, in + k, sizeof h);\n"
     "    const kiln_v16h a = h & 0x7fff, signalling = (a > 0x7c00) & (a < 0x7e00);\n"
     "    if (__builtin_ia32_ptestz256((kiln_v4q)signalling, (kiln_v4q)signalling)) {\n"
     "      const kiln_v16f x = __builtin_ia32_vcvtph2ps512_mask(h, (kiln_v16f){0}, (unsigned short)0xffff, 4);\n"
     "      __builtin_memcpy(out + k, &x, sizeof x);\n"
     "    } else {\n"
     "      for (int j = k; j < k + 16; ++j) out[j] = kiln_f16_value(in[j]);\n"
     "    }\n"
     "  }\n"
     "#else\n"
     "  for (int k = 0; k < 32; k += 8) {\n"
     "    kiln_v8h h;\n"
     "    __builtin_memcpy(&h, in + k, sizeof h);\n"
     "    const kiln_v8h a = h & 0x7fff, signalling = (a > 0x7c00) & (a < 0x7e00);\n"
     "    if (__builtin_ia32_ptestz128((kiln_v2q)signalling, (kiln_v2q)signalling)) {\n"
     "      const kiln_v8f x = __builtin_ia32_vcvtph2ps256(h);\n"
     "      __builtin_memcpy(out + k, &x, sizeof x);\n"
     "    } else {\n"
     "      for (int j = k; j < k + 8; ++j) out[j] = kiln_f16_value(in[j]);\n"
     "    }\n"
     "  }\n"
     "#endif\n"
     "}\n"
     "#endif\n"},
    {"kiln_f16_bits_x32", "", "kiln_f16c_types",
     "#if defined(__F16C__)\n"
     "$Q void kiln_f16_bits_x32($u16* out, const $f32* in) {\n"
     "  for (int k = 0; k < 32; k += 8) {\n"
     "    kiln_v8f x;\n"
     "    __builtin_memcpy(&x, in + k, sizeof x);\n"
     "    kiln_v8h h = __builtin_ia32_vcvtps2ph256(x, 0);\n"
     "    h &= ~(((h & 0x7fff) > 0x7c00) & 0x1ff);\n"
     "    __builtin_memcpy(out + k, &h, sizeof h);\n"
     "  }\n"
     "}\n"
     "#endif\n"},
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
