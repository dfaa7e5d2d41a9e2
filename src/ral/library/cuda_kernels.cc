#include "ral/library/cuda_kernels.h"

namespace kiln::ral::library {

namespace {

// Written once per element type with the preprocessor: extern "C" kernels cannot be templates.
constexpr std::string_view kSource = R"CU(
typedef unsigned long long kiln_u64;

#define KILN_GRID_LOOP(i, count) \
  for (kiln_u64 i = (kiln_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (count); \
       i += (kiln_u64)gridDim.x * blockDim.x)

// Philox4x32-10 on counter c with key (k0, k1).
__device__ __forceinline__ void kiln_philox(unsigned c[4], unsigned k0, unsigned k1) {
  for (int round = 0; round < 10; ++round) {
    const unsigned hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    const unsigned n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

__device__ __forceinline__ void kiln_philox_block(unsigned w[4], kiln_u64 b, unsigned key0, unsigned key1,
                                                  unsigned site, unsigned run) {
  w[0] = (unsigned)b;
  w[1] = (unsigned)(b >> 32);
  w[2] = site;
  w[3] = run;
  kiln_philox(w, key0, key1);
}

__device__ __forceinline__ float kiln_uniform_f32(unsigned w) { return (float)(w >> 8) * 0x1.0p-24f; }
__device__ __forceinline__ double kiln_uniform_f64(unsigned low, unsigned high) {
  return (double)(((((kiln_u64)high) << 32) | low) >> 11) * 0x1.0p-53;
}
__device__ __forceinline__ float kiln_scale(float u, float lo, float hi) {
  const float v = lo + (hi - lo) * u;
  return v < hi || lo == hi ? v : nextafterf(hi, lo);
}
__device__ __forceinline__ double kiln_scale(double u, double lo, double hi) {
  const double v = lo + (hi - lo) * u;
  return v < hi || lo == hi ? v : nextafter(hi, lo);
}
// Box-Muller in double precision; u1 in (0, 1].
__device__ __forceinline__ void kiln_box_muller(double u1, double u2, double* z0, double* z1) {
  const double radius = sqrt(-2.0 * log(u1));
  const double angle = 2.0 * 3.141592653589793 * u2;
  *z0 = radius * cos(angle);
  *z1 = radius * sin(angle);
}

// f16 and bf16 as their bits (no cuda_fp16.h: NVRTC builds this alone, and the host tests too):
// their values in f32, and an f32 rounded to them to nearest even (kiln/loop/op_eval.h's rules;
// NaN becomes the quiet NaN of its sign).
__device__ __forceinline__ unsigned kiln_float_bits(float f) {
  union { float f; unsigned u; } c;
  c.f = f;
  return c.u;
}
__device__ __forceinline__ float kiln_bits_float(unsigned u) {
  union { float f; unsigned u; } c;
  c.u = u;
  return c.f;
}
__device__ __forceinline__ float kiln_f16_value(unsigned short h) {
  const unsigned sign = ((unsigned)h & 0x8000u) << 16, exponent = ((unsigned)h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return kiln_bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return kiln_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float small = (float)mantissa * 5.9604644775390625e-8f;  // a subnormal: mantissa * 2^-24
  return sign ? -small : small;
}
__device__ __forceinline__ float kiln_bf16_value(unsigned short h) { return kiln_bits_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short kiln_f16_bits(float f) {
  const unsigned x = kiln_float_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // 65520 and up round to inf
  if (a < 0x38800000u) {
    // Below 2^-14: a subnormal f16, the value in units of 2^-24 rounded to nearest even.
    return (unsigned short)(sign | (unsigned)rintf(kiln_bits_float(a) * 16777216.0f));
  }
  const unsigned m = a - 0x38000000u;  // the exponent rebiased from 127 to 15
  return (unsigned short)(sign | ((m + 0xfffu + ((m >> 13) & 1u)) >> 13));
}
__device__ __forceinline__ unsigned short kiln_bf16_bits(float f) {
  const unsigned x = kiln_float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16 & 0x8000u) | 0x7fc0u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// The f32 numbers, stored as T by STORE (nothing for f32; rounded to f16 or bf16): f16 and bf16
// take the f32 numbers of the same stream.
#define KILN_RANDOM_F32_KERNELS(S, T, STORE)                                                                   \
  extern "C" __global__ void kiln_random_uniform_##S(T* out, kiln_u64 count, unsigned key0, unsigned key1,      \
                                                     unsigned site, unsigned run, float lo, float hi) {         \
    KILN_GRID_LOOP(b, (count + 3) / 4) {                                                                       \
      unsigned w[4];                                                                                           \
      kiln_philox_block(w, b, key0, key1, site, run);                                                          \
      for (int i = 0; i < 4 && 4 * b + i < count; ++i) out[4 * b + i] = STORE(kiln_scale(kiln_uniform_f32(w[i]), lo, hi)); \
    }                                                                                                          \
  }                                                                                                            \
  /* Pair j takes words 2j and 2j + 1: a block holds pairs 2b and 2b + 1. */                                   \
  extern "C" __global__ void kiln_random_normal_##S(T* out, kiln_u64 count, unsigned key0, unsigned key1,       \
                                                    unsigned site, unsigned run, float mean, float sd) {        \
    KILN_GRID_LOOP(b, (count + 3) / 4) {                                                                       \
      unsigned w[4];                                                                                           \
      kiln_philox_block(w, b, key0, key1, site, run);                                                          \
      for (int p = 0; p < 2; ++p) {                                                                            \
        double z[2];                                                                                           \
        kiln_box_muller(1.0 - kiln_uniform_f32(w[2 * p]), kiln_uniform_f32(w[2 * p + 1]), &z[0], &z[1]);       \
        for (int e = 0; e < 2; ++e) {                                                                          \
          const kiln_u64 i = 4 * b + 2 * p + e;                                                                \
          if (i < count) out[i] = STORE((float)((double)mean + (double)sd * z[e]));                            \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }

KILN_RANDOM_F32_KERNELS(f32, float, )
KILN_RANDOM_F32_KERNELS(f16, unsigned short, kiln_f16_bits)
KILN_RANDOM_F32_KERNELS(bf16, unsigned short, kiln_bf16_bits)

extern "C" __global__ void kiln_random_uniform_f64(double* out, kiln_u64 count, unsigned key0, unsigned key1,
                                                   unsigned site, unsigned run, double lo, double hi) {
  KILN_GRID_LOOP(b, (count + 1) / 2) {
    unsigned w[4];
    kiln_philox_block(w, b, key0, key1, site, run);
    out[2 * b] = kiln_scale(kiln_uniform_f64(w[0], w[1]), lo, hi);
    if (2 * b + 1 < count) out[2 * b + 1] = kiln_scale(kiln_uniform_f64(w[2], w[3]), lo, hi);
  }
}

// Pair j of an f64 tensor takes words 4j to 4j + 3: block j.
extern "C" __global__ void kiln_random_normal_f64(double* out, kiln_u64 count, unsigned key0, unsigned key1,
                                                  unsigned site, unsigned run, double mean, double sd) {
  KILN_GRID_LOOP(b, (count + 1) / 2) {
    unsigned w[4];
    kiln_philox_block(w, b, key0, key1, site, run);
    double z[2];
    kiln_box_muller(1.0 - kiln_uniform_f64(w[0], w[1]), kiln_uniform_f64(w[2], w[3]), &z[0], &z[1]);
    out[2 * b] = mean + sd * z[0];
    if (2 * b + 1 < count) out[2 * b + 1] = mean + sd * z[1];
  }
}

// Whether (a, ia) goes before (b, ib): positions >= n are padding and go last; NaNs go after
// every number; equal keys keep their positions' order. Elements are compared as KEY makes them
// (nothing: as they are; f16 and bf16: their values in f32), and moved as they are.
#define KILN_SORT_KERNELS(S, T, KEY)                                                                        \
  __device__ __forceinline__ bool kiln_sort_before_##S(T a, unsigned ia, T b, unsigned ib, kiln_u64 n,     \
                                                       int descending) {                                   \
    const bool pad_a = ia >= n, pad_b = ib >= n;                                                           \
    if (pad_a || pad_b) return pad_a == pad_b ? ia < ib : pad_b;                                           \
    const auto ka = KEY(a), kb = KEY(b);                                                                   \
    const bool nan_a = ka != ka, nan_b = kb != kb;                                                         \
    if (nan_a || nan_b) return nan_a == nan_b ? ia < ib : nan_b;                                           \
    if (descending ? kb < ka : ka < kb) return true;                                                       \
    if (descending ? ka < kb : kb < ka) return false;                                                      \
    return ia < ib;                                                                                        \
  }                                                                                                        \
  extern "C" __global__ void kiln_sort_load_##S(const T* x, T* keys, unsigned* idx, kiln_u64 rows,         \
                                                kiln_u64 n, kiln_u64 padded) {                             \
    KILN_GRID_LOOP(t, rows * padded) {                                                                     \
      const kiln_u64 row = t / padded, i = t % padded;                                                     \
      keys[t] = i < n ? x[row * n + i] : (T)0;                                                             \
      idx[t] = (unsigned)i;                                                                                \
    }                                                                                                      \
  }                                                                                                        \
  extern "C" __global__ void kiln_sort_step_##S(T* keys, unsigned* idx, kiln_u64 rows, kiln_u64 n,         \
                                                kiln_u64 padded, kiln_u64 k, kiln_u64 j, int descending) { \
    KILN_GRID_LOOP(t, rows * padded) {                                                                     \
      const kiln_u64 i = t % padded, l = i ^ j;                                                            \
      if (l <= i) continue;                                                                                \
      const kiln_u64 p = t, q = t - i + l;                                                                 \
      const bool up = (i & k) == 0;                                                                        \
      const bool swap = up ? kiln_sort_before_##S(keys[q], idx[q], keys[p], idx[p], n, descending)         \
                           : kiln_sort_before_##S(keys[p], idx[p], keys[q], idx[q], n, descending);        \
      if (swap) {                                                                                          \
        const T key = keys[p];                                                                             \
        keys[p] = keys[q];                                                                                 \
        keys[q] = key;                                                                                     \
        const unsigned at = idx[p];                                                                        \
        idx[p] = idx[q];                                                                                   \
        idx[q] = at;                                                                                       \
      }                                                                                                    \
    }                                                                                                      \
  }                                                                                                        \
  extern "C" __global__ void kiln_sort_store_##S(const T* keys, const unsigned* idx, T* values,            \
                                                 int* indices, kiln_u64 rows, kiln_u64 padded,             \
                                                 kiln_u64 count) {                                         \
    KILN_GRID_LOOP(t, rows * count) {                                                                      \
      const kiln_u64 from = t / count * padded + t % count;                                                \
      if (values) values[t] = keys[from];                                                                  \
      if (indices) indices[t] = (int)idx[from];                                                            \
    }                                                                                                      \
  }

KILN_SORT_KERNELS(i1, bool, )
KILN_SORT_KERNELS(i8, signed char, )
KILN_SORT_KERNELS(ui8, unsigned char, )
KILN_SORT_KERNELS(i16, short, )
KILN_SORT_KERNELS(ui16, unsigned short, )
KILN_SORT_KERNELS(i32, int, )
KILN_SORT_KERNELS(ui32, unsigned, )
KILN_SORT_KERNELS(i64, long long, )
KILN_SORT_KERNELS(ui64, unsigned long long, )
KILN_SORT_KERNELS(f16, unsigned short, kiln_f16_value)
KILN_SORT_KERNELS(bf16, unsigned short, kiln_bf16_value)
KILN_SORT_KERNELS(f32, float, )
KILN_SORT_KERNELS(f64, double, )

// An i32 from an f32-scaled i64 sum: rounded to nearest even and saturated, NaN to 0 (the cpu
// device's rule, oneDNN's).
__device__ __forceinline__ int kiln_saturated_i32(double v) {
  if (v != v) return 0;
  v = rint(v);
  return v <= -2147483648.0 ? (int)(-2147483647 - 1) : v >= 2147483647.0 ? 2147483647 : (int)v;
}

// The i8 products that cuBLAS does not take: one thread per element of c, its sum in i64.
extern "C" __global__ void kiln_gemm_i8(const signed char* a, const signed char* b, int* c, kiln_u64 batch,
                                        kiln_u64 m, kiln_u64 n, kiln_u64 k, int transpose_a, int transpose_b,
                                        float alpha, float beta) {
  KILN_GRID_LOOP(t, batch * m * n) {
    const kiln_u64 p = t / (m * n), i = t / n % m, j = t % n;
    const signed char* pa = a + p * m * k;
    const signed char* pb = b + p * k * n;
    long long sum = 0;
    for (kiln_u64 q = 0; q < k; ++q) {
      sum += (long long)pa[transpose_a ? q * m + i : i * k + q] * (long long)pb[transpose_b ? j * k + q : q * n + j];
    }
    const double scaled = (double)alpha * (double)sum;
    c[t] = kiln_saturated_i32(beta == 0.0f ? scaled : scaled + (double)beta * (double)c[t]);
  }
}

// qgemm's last step: c = f32(sum) * scale_a[row] * scale_b[column], in that order.
extern "C" __global__ void kiln_qgemm_scale(const int* sums, const float* scale_a, const float* scale_b, float* c,
                                            kiln_u64 m, kiln_u64 n) {
  KILN_GRID_LOOP(t, m * n) c[t] = (float)sums[t] * scale_a[t / n] * scale_b[t % n];
}

// A collective's mean: the sum over NCCL, divided by the ranks.
extern "C" __global__ void kiln_divide_f32(float* y, kiln_u64 count, float divisor) {
  KILN_GRID_LOOP(t, count) y[t] = y[t] / divisor;
}
extern "C" __global__ void kiln_divide_f64(double* y, kiln_u64 count, double divisor) {
  KILN_GRID_LOOP(t, count) y[t] = y[t] / divisor;
}
)CU";

}  // namespace

std::string_view cuda_library_source() { return kSource; }

std::vector<std::pair<uint64_t, uint64_t>> bitonic_stages(uint64_t padded) {
  std::vector<std::pair<uint64_t, uint64_t>> stages;
  for (uint64_t k = 2; k <= padded; k <<= 1) {
    for (uint64_t j = k >> 1; j > 0; j >>= 1) stages.emplace_back(k, j);
  }
  return stages;
}

}  // namespace kiln::ral::library
