// kiln's cuBLAS declarations (ral/library/cublas.h) against the toolkit's cublas_api.h: every
// function kiln binds has the header's signature, and the constants and status codes kiln names
// have the header's values. static_asserts, compiled only where CMake found the toolkit
// (KILN_HAVE_CUDA_H); elsewhere the test reports itself skipped. The row-major to column-major
// mapping is checked against OpenBLAS's column-major gemm, which takes cuBLAS's arguments
// (loaded with dlopen, as kiln loads it, so that this test binary does not start OpenBLAS's
// threads when it starts: OpenBlasTest counts them).
#include <gtest/gtest.h>

#include <vector>

#include "kiln/base/shared_library.h"

#include "common/abi_same.h"
#include "ral/library/cublas.h"
#include "ral/library/cuda_narrow_gemm.h"

#if KILN_HAVE_CUDA_H
#include <cublas_api.h>

namespace {
#define KILN_CHECK_FUNCTION(member, symbol)                                                                  \
  static_assert(kiln::test::AbiSame<decltype(kiln::ral::library::Cublas::member), decltype(&::symbol)>::value, \
                "Cublas::" #member " does not match cublas_api.h's " #symbol);
KILN_CUBLAS_UNIQUE_FUNCTIONS(KILN_CHECK_FUNCTION)
#undef KILN_CHECK_FUNCTION
// cublasGemmEx at the C signature: the header's C++ overload (an older compute type) has another
// type, so this cast compiles only if the C function has exactly this one (unevaluated, so that
// the test does not link cuBLAS).
using HeaderGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(std::is_same_v<decltype(static_cast<HeaderGemmEx>(&::cublasGemmEx)), HeaderGemmEx>);
static_assert(kiln::test::AbiSame<decltype(kiln::ral::library::Cublas::GemmEx), HeaderGemmEx>::value,
              "Cublas::GemmEx does not match cublas_api.h's cublasGemmEx");
static_assert(kiln::ral::library::kCublasOpN == CUBLAS_OP_N);
static_assert(kiln::ral::library::kCublasOpT == CUBLAS_OP_T);
static_assert(kiln::ral::library::kCudaR32F == CUDA_R_32F && kiln::ral::library::kCudaR16F == CUDA_R_16F &&
              kiln::ral::library::kCudaR16BF == CUDA_R_16BF && kiln::ral::library::kCudaR8I == CUDA_R_8I &&
              kiln::ral::library::kCudaR32I == CUDA_R_32I);
static_assert(kiln::ral::library::kCublasCompute32F == CUBLAS_COMPUTE_32F &&
              kiln::ral::library::kCublasCompute32I == CUBLAS_COMPUTE_32I);
static_assert(kiln::ral::library::kCublasGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(std::is_same_v<kiln::ral::library::cublasHandle_t, ::cublasHandle_t>);

// The types each narrow product passes to cublasGemmEx.
template <typename TA, typename TC>
constexpr bool gemm_ex_types_are(cudaDataType operands, cudaDataType result, cublasComputeType_t compute) {
  constexpr kiln::ral::library::GemmExTypes t = kiln::ral::library::gemm_ex_types<TA, TC>();
  return t.operands == operands && t.result == result && t.compute == compute;
}
static_assert(gemm_ex_types_are<kiln::ral::BFloat16, float>(CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F));
static_assert(gemm_ex_types_are<kiln::ral::BFloat16, kiln::ral::BFloat16>(CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F));
static_assert(gemm_ex_types_are<kiln::ral::Half, float>(CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F));
static_assert(gemm_ex_types_are<kiln::ral::Half, kiln::ral::Half>(CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F));
static_assert(gemm_ex_types_are<int8_t, int32_t>(CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I));
}  // namespace
#endif

namespace kiln::ral::library {
namespace {

TEST(CublasTest, DeclarationsMatchCublasApiH) {
#if KILN_HAVE_CUDA_H
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_EXECUTION_FAILED), "CUBLAS_STATUS_EXECUTION_FAILED (13)");
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED (1)");
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE (7)");
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_ARCH_MISMATCH), "CUBLAS_STATUS_ARCH_MISMATCH (8)");
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_INTERNAL_ERROR), "CUBLAS_STATUS_INTERNAL_ERROR (14)");
  EXPECT_EQ(cublas_status_name(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED (15)");
#else
  GTEST_SKIP() << "CMake did not find the CUDA toolkit's headers when configuring, so kiln's cuBLAS "
                  "declarations are not checked against cublas_api.h";
#endif
}

// Loading binds every symbol, or says why not; it needs no GPU.
TEST(CublasTest, LoadsOrSaysWhy) {
  const Cublas& lib = cublas();
  if (!lib.status.ok()) {
    EXPECT_EQ(lib.status.code(), StatusCode::kUnavailable);
    EXPECT_NE(lib.status.message().find("cuBLAS"), std::string::npos) << lib.status;
    GTEST_SKIP() << lib.status;
  }
#define KILN_CHECK_BOUND(member, symbol) EXPECT_NE(lib.member, nullptr) << #symbol;
  KILN_CUBLAS_FUNCTIONS(KILN_CHECK_BOUND)
#undef KILN_CHECK_BOUND
}

// column_major_gemm's arguments, given to a column-major BLAS (OpenBLAS here, cuBLAS on the
// device), compute the row-major product, for every transpose and a non-square shape.
TEST(CublasTest, ColumnMajorArgumentsGiveTheRowMajorProduct) {
  // cblas.h's cblas_sgemm and the values it names.
  constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112;
  void (*cblas_sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                      int) = nullptr;
  Result<void*> openblas = load_shared_library({"libopenblas.so.0", "libopenblas.so"});
  if (!openblas.ok()) GTEST_SKIP() << "no OpenBLAS: " << openblas.status();
  SymbolBinder binder(*openblas);
  binder.bind(cblas_sgemm, "cblas_sgemm");
  ASSERT_TRUE(binder.missing().empty()) << binder.missing();
  const int64_t m = 3, n = 5, k = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // a is m x k (k x m stored when transposed), b k x n (n x k); small integers, so exact.
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      std::vector<float> a(static_cast<size_t>(a_rows * a_cols)), b(static_cast<size_t>(b_rows * b_cols));
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 11) - 5;
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 9) - 4;
      std::vector<float> c(static_cast<size_t>(m * n), 2), expected = c;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          float sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += (ta ? a[p * a_cols + i] : a[i * a_cols + p]) * (tb ? b[j * b_cols + p] : b[p * b_cols + j]);
          }
          expected[i * n + j] = 2 * sum + 3 * expected[i * n + j];
        }
      }
      const ColumnMajorGemm g = column_major_gemm(ta, tb, m, n, k, a_cols, b_cols);
      cblas_sgemm(kColMajor, g.transpose_first == kCublasOpT ? kTrans : kNoTrans,
                  g.transpose_second == kCublasOpT ? kTrans : kNoTrans, g.m, g.n, g.k, 2, b.data(),
                  g.ld_first, a.data(), g.ld_second, 3, c.data(), g.ldc);
      EXPECT_EQ(c, expected) << "transpose_a " << ta << ", transpose_b " << tb;
    }
  }
}

// Which i8 products go to cublasGemmEx: only those it computes as the reference does (alpha 1,
// beta 0, k below 2^17) and that meet its demands on i8 operands (row lengths and addresses in
// multiples of 4); kiln_gemm_i8 takes the rest.
TEST(CublasTest, I8ProductsGoToCublasOnlyWhereItComputesTheReference) {
  GemmShape s;
  s.m = 5;
  s.n = 8;
  s.k = 12;
  EXPECT_TRUE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  EXPECT_TRUE(i8_product_fits_cublas(s, 1, -0.0f, 256, 1024));
  EXPECT_FALSE(i8_product_fits_cublas(s, 2, 0, 256, 1024));      // cuBLAS's i32 alpha
  EXPECT_FALSE(i8_product_fits_cublas(s, 0.5f, 0, 256, 1024));
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 1, 256, 1024));      // i32 c + sum would wrap, not saturate
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 0, 258, 1024));      // a at an odd offset
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 0, 256, 1025));
  s.transpose_a = true;  // a's rows are m = 5 long
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  s.m = 12;
  EXPECT_TRUE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  s.n = 6;  // b's rows are n = 6 long
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  s.transpose_b = true;  // now k = 12
  EXPECT_TRUE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  // 131071 products of -128 * -128 is 2^31 - 2^14, the largest sum that stays in i32.
  s.k = 131068;
  EXPECT_TRUE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
  s.k = 131072;
  EXPECT_FALSE(i8_product_fits_cublas(s, 1, 0, 256, 1024));
}

}  // namespace
}  // namespace kiln::ral::library
