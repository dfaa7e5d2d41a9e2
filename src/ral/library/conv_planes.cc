#include "ral/library/conv_planes.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ral/library/conv_avx512_parts.h"

namespace kiln::ral::library {

namespace {

using namespace conv_parts;  // NOLINT(google-build-using-namespace): the AVX-512 loops' helpers

// out[c] = in[2 · c] for c in [0, n), reading in[0, 2n - 1): a row of a phase plane at stride 2.
[[gnu::target("avx512f")]] void every_second(const float* in, int64_t n, float* out) {
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t readable = std::min<int64_t>(32, 2 * (n - c) - 1);
    _mm512_mask_storeu_ps(out + c, first_lanes(n - c),
                          even_floats(in + 2 * c, first_lanes(readable), first_lanes(readable - 16)));
  }
}

}  // namespace

void Planes::offsets(const ConvShape& s, int64_t channels, int64_t* out) const {
  const int64_t taps = s.kh * s.kw;
  for (int64_t a = 0; a < s.kh; ++a) {
    for (int64_t e = 0; e < s.kw; ++e) {
      const int64_t qa = a * s.dh / s.sh, u = a * s.dh % s.sh, qe = e * s.dw / s.sw, v = e * s.dw % s.sw;
      out[a * s.kw + e] = ((u * s.sw + v) * plane + qa * width + qe) * lanes;
    }
  }
  const int64_t step = floats(s);
  for (int64_t ch = 1; ch < channels; ++ch) {
    const int64_t at = lanes == 1 ? ch * step : ch / lanes * step + ch % lanes;
    for (int64_t t = 0; t < taps; ++t) out[ch * taps + t] = out[t] + at;
  }
}

void Planes::write(const ConvShape& s, const float* x, float* out) const {
  const int64_t l = lanes;
  for (int64_t u = 0; u < s.sh; ++u) {
    for (int64_t v = 0; v < s.sw; ++v) {
      if (!read[static_cast<size_t>(u * s.sw + v)]) continue;
      // Plane column c is input column c · sw + v - pl.
      const auto [offset, first, end] = s.columns_at(v - s.pl, width);
      float* rows = out + (u * s.sw + v) * plane * l;
      for (int64_t r = 0; r < height; ++r) {
        float* row = rows + r * width * l;
        const int64_t ih = r * s.sh + u - s.pt;
        if (ih < 0 || ih >= s.h) {
          std::fill(row, row + width * l, 0.0f);
          continue;
        }
        const float* in = x + (ih * s.w + offset) * l;
        std::fill(row, row + first * l, 0.0f);
        if (s.sw == 1) {
          std::memcpy(row + first * l, in + first * l, static_cast<size_t>((end - first) * l) * sizeof(float));
        } else if (s.sw == 2 && l == 1) {
          every_second(in + 2 * first, end - first, row + first);
        } else {
          for (int64_t c = first; c < end; ++c) std::copy_n(in + c * s.sw * l, l, row + c * l);
        }
        std::fill(row + end * l, row + width * l, 0.0f);
      }
    }
  }
}

void Planes::write_all(const HostThreads& threads, const ConvShape& s, int64_t count, const float* x, float* out) const {
  const int64_t parts = threads.count();
  threads.run(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    for (int64_t ch = count * part / parts; ch < count * (part + 1) / parts; ++ch) {
      write(s, x + ch * s.h * s.w * lanes, out + ch * floats(s));
    }
  });
}

}  // namespace kiln::ral::library
