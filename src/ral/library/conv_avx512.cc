#include "ral/library/conv_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kiln/ral/execution_context.h"

namespace kiln::ral::library {

namespace {

constexpr int64_t kPanel = 32;  // output points per panel: two vectors of 16
constexpr int kRows = 12;       // output channels per register tile: 24 sums, 2 operand vectors, a weight
// Rows of the product per pass over a panel: 256 rows of a panel are 32 KiB, which stay in the
// L1 cache while the register tiles of every output channel sweep them.
constexpr int64_t kDepthBlock = 256;

// The packed columns of one image's group: panel q holds, for each k of the product (channel,
// window row, window column), the 32 input points that output points 32q ... 32q + 31 read
// (0 in the padding and past the last point).
float* panel_at(float* packed, const ConvShape& s, int64_t k, int64_t point) {
  return packed + ((point / kPanel) * s.depth() + k) * kPanel + point % kPanel;
}

// Writes rows [k_begin, k_end) of the product's right operand for input x (the group's
// channels) into `packed`.
void pack_rows(const ConvShape& s, const float* x, float* packed, int64_t k_begin, int64_t k_end) {
  const int64_t points = s.points();
  for (int64_t k = k_begin; k < k_end; ++k) {
    for (int64_t i = 0; i < s.oh; ++i) {
      for (int64_t j = 0; j < s.ow;) {  // a run of output columns within one panel
        const int64_t point = i * s.ow + j;
        const int64_t run = std::min(s.ow - j, kPanel - point % kPanel);
        s.read_window_row(x, k, i, j, run, panel_at(packed, s, k, point));
        j += run;
      }
    }
    if (points % kPanel) {  // the last panel's points past the end
      float* tail = panel_at(packed, s, k, points);
      std::fill(tail, tail + (kPanel - points % kPanel), 0.0f);
    }
  }
}

// The ReLU: lanes below 0 become 0; NaN and -0 stay as they are (relu_of in conv.cc).
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 relu_lanes(__m512 v) {
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
}

// One row k of the product into the sums: its 32 points at `row` (64-byte aligned where
// kAligned), its weights at wk[r * depth].
template <int R, bool kAligned>
[[gnu::target("avx512f"), gnu::always_inline]] inline void add_row(__m512 (&lo)[R], __m512 (&hi)[R], const float* row,
                                                                   const float* wk, int64_t depth) {
  const __m512 b0 = kAligned ? _mm512_load_ps(row) : _mm512_loadu_ps(row);
  const __m512 b1 = kAligned ? _mm512_load_ps(row + 16) : _mm512_loadu_ps(row + 16);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(wk[r * depth]);
    lo[r] = _mm512_fmadd_ps(a, b0, lo[r]);
    hi[r] = _mm512_fmadd_ps(a, b1, hi[r]);
  }
}

// Output channels [0, R) by 32 points, over rows [k0, k1) of the product: the sums start from
// the bias (first_rows) or from what y holds, and are written to y rows (stride ldy) with the
// ReLU where asked; `points` of the 32 are written. w's rows hold `depth` weights. Row k of the
// right operand is `b + k * kPanel` (packed columns) or, kWide, `b + offsets[k]` (the padded input).
template <int R, bool kWide>
[[gnu::target("avx512f")]] void tile(int64_t depth, int64_t k0, int64_t k1, const float* w, const float* b,
                                     const int64_t* offsets, const float* bias, float* y, int64_t ldy, int64_t points,
                                     bool first_rows, bool relu) {
  const __mmask16 first = points >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << points) - 1);
  const __mmask16 second = points >= 32 ? 0xFFFF : points <= 16 ? 0 : static_cast<__mmask16>((1u << (points - 16)) - 1);
  __m512 lo[R], hi[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (first_rows) {
      lo[r] = hi[r] = _mm512_set1_ps(bias[r]);
    } else {
      lo[r] = _mm512_maskz_loadu_ps(first, y + r * ldy);
      hi[r] = _mm512_maskz_loadu_ps(second, y + r * ldy + 16);
    }
  }
  for (int64_t k = k0; k < k1; ++k) {
    if constexpr (kWide) {
      add_row<R, false>(lo, hi, b + offsets[k], w + k, depth);
    } else {
      add_row<R, true>(lo, hi, b + k * kPanel, w + k, depth);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, first, relu ? relu_lanes(lo[r]) : lo[r]);
    _mm512_mask_storeu_ps(y + r * ldy + 16, second, relu ? relu_lanes(hi[r]) : hi[r]);
  }
}

using TileFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, const int64_t*, const float*, float*,
                        int64_t, int64_t, bool, bool);
template <bool kWide>
constexpr TileFn kTiles[kRows + 1] = {nullptr,
                                      tile<1, kWide>, tile<2, kWide>, tile<3, kWide>, tile<4, kWide>,
                                      tile<5, kWide>, tile<6, kWide>, tile<7, kWide>, tile<8, kWide>,
                                      tile<9, kWide>, tile<10, kWide>, tile<11, kWide>, tile<12, kWide>};

// A buffer of the calling thread's, 64-byte aligned and kept between calls (a fresh one would
// fault its pages in at every call); null when it cannot be allocated.
template <int kSlot, typename T = float>
T* scratch(size_t count) {
  struct Buffer {
    std::unique_ptr<T, decltype(&std::free)> data{nullptr, &std::free};
    size_t count = 0;
  };
  thread_local Buffer buffer;
  if (buffer.count < count) {
    const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    buffer.data.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    buffer.count = buffer.data ? count : 0;
  }
  return buffer.data.get();
}

Status no_memory(int64_t floats) {
  return resource_exhausted_error("conv2d: no memory for " + std::to_string(floats * 4) + " bytes of scratch");
}

// The product of one image's group, `points` wide: y rows (stride ldy) = relu?(bias + w @ the
// right operand), by register tiles of kRows output channels and 32 points, kDepthBlock rows of
// the product at a time. Each thread takes a run of the tiles in the order that reads the larger
// of the two operands once: by points, each thread's 32 points of the operand staying in its
// cache while the tiles sweep the weights; or, where the weights are the larger (few points, as
// at the end of a network), by output channels, each tile's weights staying while it sweeps the
// points.
template <bool kWide>
void products(const ExecutionContext& context, const ConvShape& s, int64_t points, const float* w, const float* b,
              const int64_t* offsets, const float* bias, float* y, int64_t ldy) {
  const int64_t depth = s.depth(), og = s.group_outputs();
  const int64_t panels = (points + kPanel - 1) / kPanel, row_tiles = (og + kRows - 1) / kRows;
  const int64_t tiles = panels * row_tiles;
  // By output channels where the operand is small enough to stay in the L2 cache while each
  // tile sweeps it: the tiles then write y's rows in runs, where by points they would write 32
  // points of every row in turn, too many streams of stores for the processor to prefetch.
  const bool by_channels = og > panels * kPanel || depth * points * int64_t{sizeof(float)} <= (int64_t{1} << 20);
  const int64_t inner = by_channels ? panels : row_tiles;
  // More parts than threads, taken as threads come free: a thread that the system delays (the
  // machine is shared) holds up a convolution by a small part, not by half of it.
  const auto parts = static_cast<int64_t>(std::min<int64_t>(tiles, int64_t{4} * context.host_threads()));
  context.host_parallel(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    const int64_t begin = tiles * part / parts, end = tiles * (part + 1) / parts;
    for (int64_t o = begin / inner; o * inner < end; ++o) {
      const int64_t i0 = std::max(begin, o * inner) - o * inner, i1 = std::min(end, (o + 1) * inner) - o * inner;
      for (int64_t k0 = 0; k0 < depth; k0 += kDepthBlock) {
        const int64_t k1 = std::min(depth, k0 + kDepthBlock);
        for (int64_t i = i0; i < i1; ++i) {
          // Tiles of as even a share of the output channels as kRows allows (16 channels: two of
          // 8, not 12 and 4, whose sums would wait on their loads).
          const int64_t q = by_channels ? i : o, t = by_channels ? o : i;
          const int64_t r0 = og * t / row_tiles;
          const int rows = static_cast<int>(og * (t + 1) / row_tiles - r0);
          kTiles<kWide>[rows](depth, k0, k1, w + r0 * depth, kWide ? b + q * kPanel : b + q * depth * kPanel, offsets,
                              bias + r0, y + r0 * ldy + q * kPanel, ldy, std::min(kPanel, points - q * kPanel), k0 == 0,
                              s.relu && k1 == depth);
        }
      }
    }
  });
}

// At stride 1 the product reads the padded input itself: output point (i, j) of a row of the
// padded width reads row k = (channel, a, e) at offsets[k] + i · width + j, so 32 consecutive
// points are 32 consecutive input points (the "wide" points j >= OW of each row are computed and
// dropped). The padded copy costs a pass over the input where the packed columns cost KH · KW.
Status wide_group(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                  const float* bias, float* y) {
  const int64_t cg = s.group_channels(), og = s.group_outputs();
  const int64_t height = s.oh + s.dh * (s.kh - 1), width = s.ow + s.dw * (s.kw - 1);  // the padded input's
  const int64_t points = (s.oh - 1) * width + s.ow;
  // Without padding the input is read where it is, but for the last 32 points when they are
  // fewer (they would read past its end): those are copied into one packed panel. With padding,
  // the padded copy has room for the last 32 points to read past its end.
  const bool unpadded = height == s.h && width == s.w;
  const int64_t padded_floats = unpadded ? 0 : cg * height * width + kPanel;
  float* padded = unpadded ? nullptr : scratch<0>(static_cast<size_t>(padded_floats));
  const bool direct = width == s.ow;  // no junk columns: the product writes y itself
  float* out = direct ? y : scratch<2>(static_cast<size_t>(og * points));
  int64_t* offsets = scratch<1, int64_t>(static_cast<size_t>(s.depth()));
  if ((!unpadded && !padded) || !out || !offsets) return no_memory(padded_floats + og * points + s.depth() * 2);
  const auto threads = static_cast<int64_t>(context.host_threads());
  if (!unpadded) {
    context.host_parallel(static_cast<uint64_t>(threads), [&](uint64_t part_index) {
      const auto part = static_cast<int64_t>(part_index);
      for (int64_t ch = cg * part / threads; ch < cg * (part + 1) / threads; ++ch) {
        for (int64_t r = 0; r < height; ++r) {
          float* row = padded + (ch * height + r) * width;
          const int64_t ih = r - s.pt;
          if (ih < 0 || ih >= s.h) {
            std::fill(row, row + width, 0.0f);
            continue;
          }
          const int64_t copied = std::clamp(width - s.pl, int64_t{0}, s.w);
          std::fill(row, row + s.pl, 0.0f);
          std::memcpy(row + s.pl, x + (ch * s.h + ih) * s.w, static_cast<size_t>(copied) * sizeof(float));
          std::fill(row + s.pl + copied, row + width, 0.0f);
        }
      }
    });
    std::fill(padded + cg * height * width, padded + padded_floats, 0.0f);
  }
  for (int64_t k = 0; k < s.depth(); ++k) {
    const auto [ch, a, e] = s.tap(k);
    offsets[k] = (ch * height + a * s.dh) * width + e * s.dw;
  }
  const int64_t ldy = direct ? s.points() : points;
  const int64_t read_in_place = unpadded ? points / kPanel * kPanel : points;
  if (read_in_place > 0) products<true>(context, s, read_in_place, w, unpadded ? x : padded, offsets, bias, out, ldy);
  if (read_in_place < points) {  // the last, short run of points from a packed panel
    const int64_t tail = points - read_in_place;
    float* panel = scratch<3>(static_cast<size_t>(s.depth() * kPanel));
    if (!panel) return no_memory(s.depth() * kPanel);
    for (int64_t k = 0; k < s.depth(); ++k) {
      std::memcpy(panel + k * kPanel, x + offsets[k] + read_in_place, static_cast<size_t>(tail) * sizeof(float));
      std::fill(panel + k * kPanel + tail, panel + (k + 1) * kPanel, 0.0f);
    }
    products<false>(context, s, tail, w, panel, nullptr, bias, out + read_in_place, ldy);
  }
  if (!direct) {  // the rows of y from the wide rows, without their junk columns
    context.host_parallel(static_cast<uint64_t>(threads), [&](uint64_t part_index) {
      const auto part = static_cast<int64_t>(part_index);
      for (int64_t r = og * part / threads; r < og * (part + 1) / threads; ++r) {
        for (int64_t i = 0; i < s.oh; ++i) {
          std::memcpy(y + (r * s.oh + i) * s.ow, out + r * points + i * width,
                      static_cast<size_t>(s.ow) * sizeof(float));
        }
      }
    });
  }
  return Status();
}

// Other strides: the packed columns (pack_rows), then the product over them.
Status packed_group(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                    const float* bias, float* y) {
  const int64_t depth = s.depth(), panels = (s.points() + kPanel - 1) / kPanel;
  float* packed = scratch<0>(static_cast<size_t>(panels * depth * kPanel));
  if (!packed) return no_memory(panels * depth * kPanel);
  const auto threads = static_cast<int64_t>(context.host_threads());
  context.host_parallel(static_cast<uint64_t>(threads), [&](uint64_t part) {
    const auto p = static_cast<int64_t>(part);
    pack_rows(s, x, packed, depth * p / threads, depth * (p + 1) / threads);
  });
  products<false>(context, s, s.points(), w, packed, nullptr, bias, y, s.points());
  return Status();
}

}  // namespace

bool conv_avx512_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return supported;
}

Status conv_avx512(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w, const float* b,
                   float* y) {
  const int64_t og = s.group_outputs();
  for (int64_t img = 0; img < s.n; ++img) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* xg = x + (img * s.c + g * s.group_channels()) * s.h * s.w;
      float* yg = y + (img * s.o + g * og) * s.points();
      const float* wg = w + g * og * s.depth();
      KILN_RETURN_IF_ERROR(s.sh == 1 && s.sw == 1 ? wide_group(context, s, xg, wg, b + g * og, yg)
                                                  : packed_group(context, s, xg, wg, b + g * og, yg));
    }
  }
  return Status();
}

}  // namespace kiln::ral::library
