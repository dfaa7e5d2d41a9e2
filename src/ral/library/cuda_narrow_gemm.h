// gemm of narrow operands and qgemm on the cuda device's own memory (gemm_narrow.cc registers
// them, and runs them over mapped buffers instead where cuda_gemm says so): bf16 and f16
// operands through cuBLAS's cublasGemmEx with f32 sums (CUBLAS_COMPUTE_32F, f32 alpha and beta)
// into an f32 c or one of their type, rounded once where it is stored, as on the cpu device; i8
// operands into i32 through cublasGemmEx with i32 sums (CUBLAS_COMPUTE_32I) where cuBLAS computes
// what the reference does (i8_product_fits_cublas), else through kiln's kernel kiln_gemm_i8
// (cuda_kernels.h); qgemm as the i8 product's i32 sums into scratch memory, then
// kiln_qgemm_scale. Each call returns when its device work has finished, as CudaLibrary's do.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/cublas.h"
#include "ral/library/gemm_shape.h"

namespace kiln::ral::library {

// The types of one cublasGemmEx call (cublas.h's values): a's and b's, c's, and the arithmetic.
struct GemmExTypes {
  int operands = 0, result = 0, compute = 0;
};

// For operands of TA into a c of TC (bf16 or f16 into f32 or their own type; i8 into i32).
template <typename TA, typename TC>
constexpr GemmExTypes gemm_ex_types() {
  constexpr int operands = std::is_same_v<TA, BFloat16> ? kCudaR16BF : std::is_same_v<TA, Half> ? kCudaR16F : kCudaR8I;
  if constexpr (std::is_same_v<TA, int8_t>) {
    static_assert(std::is_same_v<TC, int32_t>, "i8 operands make an i32 c");
    return {operands, kCudaR32I, kCublasCompute32I};
  } else {
    static_assert(std::is_same_v<TC, float> || std::is_same_v<TC, TA>, "a c of f32 or of the operands' type");
    return {operands, std::is_same_v<TC, float> ? kCudaR32F : operands, kCublasCompute32F};
  }
}

// Whether cuBLAS computes the i8 products of `s` as the reference does, so that they can run
// through cublasGemmEx rather than kiln_gemm_i8: alpha = 1 and beta = 0 (cuBLAS's i32 alpha and
// beta cannot carry other f32 values, and its i32 arithmetic wraps where the reference
// saturates); k below 2^17, so that no sum of k products of i8 (each at most 2^14 in magnitude)
// leaves i32; and what cuBLAS asks of i8 operands: the row lengths of a and b (its leading
// dimensions) multiples of 4 and their device addresses multiples of 4 bytes. m, n and k already
// fit in an int (gemm_shape).
bool i8_product_fits_cublas(const GemmShape& s, float alpha, float beta, uint64_t a_address, uint64_t b_address);

// c = alpha * op(a) @ op(b) + beta * c for each of the s.batch products (row-major) on the
// buffers' device. TA, TC: BFloat16 or Half into float or TA; int8_t into int32_t. UNAVAILABLE
// when cuBLAS is needed and cannot start (or predates cuBLAS 11), or refuses these types on this
// device before any product has run, so that the caller can run the call on the host instead.
template <typename TA, typename TC>
Status cuda_narrow_gemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c,
                        const GemmShape& s, float alpha, float beta);

// qgemm: c (m x n, f32) = f32(op(a) @ op(b)) * scale_a[row] * scale_b[column], the i8 product's
// sums in i32 as cuda_narrow_gemm<int8_t, int32_t> computes them. UNAVAILABLE as there.
Status cuda_qgemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& scale_a,
                  const hal::Buffer& scale_b, const hal::Buffer& c, const GemmShape& s);

}  // namespace kiln::ral::library
