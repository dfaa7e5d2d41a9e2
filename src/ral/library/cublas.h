// cuBLAS, loaded at run time like the CUDA driver (libcublas.so.13, .12, .11, then
// libcublas.so, none newer than the driver's CUDA): the gemm of the cuda device. Declared here, so that kiln builds without the
// toolkit's headers (tests/drivers/cuda_api_abi_test.cc checks these against cublas_api.h where
// it is installed).
#pragma once

#include <cstdint>
#include <string>

#include "drivers/cuda/cu_api.h"
#include "kiln/base/status.h"

// cuBLAS's own opaque handle type, at global scope as in cublas_api.h.
struct cublasContext;

namespace kiln::ral::library {

using cublasHandle_t = ::cublasContext*;
using cublasStatus_t = int;
inline constexpr int kCublasOpN = 0, kCublasOpT = 1;  // cublasOperation_t

template <typename T>
using CublasGemmFn = cublasStatus_t (*)(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                                        const T* alpha, const T* a, int lda, const T* b, int ldb, const T* beta,
                                        T* c, int ldc);

// cublasGemmEx: c = alpha * op(a) @ op(b) + beta * c with each matrix's element type given
// (cudaDataType_t), the arithmetic by compute_type (cublasComputeType_t) and the algorithm by
// algo (cublasGemmAlgo_t); alpha and beta point to values of the compute type.
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                                          const void* alpha, const void* a, int a_type, int lda, const void* b,
                                          int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                                          int compute_type, int algo);

struct Cublas {
  cublasStatus_t (*Create)(cublasHandle_t* handle) = nullptr;
  cublasStatus_t (*Destroy)(cublasHandle_t handle) = nullptr;
  cublasStatus_t (*SetStream)(cublasHandle_t handle, cuda::CUstream stream) = nullptr;
  CublasGemmFn<float> Sgemm = nullptr;
  CublasGemmFn<double> Dgemm = nullptr;
  CublasGemmExFn GemmEx = nullptr;
  cublasStatus_t (*GetProperty)(int type, int* value) = nullptr;  // libraryPropertyType
  Status status;  // UNAVAILABLE saying why when the library or a symbol is missing, or too new
  std::string version;  // "13.1.0" once loaded
  int major = 0;        // 13 once loaded
};

inline constexpr int kMajorVersion = 0, kMinorVersion = 1, kPatchLevel = 2;  // libraryPropertyType

// The values of cublasGemmEx's enums that kiln passes, as the toolkit's headers define them
// (library_types.h's cudaDataType_t; cublas_api.h's cublasComputeType_t and cublasGemmAlgo_t).
// They have kept these values since cuBLAS 11 brought cublasComputeType_t, which is why narrow
// products ask for cuBLAS 11 or newer (kGemmExMajor).
inline constexpr int kCudaR32F = 0, kCudaR16F = 2, kCudaR8I = 3, kCudaR32I = 10, kCudaR16BF = 14;
inline constexpr int kCublasCompute32F = 68, kCublasCompute32I = 72;
inline constexpr int kCublasGemmDefault = -1;
inline constexpr int kGemmExMajor = 11;

// Every Cublas function member with the symbol it is bound to, X(member, symbol). cublasGemmEx
// comes apart (KILN_CUBLAS_FUNCTIONS has both): cublas_api.h overloads it in C++ with an inline
// wrapper of the older form, so a test takes its address only at a given type.
#define KILN_CUBLAS_UNIQUE_FUNCTIONS(X) \
  X(Create, cublasCreate_v2)            \
  X(Destroy, cublasDestroy_v2)          \
  X(SetStream, cublasSetStream_v2)      \
  X(Sgemm, cublasSgemm_v2)              \
  X(Dgemm, cublasDgemm_v2)              \
  X(GetProperty, cublasGetProperty)
#define KILN_CUBLAS_FUNCTIONS(X) KILN_CUBLAS_UNIQUE_FUNCTIONS(X) X(GemmEx, cublasGemmEx)

// Loaded on first use, once per process, and never unloaded.
const Cublas& cublas();

// "CUBLAS_STATUS_EXECUTION_FAILED (13)".
std::string cublas_status_name(cublasStatus_t status);

// A row-major gemm, c (m x n, row length n) = op(a) @ op(b), as the column-major call cuBLAS
// takes: c's column-major view is cᵀ = op(b)ᵀ @ op(a)ᵀ, so b is the first operand and a the
// second. lda and ldb are the row lengths of a and b as stored; every leading dimension is at
// least 1, as BLAS requires even of an empty matrix.
struct ColumnMajorGemm {
  int transpose_first = kCublasOpN, transpose_second = kCublasOpN;  // b's, then a's
  int m = 0, n = 0, k = 0;
  int ld_first = 1, ld_second = 1, ldc = 1;
};
ColumnMajorGemm column_major_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                                  int64_t ldb);

}  // namespace kiln::ral::library
