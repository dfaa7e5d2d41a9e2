// oneDNN (Debian's libdnnl2), loaded with dlopen when the first product that needs it runs,
// like OpenBLAS (openblas.h): its bf16 x bf16 -> f32 and i8 x i8 -> i32 products use the CPU's
// AVX-512 BF16, VNNI and AMX instructions where it has them, which OpenBLAS 0.3.21 as Debian
// builds it does not (it has no sbgemm). Those bf16 instructions treat subnormal operands as
// zero and flush subnormal bf16 results to zero, where kiln's generated loops keep them. Its f32
// sgemm runs conv2d's products (conv.cc), where it measured faster than OpenBLAS's.
#pragma once

#include <cstdint>

#include "kiln/base/status.h"

namespace kiln::ral::library {

// c = alpha * op(a) @ op(b) + beta * c, row-major, on the host: bf16 operands (their bits), f32
// c. m, n > 0; lda, ldb and ldc are the stored row lengths. UNAVAILABLE, saying how to install
// it, when oneDNN cannot be loaded; INTERNAL with oneDNN's status when it refuses the call.
Status onednn_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                        int64_t ldc);

// Whether oneDNN's bf16 products run on AMX on this CPU (false where it cannot be loaded). Without
// AMX they run on AVX-512 BF16's vdpbf16ps, which on the Sapphire Rapids measured issues half
// the arithmetic of f32 FMAs a cycle (85 against 175 GFLOPS a core): the caller then does better
// to widen the operands of large products to f32.
bool onednn_bf16_on_amx();

// c = op(a) @ op(b) with bf16 operands and a bf16 c (their bits), the f32 sums rounded to
// nearest even once. UNIMPLEMENTED where oneDNN has no matmul primitive for it (a library of
// another major version than 2, k = 0): then the caller computes in f32 and rounds.
Status onednn_gemm_bf16_to_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, uint16_t* c,
                                int64_t ldc);

// The same with i8 operands and an i32 c: c = alpha * op(a) @ op(b) + beta * c, where alpha and
// beta are applied in f32 and the result is rounded to the nearest i32 and saturated (oneDNN's
// rule; with alpha 1 and beta 0 or 1 the sum is exact while it fits in i32).
Status onednn_gemm_s8(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float beta, int32_t* c,
                      int64_t ldc);

// c = op(a) @ op(b) for `batch` products of f32 matrices one after another in each of a, b and c
// (row-major, rows of lda, ldb and ldc; each product's matrices follow the last's, m · k, k · n
// and m · n elements on), through oneDNN's matmul primitive, its batch spread over its threads.
// UNIMPLEMENTED where it has none (a library of another major version than 2, k = 0);
// UNAVAILABLE when oneDNN cannot be loaded.
Status onednn_matmul_f32(int64_t batch, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

// c = alpha * op(a) @ op(b) + beta * c of f32 matrices through oneDNN's sgemm (its AVX-512 code),
// row-major; UNAVAILABLE when oneDNN cannot be loaded.
Status onednn_sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace kiln::ral::library
