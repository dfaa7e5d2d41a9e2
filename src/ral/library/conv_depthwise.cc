// Depthwise convolutions read straight from the input rows, and over data in blocks of 16
// channels (conv_depthwise.h).
#include "ral/library/conv_depthwise.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>
#include <vector>

#include "kiln/ral/execution_context.h"
#include "ral/library/conv_avx512_parts.h"
#include "ral/library/conv_planes.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

namespace {

using namespace conv_parts;  // NOLINT(google-build-using-namespace): this file's own helpers

// Where a depthwise tap column reads for one vector of 16 output columns, read straight from the
// input: lane t reads input column first + t · sw, which masked loads from `first` (and, at stride
// 2, from first + 16) fetch, the lanes outside the row's w columns masked to 0 (the padding).
struct ColumnRead {
  int64_t first;
  __mmask16 low, high;  // the loads' lanes that lie inside the row
};

// The lanes t of a load from input column `first` that read inside the row: 0 <= first + t < w.
__mmask16 lanes_inside(int64_t first, int64_t w) {
  return static_cast<__mmask16>(first_lanes(w - first) & ~first_lanes(-first));
}

// A tap column's 16 inputs from one input row (depthwise_channels).
template <int kStride>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 tap_inputs(const float* row, const ColumnRead& read) {
  return kStride == 2 ? even_floats(row + read.first, read.low, read.high) : _mm512_maskz_loadu_ps(read.low, row + read.first);
}

// One channel of a depthwise convolution: its input plane, taps, bias, residual (or null) and
// output plane.
struct DepthwiseChannel {
  const float* x;
  const float* w;
  float bias;
  const float* z;
  float* y;
};

// Output row i's vector of 16 columns at `column` of one channel: activation(sum + z?).
[[gnu::target("avx512f"), gnu::always_inline]] inline void store_row(const ConvShape& s, int64_t i, int64_t column,
                                                                     __mmask16 kept, __m512 sum,
                                                                     const DepthwiseChannel& c, const Activation& act) {
  if (c.z) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(kept, c.z + i * s.ow + column));
  _mm512_mask_storeu_ps(c.y + i * s.ow + column, kept, act.any() ? activate(sum, act) : sum);
}

// kChannels (4 or 1) channels of a depthwise convolution at column stride kStride (1 or 2)
// without dilation, kKw window columns (0: s.kw, known at run time only): row by row, for each
// vector of 16 output columns, each channel's taps summed in a register, each tap's 16 inputs one
// masked load (stride 1) or the even lanes of two (stride 2) from the input row itself. One sum's
// taps are a chain of dependent multiply-adds (nine of a 3x3 window, 4 cycles each on AVX-512
// cores); four channels' chains side by side hide that: MobileNet-V2's 32 channels of 112 x 112
// took 0.13-0.15 ms instead of 0.17-0.24 (medians; docs/ral.md has the rest). Rows
// in order, each row's vectors in turn, so that the input rows stay in the L1 cache from one
// vector to the next and both planes go in order, as the prefetchers follow (down columns of
// vectors they did not).
template <int kKw, int kStride, int kChannels>
[[gnu::target("avx512f")]] void depthwise_channels(const ConvShape& s, const ColumnRead* reads,
                                                   const DepthwiseChannel* c, const Activation& act) {
  static_assert(kChannels == 4 || kChannels == 1);
  const int64_t kw = kKw ? kKw : s.kw, vectors = (s.ow + 15) / 16;
  for (int64_t i = 0; i < s.oh; ++i) {
    const int64_t a0 = std::max<int64_t>(0, s.pt - i * s.sh), a1 = std::min(s.kh, s.h + s.pt - i * s.sh);
    for (int64_t v = 0; v < vectors; ++v) {
      const ColumnRead* at = reads + v * kw;
      const __mmask16 kept = first_lanes(s.ow - 16 * v);
      // Named sums rather than an array, which GCC kept on the stack.
      __m512 sum0 = _mm512_set1_ps(c[0].bias), sum1, sum2, sum3;
      if constexpr (kChannels == 4) {
        sum1 = _mm512_set1_ps(c[1].bias);
        sum2 = _mm512_set1_ps(c[2].bias);
        sum3 = _mm512_set1_ps(c[3].bias);
      }
      for (int64_t a = a0; a < a1; ++a) {
        const int64_t row = (i * s.sh + a - s.pt) * s.w;
#pragma GCC unroll 3
        for (int64_t e = 0; e < kw; ++e) {
          const int64_t tap = a * kw + e;
          sum0 = _mm512_fmadd_ps(_mm512_set1_ps(c[0].w[tap]), tap_inputs<kStride>(c[0].x + row, at[e]), sum0);
          if constexpr (kChannels == 4) {
            sum1 = _mm512_fmadd_ps(_mm512_set1_ps(c[1].w[tap]), tap_inputs<kStride>(c[1].x + row, at[e]), sum1);
            sum2 = _mm512_fmadd_ps(_mm512_set1_ps(c[2].w[tap]), tap_inputs<kStride>(c[2].x + row, at[e]), sum2);
            sum3 = _mm512_fmadd_ps(_mm512_set1_ps(c[3].w[tap]), tap_inputs<kStride>(c[3].x + row, at[e]), sum3);
          }
        }
      }
      store_row(s, i, 16 * v, kept, sum0, c[0], act);
      if constexpr (kChannels == 4) {
        store_row(s, i, 16 * v, kept, sum1, c[1], act);
        store_row(s, i, 16 * v, kept, sum2, c[2], act);
        store_row(s, i, 16 * v, kept, sum3, c[3], act);
      }
    }
  }
}

// kChannels (2 or 1) channels of a 3x3 depthwise convolution at stride 1 without dilation, output
// rows [i0, i0 + R): for each vector of 16 output columns, each input row's three tap columns are
// loaded once and feed the up to three of the R rows that read it, where depthwise_channels loads
// them again for each output row (nine loads per nine multiply-adds, two loads a cycle at most on
// AVX-512 cores; here (R + 2) · 3 per 9 · R). The 2 · R sums are independent chains. Each sum
// still runs over its taps in order (window row, then column) from the bias.
template <int R, int kChannels>
[[gnu::target("avx512f")]] void depthwise_rows3(const ConvShape& s, int64_t i0, const ColumnRead* reads,
                                                const DepthwiseChannel* c, const Activation& act) {
  const int64_t vectors = (s.ow + 15) / 16;
  for (int64_t v = 0; v < vectors; ++v) {
    const ColumnRead* at = reads + v * 3;
    __m512 sums[kChannels][R];
#pragma GCC unroll 2
    for (int ch = 0; ch < kChannels; ++ch) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) sums[ch][r] = _mm512_set1_ps(c[ch].bias);
    }
#pragma GCC unroll 6
    for (int q = 0; q < R + 2; ++q) {  // input row i0 - pt + q: tap row q - r of output row i0 + r
      const int64_t row = i0 - s.pt + q;
      if (row < 0 || row >= s.h) continue;  // the padding: no term
#pragma GCC unroll 2
      for (int ch = 0; ch < kChannels; ++ch) {
        const float* in = c[ch].x + row * s.w;
        __m512 taps[3];
#pragma GCC unroll 3
        for (int e = 0; e < 3; ++e) taps[e] = tap_inputs<1>(in, at[e]);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int a = q - r;
          if (a < 0 || a > 2) continue;
#pragma GCC unroll 3
          for (int e = 0; e < 3; ++e) sums[ch][r] = _mm512_fmadd_ps(_mm512_set1_ps(c[ch].w[a * 3 + e]), taps[e], sums[ch][r]);
        }
      }
    }
    const __mmask16 kept = first_lanes(s.ow - 16 * v);
#pragma GCC unroll 2
    for (int ch = 0; ch < kChannels; ++ch) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) store_row(s, i0 + r, 16 * v, kept, sums[ch][r], c[ch], act);
    }
  }
}

// A 3x3 depthwise convolution at stride 1 (depthwise_rows3), kChannels channels, four output rows
// at a time, the last block the rows that remain.
template <int kChannels>
void depthwise_3x3(const ConvShape& s, const ColumnRead* reads, const DepthwiseChannel* c, const Activation& act) {
  for (int64_t i0 = 0; i0 < s.oh; i0 += 4) {
    switch (std::min<int64_t>(4, s.oh - i0)) {
      case 4: depthwise_rows3<4, kChannels>(s, i0, reads, c, act); break;
      case 3: depthwise_rows3<3, kChannels>(s, i0, reads, c, act); break;
      case 2: depthwise_rows3<2, kChannels>(s, i0, reads, c, act); break;
      default: depthwise_rows3<1, kChannels>(s, i0, reads, c, act); break;
    }
  }
}

using DepthwiseChannelsFn = void (*)(const ConvShape&, const ColumnRead*, const DepthwiseChannel*, const Activation&);

// The instance of depthwise_channels for this window and stride, kChannels at a time.
template <int kChannels>
DepthwiseChannelsFn depthwise_channels_for(const ConvShape& s) {
  return s.kw == 3 ? (s.sw == 2 ? depthwise_channels<3, 2, kChannels> : depthwise_channels<3, 1, kChannels>)
                   : (s.sw == 2 ? depthwise_channels<0, 2, kChannels> : depthwise_channels<0, 1, kChannels>);
}

// A tap of a depthwise convolution over blocks as an output row reads it: its input at
// row[offset + step · p] for the row's point p, its 16 weights at w[weight].
struct BlockTap {
  int64_t offset, weight;
};

// NP output points of one row of a depthwise convolution over blocks (conv2d_blocked), read from
// x's block itself: each point's 16 channels one vector, summed over `taps` from the bias (its
// `lanes`), point p's input of a tap at row[tap.offset + step · p] (step: kStep, or `step` where
// kStep is 0); then z, the activation, and the lanes past the channels written 0.
template <int NP, int kStep>
[[gnu::target("avx512f")]] void depthwise_block_tile(int64_t count, const BlockTap* taps, int64_t step,
                                                     const float* row, const float* w, const float* bias,
                                                     const float* z, const Activation* act, __mmask16 lanes,
                                                     float* y) {
  const int64_t at_step = kStep ? kStep : step;
  __m512 sums[NP];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) sums[p] = _mm512_maskz_loadu_ps(lanes, bias);
  for (int64_t k = 0; k < count; ++k) {
    const __m512 weights = _mm512_loadu_ps(w + taps[k].weight);
    const float* at = row + taps[k].offset;
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) sums[p] = _mm512_fmadd_ps(weights, _mm512_loadu_ps(at + at_step * p), sums[p]);
  }
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) {
    __m512 out = sums[p];
    if (z) out = _mm512_add_ps(out, _mm512_loadu_ps(z + 16 * p));
    if (act) out = activate(out, *act);
    _mm512_storeu_ps(y + 16 * p, _mm512_maskz_mov_ps(lanes, out));
  }
}

using DepthwiseBlockTileFn = void (*)(int64_t, const BlockTap*, int64_t, const float*, const float*, const float*,
                                      const float*, const Activation*, __mmask16, float*);
constexpr int kDepthwiseBlockPoints = 8;  // sums a tile: 8 independent chains of multiply-adds
template <int kStep, size_t... I>
constexpr auto depthwise_block_tiles(std::index_sequence<I...>) {
  return std::array<DepthwiseBlockTileFn, sizeof...(I) + 1>{nullptr, depthwise_block_tile<static_cast<int>(I) + 1, kStep>...};
}
// By point stride: 16 floats (stride 1), 32 (stride 2), any other.
constexpr auto kDepthwiseBlockTiles16 = depthwise_block_tiles<16>(std::make_index_sequence<kDepthwiseBlockPoints>());
constexpr auto kDepthwiseBlockTiles32 = depthwise_block_tiles<32>(std::make_index_sequence<kDepthwiseBlockPoints>());
constexpr auto kDepthwiseBlockTilesAny = depthwise_block_tiles<0>(std::make_index_sequence<kDepthwiseBlockPoints>());

}  // namespace

bool reads_depthwise_directly(const ConvShape& s) { return s.sw <= 2 && s.dh == 1 && s.dw == 1; }

Status depthwise_direct(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                        const float* bias, const float* z, float* y) {
  const int64_t vectors = (s.ow + 15) / 16, channels = s.n * s.c, taps = s.kh * s.kw;
  std::vector<ColumnRead> reads(static_cast<size_t>(vectors * s.kw));
  for (int64_t v = 0; v < vectors; ++v) {
    for (int64_t e = 0; e < s.kw; ++e) {
      const int64_t first = 16 * v * s.sw + e - s.pl;
      reads[static_cast<size_t>(v * s.kw + e)] = {first, lanes_inside(first, s.w), lanes_inside(first + 16, s.w)};
    }
  }
  const Activation act(s);
  // 3x3 at stride 1 (MobileNet's): two channels at a time, rows in blocks (depthwise_3x3).
  const bool rows3 = s.kh == 3 && s.kw == 3 && s.sh == 1 && s.sw == 1;
  const int most = rows3 ? 2 : 4;
  const DepthwiseChannelsFn many = rows3 ? depthwise_3x3<2> : depthwise_channels_for<4>(s);
  const DepthwiseChannelsFn one = rows3 ? depthwise_3x3<1> : depthwise_channels_for<1>(s);
  const auto parts = static_cast<int64_t>(std::min<int64_t>(channels, int64_t{4} * context.host_threads()));
  context.host_parallel(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    const int64_t end = channels * (part + 1) / parts;
    for (int64_t ch = channels * part / parts; ch < end;) {
      const int count = end - ch >= most ? most : 1;
      DepthwiseChannel group[4];
      for (int k = 0; k < count; ++k, ++ch) {
        group[k] = {x + ch * s.h * s.w, w + ch % s.c * taps, bias[ch % s.c], z ? z + ch * s.points() : nullptr,
                    y + ch * s.points()};
      }
      (count == most ? many : one)(s, reads.data(), group, act);
    }
  });
  return Status();
}

Status depthwise_blocked(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                         const float* b, const float* z, float* y) {
  constexpr int64_t kDirectPoints = 28;
  const bool direct = s.ow >= kDirectPoints;
  const int64_t blocks = (s.c + 15) / 16, kernel_taps = s.kh * s.kw, units = s.n * blocks;
  const Planes layout(s, 16);
  const int64_t step = direct ? s.sw * 16 : 16;  // floats between a row's points as the tiles read them
  const auto& tiles = step == 16 ? kDepthwiseBlockTiles16 : step == 32 ? kDepthwiseBlockTiles32 : kDepthwiseBlockTilesAny;
  // Output columns [j_lo, j_hi) read no column of padding (from the planes: all of them).
  const int64_t j_lo = direct ? std::min<int64_t>(s.ow, (s.pl + s.sw - 1) / s.sw) : 0;
  const int64_t last = s.w - 1 - (s.kw - 1) * s.dw + s.pl;  // the last j · sw inside
  const int64_t j_hi = direct ? std::max(j_lo, std::min<int64_t>(s.ow, last < 0 ? 0 : last / s.sw + 1)) : s.ow;
  // Each output row's taps, point 0 of the row reading the block's column -pl (or the planes'
  // column 0), and where each row's taps start: reading the block, only those inside the image.
  std::vector<BlockTap> row_taps;
  std::vector<int64_t> row_first(static_cast<size_t>(s.oh + 1));
  std::vector<int64_t> plane_offsets(static_cast<size_t>(kernel_taps));
  layout.offsets(s, 1, plane_offsets.data());
  for (int64_t i = 0; i < s.oh; ++i) {
    row_first[static_cast<size_t>(i)] = static_cast<int64_t>(row_taps.size());
    for (int64_t a = 0; a < s.kh; ++a) {
      const int64_t ih = i * s.sh + a * s.dh - s.pt;
      if (direct && (ih < 0 || ih >= s.h)) continue;
      for (int64_t e = 0; e < s.kw; ++e) {
        const int64_t k = a * s.kw + e;
        row_taps.push_back({direct ? (ih * s.w + e * s.dw - s.pl) * 16 : plane_offsets[static_cast<size_t>(k)] + i * layout.width * 16, k * 16});
      }
    }
  }
  row_first[static_cast<size_t>(s.oh)] = static_cast<int64_t>(row_taps.size());
  const Activation act(s);
  const Activation* activation = act.any() ? &act : nullptr;
  const int64_t x_block = s.h * s.w * 16, y_block = s.points() * 16;
  std::atomic<bool> no_room{false};
  const auto parts = static_cast<int64_t>(std::min<int64_t>(units, int64_t{4} * context.host_threads()));
  context.host_parallel(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    float* planes = direct ? nullptr : scratch<0>(static_cast<size_t>(layout.floats(s)));
    if (!direct && !planes) {
      no_room = true;
      return;
    }
    std::vector<BlockTap> edge_taps(static_cast<size_t>(kernel_taps));
    for (int64_t unit = units * part / parts; unit < units * (part + 1) / parts; ++unit) {
      const float* in = x + unit * x_block;
      if (!direct) {
        layout.write(s, in, planes);
        in = planes;
      }
      const int64_t c0 = unit % blocks * 16;
      const __mmask16 lanes = first_lanes(s.c - c0);
      const float* wb = w + c0 * kernel_taps;
      for (int64_t i = 0; i < s.oh; ++i) {
        const BlockTap* taps = row_taps.data() + row_first[static_cast<size_t>(i)];
        const int64_t count = row_first[static_cast<size_t>(i) + 1] - row_first[static_cast<size_t>(i)];
        auto point_at = [&](int64_t j) { return unit * y_block + (i * s.ow + j) * 16; };
        for (int64_t j = j_lo; j < j_hi; j += kDepthwiseBlockPoints) {
          const int64_t np = std::min<int64_t>(kDepthwiseBlockPoints, j_hi - j), at = point_at(j);
          tiles[static_cast<size_t>(np)](count, taps, step, in + j * step, wb, b + c0, z ? z + at : nullptr,
                                         activation, lanes, y + at);
        }
        auto edge = [&](int64_t j) {
          int64_t inside = 0;  // the taps whose column is inside the image
          for (int64_t k = 0; k < count; ++k) {
            const int64_t iw = j * s.sw + (taps[k].weight / 16 % s.kw) * s.dw - s.pl;
            if (iw >= 0 && iw < s.w) edge_taps[static_cast<size_t>(inside++)] = taps[k];
          }
          const int64_t at = point_at(j);
          tiles[1](inside, edge_taps.data(), step, in + j * step, wb, b + c0, z ? z + at : nullptr, activation, lanes,
                   y + at);
        };
        for (int64_t j = 0; j < j_lo; ++j) edge(j);
        for (int64_t j = j_hi; j < s.ow; ++j) edge(j);
      }
    }
  });
  return no_room ? no_memory(layout.floats(s)) : Status();
}

}  // namespace kiln::ral::library
