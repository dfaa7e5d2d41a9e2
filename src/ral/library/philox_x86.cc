// Philox4x32-10 with AVX2 and AVX-512F. Each 64-bit lane holds one block's 32-bit counter word
// in its low half: vpmuludq multiplies exactly those halves into the 64-bit product whose high
// and low halves a round needs, and the upper halves' garbage never reaches a product. The AVX2
// and AVX-512 loops are written out twice on purpose: GCC and clang refuse to inline intrinsics of
// one target into a template shared by functions of different targets.
#include "ral/library/philox_x86.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics read a self-initialized "undefined" vector, which
// -Wmaybe-uninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#define KILN_AVX512 __attribute__((target("avx512f")))
#define KILN_AVX2 __attribute__((target("avx2")))

namespace kiln::ral::x86 {

namespace {

constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57, kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
constexpr int kRounds = 10;

// The round keys: round r xors key + r * Weyl.
struct RoundKeys {
  uint32_t k0[kRounds], k1[kRounds];
  explicit RoundKeys(uint64_t seed) {
    uint32_t a = static_cast<uint32_t>(seed), b = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < kRounds; ++r, a += kWeyl0, b += kWeyl1) {
      k0[r] = a;
      k1[r] = b;
    }
  }
};

// The scaling of uniform_f32 and scale_uniform as a product and a sum, each rounded, so that every
// number is the scalar code's. GCC would fuse them into one multiply-add (C++ defaults to
// -ffp-contract=fast and avx512f brings FMA), rounding once: the empty asm keeps the product apart.
struct Uniform512 {
  __m512 lo, span, hi, below_hi;
  bool keep_all;
};

KILN_AVX512 inline void store512(__m512i w, uint64_t at, uint32_t* words, float* numbers, const Uniform512* u) {
  if (!u) {
    _mm512_storeu_si512(words + at, w);
    return;
  }
  const __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), _mm512_set1_ps(0x1.0p-24f));
  __m512 product = _mm512_mul_ps(u->span, x);
  asm("" : "+v"(product));
  const __m512 v = _mm512_add_ps(u->lo, product);
  const __mmask16 below = u->keep_all ? __mmask16(0xFFFF) : _mm512_cmp_ps_mask(v, u->hi, _CMP_LT_OQ);
  _mm512_storeu_ps(numbers + at, _mm512_mask_blend_ps(below, u->below_hi, v));
}

struct Uniform256 {
  __m256 lo, span, hi, below_hi;
  bool keep_all;
};

KILN_AVX2 inline void store256(__m256i w, uint64_t at, uint32_t* words, float* numbers, const Uniform256* u) {
  if (!u) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + at), w);
    return;
  }
  const __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), _mm256_set1_ps(0x1.0p-24f));
  __m256 product = _mm256_mul_ps(u->span, x);
  asm("" : "+x"(product));
  const __m256 v = _mm256_add_ps(u->lo, product);
  const __m256 below = _mm256_cmp_ps(v, u->hi, _CMP_LT_OQ);
  _mm256_storeu_ps(numbers + at, u->keep_all ? v : _mm256_blendv_ps(u->below_hi, v, below));
}

}  // namespace

KILN_AVX512 void fill_avx512(const PhiloxStream& stream, uint64_t first_block, uint64_t blocks, uint32_t* words,
                             float* numbers, const UniformF32* uniform) {
  // 8 blocks a vector, 4 vectors at a time: enough independent multiplies to hide their latency.
  constexpr int kGroups = 4;
  static_assert(kBlocksPerPass % (8 * kGroups) == 0);
  Uniform512 u512{};
  if (uniform) {
    u512 = {_mm512_set1_ps(uniform->lo), _mm512_set1_ps(uniform->hi - uniform->lo), _mm512_set1_ps(uniform->hi),
            _mm512_set1_ps(uniform->below_hi), uniform->lo == uniform->hi};
  }
  const RoundKeys keys(stream.seed);
  const __m512i mul0 = _mm512_set1_epi64(kMul0), mul1 = _mm512_set1_epi64(kMul1);
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i site = _mm512_set1_epi64(stream.call_site), run = _mm512_set1_epi64(stream.run);
  // Lane j of w01 holds block j's words 0 and 1, of w23 its words 2 and 3: these indices
  // interleave them into the stream's order.
  const __m512i first_half = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second_half = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (uint64_t done = 0; done < blocks; done += 8 * kGroups) {
    __m512i c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      const __m512i b = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(first_block + done + 8 * g)), lanes);
      c0[g] = b;
      c1[g] = _mm512_srli_epi64(b, 32);
      c2[g] = site;
      c3[g] = run;
    }
    for (int r = 0; r < kRounds; ++r) {
      const __m512i k0 = _mm512_set1_epi64(keys.k0[r]), k1 = _mm512_set1_epi64(keys.k1[r]);
#pragma GCC unroll 4
      for (int g = 0; g < kGroups; ++g) {
        const __m512i p0 = _mm512_mul_epu32(c0[g], mul0), p1 = _mm512_mul_epu32(c2[g], mul1);
        c0[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[g], k0, 0x96);  // three-way xor
        c2[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[g], k1, 0x96);
        c1[g] = p1;
        c3[g] = p0;
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[g], _mm512_slli_epi64(c1[g], 32));
      const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[g], _mm512_slli_epi64(c3[g], 32));
      const uint64_t at = 4 * (done + 8 * g);
      store512(_mm512_permutex2var_epi64(w01, first_half, w23), at, words, numbers, uniform ? &u512 : nullptr);
      store512(_mm512_permutex2var_epi64(w01, second_half, w23), at + 16, words, numbers, uniform ? &u512 : nullptr);
    }
  }
}

KILN_AVX2 void fill_avx2(const PhiloxStream& stream, uint64_t first_block, uint64_t blocks, uint32_t* words,
                         float* numbers, const UniformF32* uniform) {
  // 4 blocks a vector, 2 vectors at a time: with 4 (16 registers of state) they spilled and ran
  // 7% slower.
  constexpr int kGroups = 2;
  static_assert(kBlocksPerPass % (4 * kGroups) == 0);
  Uniform256 u256{};
  if (uniform) {
    u256 = {_mm256_set1_ps(uniform->lo), _mm256_set1_ps(uniform->hi - uniform->lo), _mm256_set1_ps(uniform->hi),
            _mm256_set1_ps(uniform->below_hi), uniform->lo == uniform->hi};
  }
  const RoundKeys keys(stream.seed);
  const __m256i mul0 = _mm256_set1_epi64x(kMul0), mul1 = _mm256_set1_epi64x(kMul1);
  const __m256i lanes = _mm256_set_epi64x(3, 2, 1, 0);
  const __m256i site = _mm256_set1_epi64x(stream.call_site), run = _mm256_set1_epi64x(stream.run);
  for (uint64_t done = 0; done < blocks; done += 4 * kGroups) {
    __m256i c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      const __m256i b = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(first_block + done + 4 * g)), lanes);
      c0[g] = b;
      c1[g] = _mm256_srli_epi64(b, 32);
      c2[g] = site;
      c3[g] = run;
    }
    for (int r = 0; r < kRounds; ++r) {
      const __m256i k0 = _mm256_set1_epi64x(keys.k0[r]), k1 = _mm256_set1_epi64x(keys.k1[r]);
#pragma GCC unroll 4
      for (int g = 0; g < kGroups; ++g) {
        const __m256i p0 = _mm256_mul_epu32(c0[g], mul0), p1 = _mm256_mul_epu32(c2[g], mul1);
        c0[g] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[g]), k0);
        c2[g] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[g]), k1);
        c1[g] = p1;
        c3[g] = p0;
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      // Lane j: block j's words 0-1 (w01) and 2-3 (w23); unpack and swap halves into order.
      const __m256i w01 = _mm256_blend_epi32(c0[g], _mm256_slli_epi64(c1[g], 32), 0xAA);
      const __m256i w23 = _mm256_blend_epi32(c2[g], _mm256_slli_epi64(c3[g], 32), 0xAA);
      const __m256i even = _mm256_unpacklo_epi64(w01, w23), odd = _mm256_unpackhi_epi64(w01, w23);
      const uint64_t at = 4 * (done + 4 * g);
      store256(_mm256_permute2x128_si256(even, odd, 0x20), at, words, numbers, uniform ? &u256 : nullptr);
      store256(_mm256_permute2x128_si256(even, odd, 0x31), at + 8, words, numbers, uniform ? &u256 : nullptr);
    }
  }
}

}  // namespace kiln::ral::x86

#endif  // defined(__x86_64__)
