// What conv2d's AVX-512 loops share (conv_avx512.cc, conv_channel_tiles.cc, conv_depthwise.cc,
// conv_planes.cc): the activation as their tiles store it, masks of the first lanes, the even
// floats of a strided row, and the error for scratch memory.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <string>

#include "kiln/base/status.h"
#include "ral/library/conv_shape.h"

namespace kiln::ral::library::conv_parts {

// The call's activation as the tiles store (activated in conv.cc): the ReLU (lanes below 0 become
// 0; NaN and -0 stay as they are) where asked, then lanes above clip_max become it.
struct Activation {
  bool relu, clip;
  float clip_max;

  explicit Activation(const ConvShape& s) : relu(s.relu), clip(s.clips()), clip_max(static_cast<float>(s.clip_max)) {}
  bool any() const { return relu || clip; }
};

[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 activate(__m512 v, const Activation& a) {
  if (a.relu) v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
  if (a.clip) {
    const __m512 top = _mm512_set1_ps(a.clip_max);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), top);
  }
  return v;
}

// Lanes [0, count) of a 16-lane mask, count clamped to [0, 16].
inline __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>(count <= 0 ? 0u : count >= 16 ? 0xFFFFu : (1u << count) - 1);
}

// The even floats of the 32 from `at` (at[0], at[2], ..., at[30]), from two masked loads: lanes of
// the first 16 outside `low`, and of the second 16 outside `high`, read as 0 (and are not read).
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 even_floats(const float* at, __mmask16 low,
                                                                         __mmask16 high) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(low, at), evens, _mm512_maskz_loadu_ps(high, at + 16));
}

inline Status no_memory(int64_t floats) {
  return resource_exhausted_error("conv2d: no memory for " + std::to_string(floats * 4) + " bytes of scratch");
}

}  // namespace kiln::ral::library::conv_parts
