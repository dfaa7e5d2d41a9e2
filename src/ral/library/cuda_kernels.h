// The CUDA C of the library functions that run on the cuda device as kiln's own kernels:
// Philox random numbers, sorting (sort, argsort and topk through one bitonic network), the i8
// products cuBLAS does not take, qgemm's scaling and the collectives' means. The
// text is built by NVRTC like generated code (cuda_library.h loads it once per context); the
// tests also build it with ptxas and run it on the host (tests/ral/cuda_kernels_test.cc), which
// is why it uses no CUDA feature beyond the launch indices: no shared memory, no barriers, and
// every launch's threads touch disjoint elements.
//
// Kernels (T is the element type the suffix names, its RAL code: i1 i8 ui8 i16 ui16 i32 ui32 i64
// ui64 f16 bf16 f32 f64, f16 and bf16 as their bits; counts are unsigned long long; every kernel
// loops over its range with a grid-sized stride, so any grid and block size is correct):
//
//   kiln_random_uniform_{f32,f64,f16,bf16}(T* out, count, key0, key1, call_site, run, P lo, P hi)
//   kiln_random_normal_{f32,f64,f16,bf16}(T* out, count, key0, key1, call_site, run, P mean, P std)
//       The numbers docs/ral.md specifies, from the Philox4x32-10 stream with key (key0, key1)
//       and block b's counter (b, b >> 32, call_site, run); one thread per block of four words.
//       P is f64 for f64, else f32; f16 and bf16 are the f32 numbers rounded to nearest even.
//       Uniforms are bit-identical to the host's; normals use the device's log, sin and cos.
//
//   kiln_sort_load_T(const T* x, T* keys, unsigned* idx, rows, n, padded)
//       Copies each row of x (length n) into a row of `padded` (a power of two >= n) keys with
//       their positions; padding gets positions n..padded-1, which order after every element.
//   kiln_sort_step_T(T* keys, unsigned* idx, rows, n, padded, k, j, int descending)
//       One compare-exchange stage (k, j) of the bitonic network, for k = 2, 4, .., padded and
//       j = k/2, .., 1. The order: NaNs after every number, ascending or descending, then the
//       lower position first, so the result is the stable sort. f16 and bf16 compare by their
//       values in f32 and move as their bits.
//   kiln_sort_store_T(const T* keys, const unsigned* idx, T* values, int* indices, rows,
//                     padded, count)
//       Writes the first `count` of each sorted row to values and/or indices (either may be null).
//
//   kiln_gemm_i8(const signed char* a, const signed char* b, int* c, batch, m, n, k,
//                int transpose_a, int transpose_b, float alpha, float beta)
//       gemm of i8 operands into i32, `batch` row-major products one after another (gemm_shape.h),
//       as the reference computes it: i64 sums, alpha * sum + beta * c in f64 (c unread when
//       beta = 0), rounded to nearest even and saturated to i32. One thread per element of c.
//   kiln_qgemm_scale(const int* sums, const float* scale_a, const float* scale_b, float* c, m, n)
//       c[i, j] = f32(sums[i, j]) * scale_a[i] * scale_b[j], in f32 and in that order.
//   kiln_divide_{f32,f64}(T* y, count, T divisor)
//       y[i] = y[i] / divisor: a collective's mean, from the sum NCCL made.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::ral::library {

std::string_view cuda_library_source();

// The (k, j) of every kiln_sort_step launch, in order, for rows padded to `padded` (a power of
// two): the whole bitonic network.
std::vector<std::pair<uint64_t, uint64_t>> bitonic_stages(uint64_t padded);

}  // namespace kiln::ral::library
