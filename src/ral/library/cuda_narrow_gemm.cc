#include "ral/library/cuda_narrow_gemm.h"

#include <mutex>
#include <string>

#include "kiln/base/log.h"
#include "ral/library/cuda_library.h"

namespace kiln::ral::library {

namespace {

using cuda::CUdeviceptr;

constexpr cublasStatus_t kCublasSuccess = 0, kCublasArchMismatch = 8, kCublasNotSupported = 15;

// Whether cuBLAS turned the call down (these types, or this shape, on this device and version)
// rather than failing while running it.
bool turned_down(cublasStatus_t status) { return status == kCublasNotSupported || status == kCublasArchMismatch; }

std::string gemm_ex_failure(cublasStatus_t status, const GemmExTypes& t) {
  return "cublasGemmEx (cudaDataType " + std::to_string(t.operands) + " operands into " + std::to_string(t.result) +
         ", compute type " + std::to_string(t.compute) + ") failed: " + cublas_status_name(status);
}

// The context's cuBLAS handle for cublasGemmEx calls: UNAVAILABLE where cuBLAS cannot start, or
// predates the compute types kiln passes.
Result<cublasHandle_t> gemm_ex_handle(CudaLibrary& library) {
  const Cublas& lib = cublas();
  KILN_RETURN_IF_ERROR(lib.status);
  if (lib.major < kGemmExMajor) {
    return unavailable_error("cuBLAS " + lib.version + " predates cublasGemmEx's compute types (cuBLAS " +
                             std::to_string(kGemmExMajor) + ")");
  }
  return library.blas();
}

// Product p of `s` through cublasGemmEx; alpha and beta point to values of the compute type, and
// the operands' and result's elements are `operand_size` and `result_size` bytes.
cublasStatus_t gemm_ex_product(cublasHandle_t handle, const GemmShape& s, const GemmExTypes& t, size_t operand_size,
                               size_t result_size, int64_t p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                               const void* alpha, const void* beta) {
  const ColumnMajorGemm g = column_major_gemm(s.transpose_a, s.transpose_b, s.m, s.n, s.k, s.lda(), s.ldb());
  const auto at = [](CUdeviceptr base, int64_t elements, size_t size) {
    return reinterpret_cast<void*>(base + static_cast<uint64_t>(elements) * size);
  };
  // b is cuBLAS's first operand and a its second (column_major_gemm).
  return cublas().GemmEx(handle, g.transpose_first, g.transpose_second, g.m, g.n, g.k, alpha,
                         at(b, p * s.stride_b(), operand_size), t.operands, g.ld_first,
                         at(a, p * s.stride_a(), operand_size), t.operands, g.ld_second, beta,
                         at(c, p * s.stride_c(), result_size), t.result, g.ldc, t.compute, kCublasGemmDefault);
}

// The i8 products of `s` into c (i32), inside the library's run: cublasGemmEx where
// i8_product_fits_cublas, else kiln_gemm_i8, which also runs them where cuBLAS turns the first
// product down (said once).
Status i8_products(CudaLibrary& library, const GemmShape& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, float alpha,
                   float beta) {
  if (i8_product_fits_cublas(s, alpha, beta, a, b)) {
    KILN_ASSIGN_OR_RETURN(cublasHandle_t handle, gemm_ex_handle(library));
    constexpr GemmExTypes t = gemm_ex_types<int8_t, int32_t>();
    const int32_t one = 1, zero = 0;
    int64_t p = 0;
    for (; p < s.batch; ++p) {
      const cublasStatus_t done = gemm_ex_product(handle, s, t, 1, sizeof(int32_t), p, a, b, c, &one, &zero);
      if (done == kCublasSuccess) continue;
      if (p != 0 || !turned_down(done)) return internal_error(gemm_ex_failure(done, t));
      static std::once_flag warned;
      std::call_once(warned, [&] {
        KILN_LOG(kWarn, "i8 gemm runs as kiln's kernel: cuBLAS " + cublas().version + " turned it down: " +
                            cublas_status_name(done));
      });
      break;
    }
    if (p == s.batch) return Status();
  }
  const uint64_t batch = static_cast<uint64_t>(s.batch), m = static_cast<uint64_t>(s.m),
                 n = static_cast<uint64_t>(s.n), k = static_cast<uint64_t>(s.k);
  const int transpose_a = s.transpose_a ? 1 : 0, transpose_b = s.transpose_b ? 1 : 0;
  return library.launch("kiln_gemm_i8", batch * m * n,
                        {&a, &b, &c, &batch, &m, &n, &k, &transpose_a, &transpose_b, &alpha, &beta});
}

}  // namespace

bool i8_product_fits_cublas(const GemmShape& s, float alpha, float beta, uint64_t a_address, uint64_t b_address) {
  return alpha == 1.0f && beta == 0.0f && s.k < (int64_t{1} << 17) && s.lda() % 4 == 0 && s.ldb() % 4 == 0 &&
         a_address % 4 == 0 && b_address % 4 == 0;
}

template <typename TA, typename TC>
Status cuda_narrow_gemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c,
                        const GemmShape& s, float alpha, float beta) {
  KILN_ASSIGN_OR_RETURN(const GemmOperands on, gemm_operands(execution, a, b, c, "gemm"));
  return on.library->run(*execution, "gemm on cuda", [&]() -> Status {
    if constexpr (std::is_same_v<TA, int8_t>) {
      return i8_products(*on.library, s, on.a, on.b, on.c, alpha, beta);
    } else {
      KILN_ASSIGN_OR_RETURN(cublasHandle_t handle, gemm_ex_handle(*on.library));
      constexpr GemmExTypes t = gemm_ex_types<TA, TC>();
      for (int64_t p = 0; p < s.batch; ++p) {
        const cublasStatus_t done =
            gemm_ex_product(handle, s, t, sizeof(TA), sizeof(TC), p, on.a, on.b, on.c, &alpha, &beta);
        if (done == kCublasSuccess) continue;
        // Turned down before any product ran, c is as it was: the host can run the call instead.
        if (p == 0 && turned_down(done)) return unavailable_error(gemm_ex_failure(done, t));
        return internal_error(gemm_ex_failure(done, t));
      }
      return Status();
    }
  });
}

template Status cuda_narrow_gemm<BFloat16, float>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&,
                                                  const hal::Buffer&, const GemmShape&, float, float);
template Status cuda_narrow_gemm<BFloat16, BFloat16>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&,
                                                     const hal::Buffer&, const GemmShape&, float, float);
template Status cuda_narrow_gemm<Half, float>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&,
                                              const hal::Buffer&, const GemmShape&, float, float);
template Status cuda_narrow_gemm<Half, Half>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&,
                                             const hal::Buffer&, const GemmShape&, float, float);
template Status cuda_narrow_gemm<int8_t, int32_t>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&,
                                                  const hal::Buffer&, const GemmShape&, float, float);

Status cuda_qgemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& scale_a,
                  const hal::Buffer& scale_b, const hal::Buffer& c, const GemmShape& s) {
  KILN_ASSIGN_OR_RETURN(GemmOperands on, gemm_operands(execution, a, b, c, "qgemm"));
  KILN_ASSIGN_OR_RETURN(CUdeviceptr scale_a_ptr, device_pointer(scale_a, "qgemm", "scale_a"));
  KILN_ASSIGN_OR_RETURN(CUdeviceptr scale_b_ptr, device_pointer(scale_b, "qgemm", "scale_b"));
  const uint64_t m = static_cast<uint64_t>(s.m), n = static_cast<uint64_t>(s.n);
  return on.library->run(*execution, "qgemm on cuda", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(CUdeviceptr sums, on.library->scratch(0, m * n * sizeof(int32_t)));
    KILN_RETURN_IF_ERROR(i8_products(*on.library, s, on.a, on.b, sums, 1.0f, 0.0f));
    return on.library->launch("kiln_qgemm_scale", m * n, {&sums, &scale_a_ptr, &scale_b_ptr, &on.c, &m, &n});
  });
}

}  // namespace kiln::ral::library
