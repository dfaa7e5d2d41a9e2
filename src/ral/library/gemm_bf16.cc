#include "ral/library/gemm_bf16.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "kiln/ral/execution_context.h"
#include "ral/library/narrow_floats.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

// A namespace of its own: the library's files are compiled in unity batches (Makefile), whose
// anonymous namespaces are one.
namespace bf16 {
namespace {

// b is packed in AMX's tiles of 16 rows of 64 bytes: 16 pairs of rows x 16 columns (each column's
// two k values side by side, the layout TDPBF16PS and VDPBF16PS read); a tile of a holds 16 x 32
// bf16, one of sums 16 x 16 f32. A block of c has 32 columns (two column tiles of b, a "column
// pair") and the kernel's rows: AMX's 2 x 2 tiles (32 x 32), the most the eight tile registers
// hold with the two tiles of a and the two of b it needs (tiles 0-3 sum, 4-5 hold a, 6-7 b);
// AVX-512's 14 x 32, 28 of the 32 zmm registers, the other two holding b.
constexpr int64_t kRows = 16, kDepth = 32, kBlock = 32;
constexpr int64_t kTileElements = kRows * kDepth;  // bf16 in a tile of a or b
// Below this many multiply-adds a product runs on the calling thread alone (as onednn.cc's).
constexpr int64_t kParallelWork = int64_t{1} << 22;

// LDTILECFG's 64 bytes: palette 1, every tile 16 rows of 64 bytes. A constant in memory, since
// GCC's _tile_loadconfig tells the compiler that it reads only the first 8 bytes of its operand
// (stores to the rest of a local would be dropped as dead).
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};
constexpr TileConfig tile_config() {
  TileConfig config{};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = kRows;
  }
  return config;
}
constexpr TileConfig kTileConfig = tile_config();

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The product's geometry: op(a) m x k, op(b) k x n, in blocks and tiles.
struct Geometry {
  const GemmShape& s;
  int64_t depth_tiles;   // ceil(k / 32): k padded with zeros
  int64_t pairs;         // ceil(k / 2): the pairs of rows of b, the last padded
  int64_t column_pairs;  // ceil(n / 32): pairs of 16-column tiles of b, the last padded
  int64_t row_blocks;    // ceil(m / the kernel's rows)
  Geometry(const GemmShape& shape, int64_t block_rows)
      : s(shape),
        depth_tiles(ceil_div(shape.k, kDepth)),
        pairs(ceil_div(shape.k, 2)),
        column_pairs(ceil_div(shape.n, kBlock)),
        row_blocks(ceil_div(shape.m, block_rows)) {}
  // op(b)[p, j], op(a)[i, p].
  uint16_t b_at(const uint16_t* b, int64_t p, int64_t j) const {
    return s.transpose_b ? b[j * s.ldb() + p] : b[p * s.ldb() + j];
  }
  uint16_t a_at(const uint16_t* a, int64_t i, int64_t p) const {
    return s.transpose_a ? a[p * s.lda() + i] : a[i * s.lda() + p];
  }
  // The column pairs a part sweeps before its next rows: as many as fill half the core's L2 with
  // their packed b, so that the rows' a is read from memory once for all of them. At 1024^3 on AMX
  // (2 MiB of L2: 16 pairs) 0.93-0.98 ms on two threads against 1.03-1.07 at 4 pairs
  // (2026-12-02).
  int64_t pairs_at_once() const {
    static const long l2_bytes = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    const int64_t half_l2 = l2_bytes > 0 ? l2_bytes / 2 : int64_t{1} << 20;
    return std::max<int64_t>(1, half_l2 / (2 * depth_tiles * kTileElements * 2));
  }
  // The packed tile of b for 16-column tile `column` and depth tile `depth`.
  int64_t b_tile(int64_t column, int64_t depth) const { return (column * depth_tiles + depth) * kTileElements; }
};

// Rows 2p and 2p + 1 of a 32-row slice of b, 32 columns, interleaved into row p of two tiles.
[[gnu::target("avx512f,avx512bw")]] void interleave_pair(const uint16_t* row0, const uint16_t* row1,
                                                           uint16_t* left, uint16_t* right) {
  const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i high = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                                        22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  const __m512i r0 = _mm512_loadu_si512(row0), r1 = _mm512_loadu_si512(row1);
  _mm512_store_si512(left, _mm512_permutex2var_epi16(r0, low, r1));
  _mm512_store_si512(right, _mm512_permutex2var_epi16(r0, high, r1));
}

// b's column pairs [first, last) into `packed` (Geometry::b_tile's layout, pair `first` at its
// start), zeros past k and n.
void pack_b(const Geometry& g, const uint16_t* b, int64_t first, int64_t last, uint16_t* packed) {
  const GemmShape& s = g.s;
  for (int64_t pair = first; pair < last; ++pair) {
    const int64_t j0 = pair * kBlock;
    for (int64_t d = 0; d < g.depth_tiles; ++d) {
      uint16_t* left = packed + g.b_tile(2 * (pair - first), d);
      uint16_t* right = packed + g.b_tile(2 * (pair - first) + 1, d);
      const int64_t p0 = d * kDepth;
      if (!s.transpose_b && j0 + kBlock <= s.n && p0 + kDepth <= s.k) {
        for (int64_t r = 0; r < kRows; ++r) {
          const uint16_t* row = b + (p0 + 2 * r) * s.ldb() + j0;
          interleave_pair(row, row + s.ldb(), left + r * 32, right + r * 32);
        }
        continue;
      }
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t c = 0; c < kBlock; ++c) {
          uint16_t* out = (c < 16 ? left : right) + r * 32 + (c % 16) * 2;
          for (int64_t h = 0; h < 2; ++h) {
            const int64_t p = p0 + 2 * r + h, j = j0 + c;
            out[h] = p < s.k && j < s.n ? g.b_at(b, p, j) : 0;
          }
        }
      }
    }
  }
}

// ---- AMX

// Where the two row tiles of a block row are read from: a itself, or a packed copy.
struct RowTiles {
  const uint16_t* top;
  const uint16_t* bottom;
  int64_t stride_bytes;  // from one row of a tile to the next
  int64_t step;          // elements from one depth tile to the next
};

// One 32 x 32 block of sums over the whole depth into tiles 0-3, stored to `out` (rows of
// `out_stride` floats); `accumulate`: added to what `out` holds.
[[gnu::target("amx-tile,amx-bf16")]] void tile_sums(const RowTiles& a, const uint16_t* b_left,
                                                    const uint16_t* b_right, int64_t depth_tiles, float* out,
                                                    int64_t out_stride, bool accumulate) {
  const int64_t bytes = out_stride * 4;
  if (accumulate) {
    _tile_loadd(0, out, bytes);
    _tile_loadd(1, out + 16, bytes);
    _tile_loadd(2, out + kRows * out_stride, bytes);
    _tile_loadd(3, out + kRows * out_stride + 16, bytes);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t d = 0; d < depth_tiles; ++d) {
    _tile_loadd(4, a.top + d * a.step, a.stride_bytes);
    _tile_loadd(6, b_left + d * kTileElements, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, b_right + d * kTileElements, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a.bottom + d * a.step, a.stride_bytes);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, bytes);
  _tile_stored(1, out + 16, bytes);
  _tile_stored(2, out + kRows * out_stride, bytes);
  _tile_stored(3, out + kRows * out_stride + 16, bytes);
}

[[gnu::target("amx-tile")]] void load_tile_config() { _tile_loadconfig(&kTileConfig); }
[[gnu::target("amx-tile")]] void release_tiles() { _tile_release(); }

struct Amx {
  static constexpr int64_t kBlockRows = 32;
  using Rows = RowTiles;
  static size_t packed_a_elements(const Geometry& g) { return static_cast<size_t>(2 * g.depth_tiles * kTileElements); }
  // Block row `block` of op(a): read in place where its 32 rows are whole rows of a and k is a
  // multiple of 32; otherwise copied into `packed` (2 x depth_tiles tiles), zeros past m and k.
  static Rows rows(const Geometry& g, const uint16_t* a, int64_t block, uint16_t* packed) {
    const GemmShape& s = g.s;
    const int64_t i0 = block * kBlockRows;
    if (!s.transpose_a && s.k % kDepth == 0 && i0 + kBlockRows <= s.m) {
      const uint16_t* top = a + i0 * s.lda();
      return {top, top + kRows * s.lda(), s.lda() * 2, kDepth};
    }
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t d = 0; d < g.depth_tiles; ++d) {
        uint16_t* tile = packed + (half * g.depth_tiles + d) * kTileElements;
        for (int64_t r = 0; r < kRows; ++r) {
          const int64_t i = i0 + half * kRows + r;
          for (int64_t c = 0; c < kDepth; ++c) {
            const int64_t p = d * kDepth + c;
            tile[r * kDepth + c] = i < s.m && p < s.k ? g.a_at(a, i, p) : 0;
          }
        }
      }
    }
    return {packed, packed + g.depth_tiles * kTileElements, kDepth * 2, kTileElements};
  }
  static void sums(const Rows& a, const uint16_t* left, const uint16_t* right, const Geometry& g, float* out,
                   int64_t out_stride, bool accumulate) {
    tile_sums(a, left, right, g.depth_tiles, out, out_stride, accumulate);
  }
  // A thread's tile registers are configured before its first block and released after its last.
  static void begin() { load_tile_config(); }
  static void end() { release_tiles(); }
};

// ---- AVX-512 BF16

// Where a block row's 14 rows are read from: rows of a itself, or of a packed copy, `stride`
// elements apart, each holding the rows' pairs of k values (an even count: the copy pads odd k
// with a zero).
struct PairRows {
  const uint16_t* first;
  int64_t stride;
};

constexpr int64_t kAvx512Rows = 14;

// One 14 x 32 block of sums over every pair of rows of b: for each pair, the two column tiles of
// b in two registers, each row's pair of a broadcast to all 16 lanes, 28 VDPBF16PS. Stored to
// `out` (rows of `out_stride` floats); `accumulate`: added to what `out` holds.
[[gnu::target("avx512f,avx512bf16")]] void pair_sums(const PairRows& a, const uint16_t* b_left,
                                                     const uint16_t* b_right, int64_t pairs, float* out,
                                                     int64_t out_stride, bool accumulate) {
  __m512 sum[kAvx512Rows][2];
#pragma GCC unroll 14
  for (int r = 0; r < kAvx512Rows; ++r) {
    sum[r][0] = accumulate ? _mm512_loadu_ps(out + r * out_stride) : _mm512_setzero_ps();
    sum[r][1] = accumulate ? _mm512_loadu_ps(out + r * out_stride + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const auto left = reinterpret_cast<__m512bh>(_mm512_load_si512(b_left + p * 32));
    const auto right = reinterpret_cast<__m512bh>(_mm512_load_si512(b_right + p * 32));
#pragma GCC unroll 14
    for (int r = 0; r < kAvx512Rows; ++r) {
      int32_t pair;
      std::memcpy(&pair, a.first + r * a.stride + 2 * p, sizeof pair);
      const auto row = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], row, left);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], row, right);
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < kAvx512Rows; ++r) {
    _mm512_storeu_ps(out + r * out_stride, sum[r][0]);
    _mm512_storeu_ps(out + r * out_stride + 16, sum[r][1]);
  }
}

struct Avx512 {
  static constexpr int64_t kBlockRows = kAvx512Rows;
  using Rows = PairRows;
  static size_t packed_a_elements(const Geometry& g) { return static_cast<size_t>(kBlockRows * 2 * g.pairs); }
  // Block row `block` of op(a): read in place where its 14 rows are whole rows of a and k is even;
  // otherwise copied into `packed` (14 rows of 2 * pairs), zeros past m and k.
  static Rows rows(const Geometry& g, const uint16_t* a, int64_t block, uint16_t* packed) {
    const GemmShape& s = g.s;
    const int64_t i0 = block * kBlockRows;
    if (!s.transpose_a && s.k % 2 == 0 && i0 + kBlockRows <= s.m) return {a + i0 * s.lda(), s.lda()};
    const int64_t stride = 2 * g.pairs;
    for (int64_t r = 0; r < kBlockRows; ++r) {
      const int64_t i = i0 + r;
      for (int64_t p = 0; p < stride; ++p) packed[r * stride + p] = i < s.m && p < s.k ? g.a_at(a, i, p) : 0;
    }
    return {packed, stride};
  }
  static void sums(const Rows& a, const uint16_t* left, const uint16_t* right, const Geometry& g, float* out,
                   int64_t out_stride, bool accumulate) {
    pair_sums(a, left, right, g.pairs, out, out_stride, accumulate);
  }
  static void begin() {}
  static void end() {}
};

// c's elements from a block's sums: alpha * sum + beta * c (beta 0: c not read), f32 or
// rounded to bf16 as narrow_floats.h rounds.
// (Both kernels run only where AVX-512 does. 16 lanes at once: one element at a time, a 1024^3
// product with beta = 1 took 1.74 ms against 1.22 with beta = 0, 2026-12-02.)
[[gnu::target("avx512f")]] void store_row(const float* sums, int64_t count, float alpha, float beta, float* out) {
  const __m512 scale = _mm512_set1_ps(alpha), keep = _mm512_set1_ps(beta);
  for (int64_t j = 0; j < count; j += 16) {
    const auto lanes = static_cast<__mmask16>(count - j >= 16 ? 0xffff : (1u << (count - j)) - 1);
    __m512 sum = _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(lanes, sums + j));
    if (beta != 0) sum = _mm512_add_ps(sum, _mm512_mul_ps(keep, _mm512_maskz_loadu_ps(lanes, out + j)));
    _mm512_mask_storeu_ps(out + j, lanes, sum);
  }
}
void store_row(const float* sums, int64_t count, float alpha, float beta, BFloat16* out) {
  if (alpha == 1 && beta == 0) return narrow(sums, count, out);
  float row[kBlock];
  if (beta != 0) widen(out, count, row);
  store_row(sums, count, alpha, beta, row);
  narrow(row, count, out);
}

// The part of c in column pairs [first_pair, last_pair) and block rows [first_row, last_row), on
// Kernel (Amx or Avx512): its columns of b packed into `packed_b` (the thread's own), then its blocks.
template <typename Kernel, typename TC>
void part_of_c(const Geometry& g, const uint16_t* a, const uint16_t* b, TC* c, float alpha, float beta,
               int64_t first_pair, int64_t last_pair, int64_t first_row, int64_t last_row, uint16_t* packed_b,
               uint16_t* packed_a) {
  const GemmShape& s = g.s;
  pack_b(g, b, first_pair, last_pair, packed_b);
  // The sums go straight from the kernel's registers into an f32 c where nothing is left to do to
  // them, starting from c's values where beta is 1 (c += a @ b, as `+=` statements are called).
  const bool in_place = std::is_same_v<TC, float> && alpha == 1 && (beta == 0 || beta == 1);
  alignas(64) float sums[Kernel::kBlockRows * kBlock];
  const int64_t pairs_at_once = g.pairs_at_once();
  Kernel::begin();
  for (int64_t j_first = first_pair; j_first < last_pair; j_first += pairs_at_once) {
    const int64_t j_last = std::min(last_pair, j_first + pairs_at_once);
    for (int64_t block = first_row; block < last_row; ++block) {
      const typename Kernel::Rows rows = Kernel::rows(g, a, block, packed_a);
      const int64_t i0 = block * Kernel::kBlockRows, row_count = std::min(Kernel::kBlockRows, s.m - i0);
      for (int64_t pair = j_first; pair < j_last; ++pair) {
        const int64_t j0 = pair * kBlock, column_count = std::min(kBlock, s.n - j0);
        const uint16_t* left = packed_b + g.b_tile(2 * (pair - first_pair), 0);
        const uint16_t* right = packed_b + g.b_tile(2 * (pair - first_pair) + 1, 0);
        TC* out = c + i0 * s.ldc() + j0;
        if constexpr (std::is_same_v<TC, float>) {
          if (in_place && row_count == Kernel::kBlockRows && column_count == kBlock) {
            Kernel::sums(rows, left, right, g, out, s.ldc(), beta == 1);
            continue;
          }
        }
        Kernel::sums(rows, left, right, g, sums, kBlock, false);
        for (int64_t i = 0; i < row_count; ++i) {
          store_row(sums + i * kBlock, column_count, alpha, beta, out + i * s.ldc());
        }
      }
    }
  }
  Kernel::end();
}

// Whether the operating system saves the register state of every bit of `mask` (XCR0).
bool os_saves(uint32_t mask) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  uint32_t xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  return (xcr0_low & mask) == mask;
}

bool ask_for_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  if (!(edx & (1u << 24)) || !(edx & (1u << 22))) return false;  // AMX-TILE, AMX-BF16
  if (!os_saves(3u << 17)) return false;                          // XTILECFG and XTILEDATA
  // Linux hands out the tile state (8 KiB a thread) only to processes that ask, once.
  constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  return ::syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

bool has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned subleaves = eax;
  if (!(ebx & (1u << 16)) || !(ebx & (1u << 30)) || subleaves < 1) return false;  // AVX512F, AVX512BW
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || !(eax & (1u << 5))) return false;  // AVX512_BF16
  return os_saves(0xe6);  // SSE, AVX, the opmask and both halves of the zmm registers
}

template <typename Kernel, typename TC>
Status product(const ExecutionContext* context, const GemmShape& s, const uint16_t* a, const uint16_t* b, TC* c,
               float alpha, float beta) {
  if (s.m == 0 || s.n == 0) return Status();
  if (s.k == 0) {  // c = beta * c, reading neither a nor b (which may be empty)
    const float zeros[kBlock] = {};
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; j += kBlock) {
        store_row(zeros, std::min(kBlock, s.n - j), alpha, beta, c + i * s.ldc() + j);
      }
    }
    return Status();
  }
  const Geometry g(s, Kernel::kBlockRows);
  // (In double: m, n and k may each be up to 2^31 - 1.)
  const double work = static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  const bool spread = context && context->host_threads() > 1 && work >= static_cast<double>(kParallelWork);
  // The device's threads, one a core by default (the caller, which helps, among them).
  const int64_t cores = spread ? context->host_threads() : 1;
  // c is cut into a part a thread, by columns, each part packing its own columns of b (no wait
  // between packing b and using it, and each thread's b stays in its own L2); by rows too only
  // where there are fewer column pairs than threads (each such part packing its columns again).
  // On two cores, two parts a core (taken as threads come free) measured alike (2026-12-02).
  const int64_t column_parts = std::min(g.column_pairs, cores);
  const int64_t row_parts = std::min(g.row_blocks, ceil_div(cores, column_parts));
  const size_t b_elements =
      static_cast<size_t>(2 * ceil_div(g.column_pairs, column_parts) * g.depth_tiles * kTileElements);
  const size_t a_elements = Kernel::packed_a_elements(g);
  std::atomic<bool> no_memory{false};
  auto part = [&](uint64_t index) {
    const auto p = static_cast<int64_t>(index);
    const int64_t column = p % column_parts, row = p / column_parts;
    uint16_t* packed_b = scratch<0, uint16_t>(b_elements);
    uint16_t* packed_a = scratch<1, uint16_t>(a_elements);
    if (!packed_b || !packed_a) {
      no_memory = true;
      return;
    }
    part_of_c<Kernel>(g, a, b, c, alpha, beta, g.column_pairs * column / column_parts,
                      g.column_pairs * (column + 1) / column_parts, g.row_blocks * row / row_parts,
                      g.row_blocks * (row + 1) / row_parts, packed_b, packed_a);
  };
  if (spread) {
    context->host_parallel(static_cast<uint64_t>(column_parts * row_parts), part);
  } else {
    part(0);
  }
  // (A part without memory wrote nothing of its part of c.)
  return no_memory ? resource_exhausted_error("gemm: no memory for the packed copies of b and a") : Status();
}

template <typename TC>
Status product_on(Bf16Kernel kernel, const ExecutionContext* context, const GemmShape& s, const uint16_t* a,
                  const uint16_t* b, TC* c, float alpha, float beta) {
  if (!bf16_kernel_runs(kernel)) {
    return failed_precondition_error(std::string("gemm: the ") + bf16_kernel_name(kernel) +
                                     " kernel for bf16 products does not run on this CPU");
  }
  return kernel == Bf16Kernel::kAmx ? product<Amx>(context, s, a, b, c, alpha, beta)
                                    : product<Avx512>(context, s, a, b, c, alpha, beta);
}

}  // namespace
}  // namespace bf16

const char* bf16_kernel_name(Bf16Kernel kernel) {
  switch (kernel) {
    case Bf16Kernel::kAmx:
      return "AMX";
    case Bf16Kernel::kAvx512:
      return "AVX-512 BF16";
    case Bf16Kernel::kNone:
      break;
  }
  return "no";
}

bool bf16_kernel_runs(Bf16Kernel kernel) {
  static const bool amx = bf16::ask_for_tiles();
  static const bool avx512 = bf16::has_avx512_bf16();
  return kernel == Bf16Kernel::kAmx ? amx : kernel == Bf16Kernel::kAvx512 && avx512;
}

Bf16Kernel bf16_kernel() {
  if (bf16_kernel_runs(Bf16Kernel::kAmx)) return Bf16Kernel::kAmx;
  if (bf16_kernel_runs(Bf16Kernel::kAvx512) && __builtin_cpu_is("amd")) return Bf16Kernel::kAvx512;
  return Bf16Kernel::kNone;
}

Status gemm_bf16(Bf16Kernel kernel, const ExecutionContext* context, const GemmShape& s, const uint16_t* a,
                 const uint16_t* b, float* c, float alpha, float beta) {
  return bf16::product_on(kernel, context, s, a, b, c, alpha, beta);
}

Status gemm_bf16(Bf16Kernel kernel, const ExecutionContext* context, const GemmShape& s, const uint16_t* a,
                 const uint16_t* b, BFloat16* c, float alpha, float beta) {
  return bf16::product_on(kernel, context, s, a, b, c, alpha, beta);
}

}  // namespace kiln::ral::library
