#include "ral/library/conv_channel_tiles.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

#include "kiln/ral/execution_context.h"
#include "ral/library/conv_avx512_parts.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

namespace {

using namespace conv_parts;  // NOLINT(google-build-using-namespace): this file's own helpers

// Where a tile over data in blocks of 16 channels (conv2d_blocked) writes its finished sums: y in
// blocks ([ceil(O/16), OH · OW, 16] from the tile's first block and point, blocks `block` floats
// apart), each point's 16 channels one store, no transpose; z (laid out as y) added, then the
// activation where asked; the lanes past the output channels written 0, whatever the weights
// there held.
struct BlockedOut {
  float* y;
  const float* z;
  int64_t block;
  const Activation* act;
};

// Where w holds the output channel last or in blocks of 16 (ConvShape::layout), 16 output channels
// of a row k of the product are 16 consecutive weights, and a register tile runs along them: V
// vectors of 16 output channels by NP points of one output row, each point's input broadcast from
// the planes. No lane is spent on a junk point or on a short last panel, which the tiles along
// points spend on small images (7 x 7: 49 points in 64 lanes).
// Sums over rows [k0, k1) start from the bias (`bias`, first rows) or from `acc`, and go back to
// `acc`, point p's V vectors at acc[(p · V + v) · 16]. `lanes[v]`: the output channels vector v
// holds. Vector v's weights of row k are w[(k - k0) · kstride + v · vstride, ...) (channel_weights'
// copy, or the blocks in place), and point p reads in[offsets[k] + p · kPointStride] (16 where the
// input is in blocks of 16 channels, each point's 16 together). The first `next_rows` rows
// of weights from `next` (rows ldw apart in the call's w: those channel_weights copies next) are
// fetched into the L2 cache as the tile goes. With `blocked_out` (the data in blocks, the last
// rows) the finished sums go straight to y instead (BlockedOut).
template <int V, int NP, int kPointStride>
[[gnu::target("avx512f")]] void channel_tile(int64_t k0, int64_t k1, const float* w, int64_t kstride, int64_t vstride,
                                             const __mmask16* lanes, const float* in, const int64_t* offsets,
                                             const float* bias, float* acc, const float* next, int64_t next_rows,
                                             int64_t ldw, const BlockedOut* blocked_out) {
  // The residual's points, read when the sums are done, are fetched now, while they run.
  if (blocked_out && blocked_out->z) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
#pragma GCC unroll 14
      for (int p = 0; p < NP; ++p) {
        _mm_prefetch(reinterpret_cast<const char*>(blocked_out->z + v * blocked_out->block + p * 16), _MM_HINT_T0);
      }
    }
  }
  __m512 sums[V][NP];
#pragma GCC unroll 14
  for (int p = 0; p < NP; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      sums[v][p] = bias ? _mm512_maskz_loadu_ps(lanes[v], bias + 16 * v) : _mm512_load_ps(acc + (p * V + v) * 16);
    }
  }
  for (int64_t k = k0; k < k1; ++k) {
    const float* wk = w + (k - k0) * kstride;
    __m512 weights[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) weights[v] = _mm512_loadu_ps(wk + v * vstride);
    if (k - k0 < next_rows) {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) _mm_prefetch(reinterpret_cast<const char*>(next + (k - k0) * ldw + 16 * v), _MM_HINT_T1);
    }
    const float* at = in + offsets[k];
#pragma GCC unroll 14
    for (int p = 0; p < NP; ++p) {
      const __m512 a = _mm512_set1_ps(at[p * kPointStride]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) sums[v][p] = _mm512_fmadd_ps(a, weights[v], sums[v][p]);
    }
  }
  if (blocked_out) {
    const BlockedOut& out = *blocked_out;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
#pragma GCC unroll 14
      for (int p = 0; p < NP; ++p) {
        const int64_t at = v * out.block + p * 16;
        __m512 value = sums[v][p];
        if (out.z) value = _mm512_add_ps(value, _mm512_loadu_ps(out.z + at));
        if (out.act) value = activate(value, *out.act);
        _mm512_storeu_ps(out.y + at, _mm512_maskz_mov_ps(lanes[v], value));
      }
    }
    return;
  }
#pragma GCC unroll 14
  for (int p = 0; p < NP; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_store_ps(acc + (p * V + v) * 16, sums[v][p]);
  }
}

using ChannelTileFn = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const __mmask16*, const float*,
                               const int64_t*, const float*, float*, const float*, int64_t, int64_t,
                               const BlockedOut*);

// r[i][j] becomes r[j][i]: a 16 x 16 block of floats transposed in registers. (The zero-masked
// forms with every lane kept are the plain instructions; GCC 12 warns that the plain intrinsics'
// undefined pass-through may be used uninitialized.)
[[gnu::target("avx512f"), gnu::always_inline]] inline void transpose16(__m512 (&r)[16]) {
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_maskz_shuffle_f32x4(kAll, u[i + j], u[i + 4 + j], 0x88);
      t[i + 4 + j] = _mm512_maskz_shuffle_f32x4(kAll, u[i + j], u[i + 4 + j], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[8 + j], 0xDD);
  }
}

// A channel_tile's finished sums (`acc`, np points of `count` output channels) into y's rows
// (stride ldy, from the tile's first point): z's points (rows of the same stride) added where z
// is given, then the activation where asked. Each 16 channels by 16 points are transposed in
// registers, so that each channel's points are one masked store.
[[gnu::target("avx512f")]] void store_channel_tile(int V, int64_t np, int64_t count, const float* acc, const float* z,
                                                   const Activation& act, float* y, int64_t ldy) {
  const __mmask16 points = first_lanes(np);
  for (int v = 0; v * 16 < count; ++v) {
    __m512 rows[16];
    for (int64_t p = 0; p < 16; ++p) rows[p] = p < np ? _mm512_load_ps(acc + (p * V + v) * 16) : _mm512_setzero_ps();
    transpose16(rows);
    for (int64_t c = 0; c < std::min<int64_t>(16, count - 16 * v); ++c) {
      const int64_t at = (16 * v + c) * ldy;
      __m512 out = rows[c];
      if (z) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(points, z + at));
      _mm512_mask_storeu_ps(y + at, points, act.any() ? activate(out, act) : out);
    }
  }
}

// Rows [k0, k1) of `count` (<= 16 · V) output channels' weights, w's rows ldw apart, as
// channel_tile reads them: 16 · V a row, the lanes past `count` 0. A copy, because rows a power
// of two of channels apart (512 and more floats) share the L1 cache's few sets, and each tile of
// points would read them from further away.
[[gnu::target("avx512f")]] void channel_weights(int V, int64_t k0, int64_t k1, const float* w, int64_t ldw,
                                                const __mmask16* lanes, float* out) {
  for (int64_t k = k0; k < k1; ++k) {
    for (int v = 0; v < V; ++v) {
      _mm512_store_ps(out + ((k - k0) * V + v) * 16, _mm512_maskz_loadu_ps(lanes[v], w + k * ldw + 16 * v));
    }
  }
}

// By points per tile: 4 vectors of channels by up to 7 points (rows of 7 points, as at the end of
// ResNet), or 2 by up to 14; 28 sums either way. A last channel tile of fewer channels has fewer
// vectors: 3 (of a tile of 4) by up to 7 points, 1 by up to 14.
template <int V, int kPointStride, size_t... I>
constexpr auto channel_tiles(std::index_sequence<I...>) {
  return std::array<ChannelTileFn, sizeof...(I) + 1>{nullptr, channel_tile<V, static_cast<int>(I) + 1, kPointStride>...};
}
template <int kPointStride>
struct ChannelTiles {
  static constexpr auto k1 = channel_tiles<1, kPointStride>(std::make_index_sequence<14>());
  static constexpr auto k2 = channel_tiles<2, kPointStride>(std::make_index_sequence<14>());
  static constexpr auto k3 = channel_tiles<3, kPointStride>(std::make_index_sequence<7>());
  static constexpr auto k4 = channel_tiles<4, kPointStride>(std::make_index_sequence<7>());
  static ChannelTileFn of(int V, size_t np) { return V == 4 ? k4[np] : V == 3 ? k3[np] : V == 2 ? k2[np] : k1[np]; }
};

// The tile of V vectors (1 to 4) by np points (at most 14, or 7 for 3 and 4 vectors), whose
// points are 1 or 16 floats apart.
ChannelTileFn channel_tile_for(int V, int64_t np, bool in_blocks) {
  const auto at = static_cast<size_t>(np);
  return in_blocks ? ChannelTiles<16>::of(V, at) : ChannelTiles<1>::of(V, at);
}

}  // namespace

// One image's group with w's output channel last or in blocks (channel_tile): y's rows (stride OH ·
// OW) = activation(bias + the product + z?), the product reading point (i, j) of row k at
// in[offsets[k] + i · width + j]. w: the group's first output channel in a row of ldw weights, or
// its first block. Each thread takes a run of (16 · V output channels, a run of one output row's
// points) tiles; for each channel tile, block by block of rows, it copies the weights
// (channel_weights; in blocks, it reads them where they are) and sweeps its point tiles over
// them, each tile's sums kept between blocks.
Status channel_products(const HostThreads& threads, const ConvShape& s, const float* in, int64_t width,
                        const int64_t* offsets, const float* w, int64_t ldw, const float* bias, float* y,
                        const float* z, bool in_blocks, bool out_blocks) {
  const int64_t stride = in_blocks ? 16 : 1;  // between points of `in`
  const int V = s.ow <= 7 ? 4 : 2, most = V == 4 ? 7 : 14;
  const bool blocks = s.layout == WeightLayout::kOutputBlocks;
  const int64_t block = 512 / V;  // rows of the product at a time: 32 KiB of weights, in the L1 cache
  const int64_t per_row = (s.ow + most - 1) / most, point_tiles = s.oh * per_row;
  const int64_t og = s.group_outputs(), depth = s.depth(), ldy = s.points(), sums = 16 * V * most;
  const int64_t channel_tiles = (og + 16 * V - 1) / (16 * V), units = channel_tiles * point_tiles;
  const int64_t thread_count = threads.count();
  // Where the image's input is larger than the L2 cache and the weights (in place, in blocks) are
  // small, each channel tile sweeping the whole image would read the input from memory again
  // (ResNet-50's 1x1 convolutions from 256 channels to 64 over 56 x 56: 3.2 MB read twice, 1.12x
  // the time at batch 16): the tiles then go by chunks of two rows of points, every channel tile
  // over a chunk before the next, the chunk's input kept in the cache and the weights read again
  // from it for each chunk.
  const int64_t input_bytes = s.group_channels() * s.h * s.w * int64_t{sizeof(float)};
  const bool by_points = blocks && input_bytes > (int64_t{1} << 20) && depth * og * int64_t{sizeof(float)} <= (int64_t{256} << 10);
  const int64_t chunk = by_points ? 2 * per_row : point_tiles;  // point tiles a channel tile sweeps at a time
  // On small images, runs of whole channel tiles, two a thread, where they split evenly into
  // those runs: a part that starts inside one copies and reads its weights again, at batch 1 from
  // memory, and within a run each channel tile's last block fetches the next one's first weights.
  // Runs of unequal length left a thread idle: 5 channel tiles on two threads (MobileNet-V2's 1x1
  // from 960 to 320 channels over 7 x 7) took 1.35x less time than on one, not 2x. Otherwise runs
  // of tiles, four a thread, and at most 128 tiles' sums each (by points: runs of point tiles).
  const bool whole = !by_points && point_tiles <= 64 && channel_tiles >= 2 * thread_count &&
                     (thread_count == 1 || channel_tiles % (2 * thread_count) == 0);
  const int64_t spread = by_points ? point_tiles : units;
  const int64_t parts = whole ? 2 * thread_count : std::max(std::min<int64_t>(spread, 4 * thread_count), (spread + 127) / 128);
  const Activation act(s);
  std::atomic<bool> no_room{false};
  threads.run(static_cast<uint64_t>(parts), [&](uint64_t part_index) {
    const auto part = static_cast<int64_t>(part_index);
    const int64_t begin = whole ? channel_tiles * part / parts * point_tiles : spread * part / parts;
    const int64_t end = whole ? channel_tiles * (part + 1) / parts * point_tiles : spread * (part + 1) / parts;
    if (begin == end) return;
    float* acc = scratch<4>(static_cast<size_t>(std::min({end - begin, point_tiles, chunk}) * sums));
    float* weights = blocks ? nullptr : scratch<5>(static_cast<size_t>(block * 16 * V));
    if (!acc || (!blocks && !weights)) {
      no_room = true;
      return;
    }
    auto tile_of = [&](int64_t t, int64_t* i, int64_t* j0) {  // point tile t: row i, columns [j0, return)
      *i = t / per_row;
      const int64_t c = t % per_row;
      *j0 = s.ow * c / per_row;
      return s.ow * (c + 1) / per_row;
    };
    // Channel tile ct over point tiles [t0, t1), their sums at acc.
    auto sweep = [&](int64_t ct, int64_t t0, int64_t t1, bool more_channels) {
      const int64_t o0 = ct * 16 * V, count = std::min<int64_t>(16 * V, og - o0);
      const int vectors = static_cast<int>((count + 15) / 16);  // a last tile's may be fewer than V
      __mmask16 lanes[4];
      for (int v = 0; v < vectors; ++v) lanes[v] = first_lanes(count - 16 * v);
      for (int64_t k0 = 0; k0 < depth || k0 == 0; k0 += block) {  // once with no rows: the bias alone
        const int64_t k1 = std::min(depth, k0 + block);
        // In blocks, each vector's weights are rows of 16 in place (o0 starts a block); otherwise
        // a copy, and the first tile fetches the next rows' weights (after the last rows, the next
        // channel tile's first ones) into the L2 cache as it goes, so that channel_weights does
        // not wait for them from memory.
        const float* tile_w = weights;
        int64_t kstride = 16 * vectors, vstride = 16, next_rows = 0;
        const float* next = nullptr;
        if (blocks) {
          tile_w = w + (o0 / kOutputBlock * depth + k0) * kOutputBlock;
          kstride = kOutputBlock;
          vstride = kOutputBlock * depth;
        } else {
          channel_weights(vectors, k0, k1, w + o0, ldw, lanes, weights);
          next = k1 < depth ? w + k1 * ldw + o0 : w + o0 + 16 * V;
          next_rows = k1 < depth ? std::min(block, depth - k1) : more_channels ? std::min(block, depth) : 0;
        }
        for (int64_t t = t0; t < t1; ++t) {
          int64_t i, j0;
          const int64_t j1 = tile_of(t, &i, &j0);
          BlockedOut out{};
          if (out_blocks && k1 == depth) {
            const int64_t first = (o0 / 16 * ldy + i * s.ow + j0) * 16;
            out = {y + first, z ? z + first : nullptr, ldy * 16, act.any() ? &act : nullptr};
          }
          channel_tile_for(vectors, j1 - j0, in_blocks)(k0, k1, tile_w, kstride, vstride, lanes,
                                                      in + (i * width + j0) * stride, offsets,
                                                      k0 == 0 ? bias + o0 : nullptr, acc + (t - t0) * sums, next,
                                                      t == t0 ? next_rows : 0, ldw, out.y ? &out : nullptr);
        }
      }
      for (int64_t t = t0; t < t1 && !out_blocks; ++t) {  // in blocks: written by the tiles
        int64_t i, j0;
        const int64_t j1 = tile_of(t, &i, &j0), first = o0 * ldy + i * s.ow + j0;
        store_channel_tile(vectors, j1 - j0, count, acc + (t - t0) * sums, z ? z + first : nullptr, act, y + first,
                           ldy);
      }
    };
    if (by_points) {
      for (int64_t t0 = begin; t0 < end; t0 += chunk) {
        for (int64_t ct = 0; ct < channel_tiles; ++ct) sweep(ct, t0, std::min(end, t0 + chunk), false);
      }
      return;
    }
    for (int64_t ct = begin / point_tiles; ct * point_tiles < end; ++ct) {
      const int64_t t0 = std::max(begin, ct * point_tiles) - ct * point_tiles;
      sweep(ct, t0, std::min(end, (ct + 1) * point_tiles) - ct * point_tiles, (ct + 1) * point_tiles < end);
    }
  });
  return no_room ? no_memory(std::min<int64_t>(128, point_tiles) * sums + block * 16 * V) : Status();
}

}  // namespace kiln::ral::library
