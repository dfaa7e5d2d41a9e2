// Conversions between kiln's narrow floats (f16, bf16) and f32 for the library calls that compute
// over f32 copies (gemm of narrow operands): AVX-512 (or F16C) where the CPU has it, else one
// element at a time. The values are the language's (ir::f16_value, ir::f16_bits and their bf16
// forms): widening is exact; narrowing rounds to nearest even, overflows to ±inf, keeps subnormals,
// and gives a NaN of the input's sign with kiln's one payload (0x7e00 for f16, 0x7fc0 for bf16).
#pragma once

#include <cstdint>

#include "kiln/ral/element_types.h"

namespace kiln::ral::library {

// out[i] = in[i] as f32 for i in [0, count).
void widen(const BFloat16* in, int64_t count, float* out);
void widen(const Half* in, int64_t count, float* out);

// out[i] = in[i] rounded to the narrow type, for i in [0, count).
void narrow(const float* in, int64_t count, BFloat16* out);
void narrow(const float* in, int64_t count, Half* out);

}  // namespace kiln::ral::library
