#include "ral/library/conv_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/ral/execution_context.h"
#include "ral/library/conv_avx512_parts.h"
#include "ral/library/conv_channel_tiles.h"
#include "ral/library/conv_depthwise.h"
#include "ral/library/conv_planes.h"
#include "ral/library/host_threads.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

namespace {

using namespace conv_parts;  // NOLINT(google-build-using-namespace): this file's own helpers

constexpr int64_t kPanel = 32;  // output points per panel: two vectors of 16
constexpr int kRows = 12;       // output channels per register tile: 24 sums, 2 operand vectors, a weight
// Rows of the product per pass over a panel: 256 rows of a panel are 32 KiB, which stay in the
// L1 cache while the register tiles of every output channel sweep them.
constexpr int64_t kDepthBlock = 256;

// One row k of the product into the sums: its 16 · V points at `row` (64-byte aligned where
// kAligned), its weights at wk[r * depth].
template <int R, int V, bool kAligned>
[[gnu::target("avx512f"), gnu::always_inline]] inline void add_row(__m512 (&sums)[V][R], const float* row,
                                                                   const float* wk, int64_t depth) {
  __m512 in[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) in[v] = kAligned ? _mm512_load_ps(row + 16 * v) : _mm512_loadu_ps(row + 16 * v);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(wk[r * depth]);
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) sums[v][r] = _mm512_fmadd_ps(a, in[v], sums[v][r]);
  }
}

// Where a tile's points go in y. The product runs over "wide" points, rows of the planes' width,
// whose last columns (past OW) are junk: vector v's lanes `lanes[v]` are the points it keeps, which
// are the `kept[v]` consecutive points of y from y[at[v]] on. `dense[v]`: they are a prefix of the
// lanes, so a masked load or store does; else the vector is expanded from or compressed to that
// prefix in registers (compressing straight to memory is several times slower).
struct Panel {
  __mmask16 lanes[2], kept[2];
  int64_t at[2];
  bool dense[2];
};

// The panel of `count` (<= 32) wide points from wide point p0, in rows of `width` of which the
// first `ow` are kept.
Panel panel_of(int64_t p0, int64_t count, int64_t width, int64_t ow) {
  Panel panel{};
  for (int v = 0; v < 2; ++v) {
    const int64_t row = (p0 + 16 * v) / width;
    int64_t column = (p0 + 16 * v) % width;  // of the lane at hand
    panel.at[v] = row * ow + std::min(column, ow);
    // A run of lanes at a time, to the end of the row or of the panel's points: its columns
    // before OW are kept (this runs on one thread before the tiles start).
    unsigned bits = 0;
    for (int64_t l = 0, end = std::clamp<int64_t>(count - 16 * v, 0, 16); l < end;) {
      const int64_t run = std::min(width - column, end - l), kept = std::clamp<int64_t>(ow - column, 0, run);
      bits |= ((1u << kept) - 1) << l;
      l += run;
      column += run;
      if (column == width) column = 0;
    }
    panel.lanes[v] = static_cast<__mmask16>(bits);
    panel.kept[v] = static_cast<__mmask16>((1u << __builtin_popcount(bits)) - 1);
    panel.dense[v] = bits == panel.kept[v];
  }
  return panel;
}

// The panels of `points` wide points from wide point p0, 32 at a time.
std::vector<Panel> panels_of(int64_t p0, int64_t points, int64_t width, int64_t ow) {
  std::vector<Panel> panels(static_cast<size_t>((points + kPanel - 1) / kPanel));
  for (size_t q = 0; q < panels.size(); ++q) {
    const int64_t first = static_cast<int64_t>(q) * kPanel;
    panels[q] = panel_of(p0 + first, std::min(kPanel, points - first), width, ow);
  }
  return panels;
}

[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 load_points(const Panel& p, int v, const float* row) {
  const __m512 kept = _mm512_maskz_loadu_ps(p.kept[v], row + p.at[v]);
  return p.dense[v] ? kept : _mm512_maskz_expand_ps(p.lanes[v], kept);
}

[[gnu::target("avx512f"), gnu::always_inline]] inline void store_points(const Panel& p, int v, float* row, __m512 value) {
  _mm512_mask_storeu_ps(row + p.at[v], p.kept[v], p.dense[v] ? value : _mm512_maskz_compress_ps(p.lanes[v], value));
}

// Output channels [0, R) by 16 · V wide points (V vectors: 2 for a panel of 32, 1 for a last
// panel of at most 16, which would leave the second vector's lanes idle), over rows [k0, k1) of
// the product: the sums start from the bias (first_rows) or from what y holds, and the points the
// panel keeps are written to y's rows (stride ldy), z's points (rows of the same stride) added
// where z is given and then the activation where asked. w's rows hold `depth` weights. Row k of the
// right operand is `b + k * kPanel` (a packed panel) or, kWide, `b + offsets[k]` (the phase
// planes).
template <int R, int V, bool kWide>
[[gnu::target("avx512f")]] void tile(int64_t depth, int64_t k0, int64_t k1, const float* w, const float* b,
                                     const int64_t* offsets, const float* bias, float* y, int64_t ldy,
                                     const Panel& panel, bool first_rows, const float* z, const Activation* act) {
  // The residual's points, read when the sums are done, are fetched now, while the sums run: the
  // tile reads 32 points of each of R rows of z, as many streams as the prefetchers do not follow
  // (ResNet-50's 1x1 layers with a residual over 56 x 56 took 1.3x the time of those without).
  if (z) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const float* at = z + r * ldy + panel.at[v];
        _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(at + 15), _MM_HINT_T0);
      }
    }
  }
  __m512 sums[V][R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) sums[v][r] = first_rows ? _mm512_set1_ps(bias[r]) : load_points(panel, v, y + r * ldy);
  }
  for (int64_t k = k0; k < k1; ++k) {
    if constexpr (kWide) {
      add_row<R, V, false>(sums, b + offsets[k], w + k, depth);
    } else {
      add_row<R, V, true>(sums, b + k * kPanel, w + k, depth);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      __m512 out = sums[v][r];
      if (z) out = _mm512_add_ps(out, load_points(panel, v, z + r * ldy));
      store_points(panel, v, y + r * ldy, act ? activate(out, *act) : out);
    }
  }
}

using TileFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, const int64_t*, const float*, float*,
                        int64_t, const Panel&, bool, const float*, const Activation*);
template <int V, bool kWide>
constexpr TileFn kTiles[kRows + 1] = {nullptr,
                                      tile<1, V, kWide>, tile<2, V, kWide>, tile<3, V, kWide>, tile<4, V, kWide>,
                                      tile<5, V, kWide>, tile<6, V, kWide>, tile<7, V, kWide>, tile<8, V, kWide>,
                                      tile<9, V, kWide>, tile<10, V, kWide>, tile<11, V, kWide>, tile<12, V, kWide>};

// The product of one image's group over wide points [p0, p0 + points) (rows of `width` of which
// the first OW are y's): y's rows (stride OH · OW) = activation(bias + w @ the right operand + z?), z
// (when given) laid out as y, by register tiles of kRows output channels and 32 points, kDepthBlock
// rows of the product at a time. Each thread takes a run of the tiles in the order that reads the
// larger of the two operands once: by points, each thread's 32 points of the operand staying in
// its cache while the tiles sweep the weights; or, where the weights are the larger (few points,
// as at the end of a network), by output channels, each tile's weights staying while it sweeps
// the points.
template <bool kWide>
void products(const ExecutionContext& context, const ConvShape& s, int64_t p0, int64_t points, int64_t width,
              const float* w, const float* b, const int64_t* offsets, const float* bias, float* y, const float* z) {
  const int64_t depth = s.depth(), og = s.group_outputs(), ldy = s.points();
  const int64_t panels = (points + kPanel - 1) / kPanel, row_tiles = (og + kRows - 1) / kRows;
  const int64_t tiles = panels * row_tiles;
  // By output channels where the operand is small enough to stay in the L2 cache while each
  // tile sweeps it: the tiles then write y's rows in runs, where by points they would write 32
  // points of every row in turn, too many streams of stores for the processor to prefetch.
  const bool by_channels = og > panels * kPanel || depth * points * int64_t{sizeof(float)} <= (int64_t{1} << 20);
  const int64_t inner = by_channels ? panels : row_tiles;
  const Activation act(s);
  const std::vector<Panel> panel_at = panels_of(p0, points, width, s.ow);
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
          const int64_t count = std::min(kPanel, points - q * kPanel);
          (count > 16 ? kTiles<2, kWide> : kTiles<1, kWide>)[rows](
              depth, k0, k1, w + r0 * depth, kWide ? b + q * kPanel : b + q * depth * kPanel, offsets, bias + r0,
              y + r0 * ldy, ldy, panel_at[static_cast<size_t>(q)], k0 == 0, z && k1 == depth ? z + r0 * ldy : nullptr,
              k1 == depth && act.any() ? &act : nullptr);
        }
      }
    }
  });
}

// One image's group: the product reads the input itself, from its phase planes (Planes), so that
// 32 consecutive output points are 32 consecutive plane points (the "wide" points j >= OW of each
// row are computed and not stored: Panel). At stride 1 the one plane is the padded input; the
// planes cost a pass over the input where im2col's columns cost KH · KW.
Status wide_group(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                  const float* bias, const float* z, float* y) {
  const int64_t cg = s.group_channels();
  const Planes layout(s);
  const int64_t width = layout.width, points = layout.points(s);
  // At stride 1 without padding the input is read where it is, but for the last 32 points when
  // they are fewer (they would read past its end): those are copied into one packed panel.
  // Otherwise the planes have room for the last 32 points to read past their end.
  const bool unpadded = layout.is_input(s);
  const int64_t planes_floats = unpadded ? 0 : cg * layout.floats(s) + kPanel;
  float* planes = unpadded ? nullptr : scratch<0>(static_cast<size_t>(planes_floats));
  int64_t* offsets = scratch<1, int64_t>(static_cast<size_t>(s.depth()));
  if ((!unpadded && !planes) || !offsets) return no_memory(planes_floats + s.depth() * 2);
  if (!unpadded) {
    layout.write_all(HostThreads(context), s, cg, x, planes);
    std::fill(planes + cg * layout.floats(s), planes + planes_floats, 0.0f);
  }
  layout.offsets(s, cg, offsets);
  if (s.layout != WeightLayout::kOutputFirst) {
    return channel_products(HostThreads(context), s, unpadded ? x : planes, width, offsets, w, s.o, bias, y, z);
  }
  const int64_t read_in_place = unpadded ? points / kPanel * kPanel : points;
  if (read_in_place > 0) products<true>(context, s, 0, read_in_place, width, w, unpadded ? x : planes, offsets, bias, y, z);
  if (read_in_place < points) {  // the last, short run of points from a packed panel
    const int64_t tail = points - read_in_place;
    float* panel = scratch<3>(static_cast<size_t>(s.depth() * kPanel));
    if (!panel) return no_memory(s.depth() * kPanel);
    for (int64_t k = 0; k < s.depth(); ++k) {
      std::memcpy(panel + k * kPanel, x + offsets[k] + read_in_place, static_cast<size_t>(tail) * sizeof(float));
      std::fill(panel + k * kPanel + tail, panel + (k + 1) * kPanel, 0.0f);
    }
    products<false>(context, s, read_in_place, tail, width, w, panel, nullptr, bias, y, z);
  }
  return Status();
}

// One channel of a depthwise convolution from its planes: y's points = activation(bias + the
// taps' sum + z?), each vector of 16 wide points summed over the taps in a register.
[[gnu::target("avx512f")]] void depthwise_channel(int64_t taps, const int64_t* offsets, const float* planes,
                                                  const float* w, float bias, const std::vector<Panel>& panels,
                                                  const float* z, const Activation& act, float* y) {
  for (size_t q = 0; q < panels.size(); ++q) {
    const Panel& panel = panels[q];
    for (int v = 0; v < 2; ++v) {
      if (!panel.lanes[v]) continue;  // junk only (or past the last point)
      const float* at = planes + static_cast<int64_t>(q) * kPanel + 16 * v;
      __m512 sum = _mm512_set1_ps(bias);
      for (int64_t k = 0; k < taps; ++k) sum = _mm512_fmadd_ps(_mm512_set1_ps(w[k]), _mm512_loadu_ps(at + offsets[k]), sum);
      if (z) sum = _mm512_add_ps(sum, load_points(panel, v, z));
      store_points(panel, v, y, act.any() ? activate(sum, act) : sum);
    }
  }
}

// A depthwise convolution (a group per channel, one output each, as MobileNet's) that
// depthwise_direct does not run (dilated, or columns at a stride above 2): per image and
// channel, its phase planes, then for each vector of 16 wide points the sum over the taps. The
// channels are spread over the threads; each keeps its planes in its cache.
Status depthwise(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                 const float* bias, const float* z, float* y) {
  const Planes layout(s);
  const int64_t points = layout.points(s), taps = s.kh * s.kw, phases = s.sh * s.sw;
  const int64_t planes_floats = phases * layout.plane + kPanel, channels = s.n * s.c;
  std::vector<int64_t> offsets(static_cast<size_t>(taps));
  layout.offsets(s, 1, offsets.data());
  const std::vector<Panel> panel_at = panels_of(0, points, layout.width, s.ow);
  const Activation act(s);
  std::atomic<bool> no_room{false};
  const auto parts = static_cast<int64_t>(std::min<int64_t>(channels, int64_t{4} * context.host_threads()));
  context.host_parallel(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    float* planes = scratch<0>(static_cast<size_t>(planes_floats));
    if (!planes) {
      no_room = true;
      return;
    }
    std::fill(planes + phases * layout.plane, planes + planes_floats, 0.0f);  // read by junk lanes only
    for (int64_t ch = channels * part / parts; ch < channels * (part + 1) / parts; ++ch) {
      layout.write(s, x + ch * s.h * s.w, planes);
      depthwise_channel(taps, offsets.data(), planes, w + ch % s.c * taps, bias[ch % s.c], panel_at,
                        z ? z + ch * s.points() : nullptr, act, y + ch * s.points());
    }
  });
  return no_room ? no_memory(planes_floats) : Status();
}

}  // namespace

Status conv_avx512_blocked(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                           const float* b, const float* z, float* y, bool x_blocked) {
  if (x_blocked && s.groups > 1 && s.depthwise() && s.layout == WeightLayout::kOutputBlocks) {
    return depthwise_blocked(context, s, x, w, b, z, y);
  }
  if (s.groups != 1 || s.layout != WeightLayout::kOutputBlocks) {
    return invalid_argument_error("conv2d_blocked: conv_avx512_blocked takes one group and w in blocks");
  }
  // x's blocks of 16 channels, or its channels one by one (NCHW), each with its own planes.
  const int64_t lanes = x_blocked ? 16 : 1, blocks = (s.c + lanes - 1) / lanes;
  const Planes layout(s, lanes);
  // As in wide_group: at stride 1 without padding the input is read where it is (the tiles along
  // output channels read no point past a row's end).
  const bool unpadded = layout.is_input(s);
  const int64_t planes_floats = unpadded ? 0 : blocks * layout.floats(s);
  float* planes = unpadded ? nullptr : scratch<0>(static_cast<size_t>(planes_floats));
  int64_t* offsets = scratch<1, int64_t>(static_cast<size_t>(s.depth()));
  if ((!unpadded && !planes) || !offsets) return no_memory(planes_floats + s.depth() * 2);
  layout.offsets(s, s.c, offsets);
  const int64_t x_image = blocks * s.h * s.w * lanes, y_image = (s.o + 15) / 16 * s.points() * 16;
  auto image = [&](const HostThreads& threads, int64_t img, float* image_planes) {
    const float* xi = x + img * x_image;
    if (!unpadded) layout.write_all(threads, s, blocks, xi, image_planes);
    return channel_products(threads, s, unpadded ? xi : image_planes, layout.width, offsets, w, s.o, b,
                            y + img * y_image, z ? z + img * y_image : nullptr, x_blocked, true);
  };
  // At a batch of two images a thread or more, each thread takes whole images, with planes of its
  // own: no fork and join per image, and each thread's image stays in its own caches (ResNet-50 at
  // batch 16 on two threads: its 3x3 convolutions over 56 x 56 took 0.88x the time).
  const auto threads = static_cast<int64_t>(context.host_threads());
  if (threads > 1 && s.n >= 2 * threads) {
    std::vector<Status> failed(static_cast<size_t>(s.n));
    context.host_parallel(static_cast<uint64_t>(s.n), [&](uint64_t img) {
      float* image_planes = unpadded ? nullptr : scratch<0>(static_cast<size_t>(planes_floats));
      failed[img] = !unpadded && !image_planes ? no_memory(planes_floats)
                                               : image(HostThreads(context, true), static_cast<int64_t>(img), image_planes);
    });
    for (const Status& status : failed) KILN_RETURN_IF_ERROR(status);
    return Status();
  }
  for (int64_t img = 0; img < s.n; ++img) KILN_RETURN_IF_ERROR(image(HostThreads(context), img, planes));
  return Status();
}

bool conv_avx512_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return supported;
}

Status conv_avx512(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w, const float* b,
                   const float* z, float* y) {
  const int64_t og = s.group_outputs();
  if (s.depthwise()) {
    if (s.layout != WeightLayout::kOutputFirst) {
      return invalid_argument_error("conv2d: conv_avx512 takes a depthwise convolution's w as [O, 1, KH, KW]");
    }
    return reads_depthwise_directly(s) ? depthwise_direct(context, s, x, w, b, z, y)
                                       : depthwise(context, s, x, w, b, z, y);
  }
  for (int64_t img = 0; img < s.n; ++img) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* xg = x + (img * s.c + g * s.group_channels()) * s.h * s.w;
      float* yg = y + (img * s.o + g * og) * s.points();
      KILN_RETURN_IF_ERROR(
          wide_group(context, s, xg, w + s.weight_at(g * og, 0), b + g * og, z ? z + (yg - y) : nullptr, yg));
    }
  }
  return Status();
}

}  // namespace kiln::ral::library
