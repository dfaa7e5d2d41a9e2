// Products too small to pay for OpenBLAS: c = alpha * op(a) @ op(b) + beta * c on the calling
// thread in kiln's own vector loops (AVX2 and FMA where the processor has them, chosen at run
// time). OpenBLAS packs both operands before it multiplies and may hand the work to its threads;
// for a row or a few rows against a weight matrix (a dense layer at batch 1) that costs more than
// the product (docs/performance.md). Internal to gemm.cc.
#pragma once

#include <cstdint>

namespace kiln::ral::library {

// The most multiply-adds (m·n·k) and rows (m) of a product that small_gemm runs.
inline constexpr int64_t kSmallGemmWork = int64_t{1} << 18;
inline constexpr int64_t kSmallGemmRows = 8;

// Whether a product of these dimensions runs in small_gemm rather than in OpenBLAS.
inline bool small_gemm_fits(int64_t m, int64_t n, int64_t k) {
  return m <= kSmallGemmRows && n <= kSmallGemmWork && k <= kSmallGemmWork && m * n * k <= kSmallGemmWork;
}

// One product, row-major, with BLAS's rules: lda, ldb and ldc are the stored row lengths; beta = 0
// ignores what c holds (NaNs included) and alpha = 0 reads neither a nor b. T is float or double.
template <typename T>
void small_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace kiln::ral::library
