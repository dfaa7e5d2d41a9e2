#include "ral/library/narrow_floats.h"

// GCC 12 warns that the _mm512_undefined_* inside its conversion intrinsics may be used
// uninitialized (GCC bug 105593); they are not.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <bit>

#include "kiln/loop/op_eval.h"

namespace kiln::ral::library {

namespace {

bool has_avx512bw() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

float as_f32(BFloat16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }
float as_f32(Half x) { return static_cast<float>(ir::f16_value(x.bits)); }

// The elements from `start` on, one at a time (the tail of a vector loop, or all of them).
template <typename T>
void widen_from(int64_t start, const T* in, int64_t count, float* out) {
  for (int64_t i = start; i < count; ++i) out[i] = as_f32(in[i]);
}
void narrow_from(int64_t start, const float* in, int64_t count, BFloat16* out) {
  for (int64_t i = start; i < count; ++i) out[i].bits = ir::bf16_bits(in[i]);
}
void narrow_from(int64_t start, const float* in, int64_t count, Half* out) {
  for (int64_t i = start; i < count; ++i) out[i].bits = ir::f16_bits(in[i]);
}

[[gnu::target("avx512f,avx512bw")]] int64_t widen_avx512(const BFloat16* in, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)));
  }
  return i;
}

[[gnu::target("avx512f,avx512bw")]] int64_t widen_avx512(const Half* in, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  }
  return i;
}

// Rounds the f32 bits to their upper half, to nearest even (a carry out of the mantissa rounds up
// the exponent, to inf past bf16's largest value); a NaN becomes sign | 0x7fc0.
[[gnu::target("avx512f,avx512bw")]] int64_t narrow_avx512(const float* in, int64_t count, BFloat16* out) {
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), sign = _mm512_set1_epi32(0x8000),
                quiet = _mm512_set1_epi32(0x7fc0);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, odd)), 16);
    const __m512i nan = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(bits, 16), sign), quiet);
    const __m512i result = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(result));
  }
  return i;
}

// F16C's rounding is the language's; its NaNs keep part of their payload, so those are rewritten.
[[gnu::target("avx512f,avx512bw")]] int64_t narrow_avx512(const float* in, int64_t count, Half* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) narrow_from(i, in, i + 16, out);
  }
  return i;
}

}  // namespace

void widen(const BFloat16* in, int64_t count, float* out) {
  widen_from(has_avx512bw() ? widen_avx512(in, count, out) : 0, in, count, out);
}
void widen(const Half* in, int64_t count, float* out) {
  widen_from(has_avx512bw() ? widen_avx512(in, count, out) : 0, in, count, out);
}
void narrow(const float* in, int64_t count, BFloat16* out) {
  narrow_from(has_avx512bw() ? narrow_avx512(in, count, out) : 0, in, count, out);
}
void narrow(const float* in, int64_t count, Half* out) {
  narrow_from(has_avx512bw() ? narrow_avx512(in, count, out) : 0, in, count, out);
}

}  // namespace kiln::ral::library
