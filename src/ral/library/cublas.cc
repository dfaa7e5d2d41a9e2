#include "ral/library/cublas.h"

#include <algorithm>

#include "kiln/base/shared_library.h"

namespace kiln::ral::library {

const Cublas& cublas() {
  static const Cublas loaded = [] {
    Cublas out;
    std::string left_out;
    Result<void*> handle = load_shared_library(cuda::library_names_for_driver(
        cuda::driver_or_none(), {{13, "libcublas.so.13"}, {12, "libcublas.so.12"}, {11, "libcublas.so.11"}}, "libcublas.so", &left_out));
    if (!handle.ok()) {
      out.status = unavailable_error("cuBLAS was not found (" + handle.status().message() + ")" +
                                     (left_out.empty() ? "" : "; left out as newer than the driver: " + left_out) +
                                     "; install the CUDA toolkit's cuBLAS");
      return out;
    }
    SymbolBinder binder(*handle);
#define KILN_BIND(member, symbol) binder.bind(out.member, #symbol);
    KILN_CUBLAS_FUNCTIONS(KILN_BIND)
#undef KILN_BIND
    if (!binder.missing().empty()) {
      out.status = unavailable_error("cuBLAS lacks " + binder.missing());
      return out;
    }
    int major = 0, minor = 0, patch = 0;
    out.GetProperty(kMajorVersion, &major);
    out.GetProperty(kMinorVersion, &minor);
    out.GetProperty(kPatchLevel, &patch);
    out.major = major;
    out.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    if (Result<int> driver = cuda::driver_version(); driver.ok() && major > *driver / 1000) {
      out.status = unavailable_error("cuBLAS " + out.version + " is newer than the CUDA driver (CUDA " +
                                     cuda::cuda_version_text(*driver) + ") and cannot start on it");
    }
    return out;
  }();
  return loaded;
}

std::string cublas_status_name(cublasStatus_t status) {
  const char* name = "cuBLAS status";
  switch (status) {
    case 0: name = "CUBLAS_STATUS_SUCCESS"; break;
    case 1: name = "CUBLAS_STATUS_NOT_INITIALIZED"; break;
    case 3: name = "CUBLAS_STATUS_ALLOC_FAILED"; break;
    case 7: name = "CUBLAS_STATUS_INVALID_VALUE"; break;
    case 8: name = "CUBLAS_STATUS_ARCH_MISMATCH"; break;
    case 11: name = "CUBLAS_STATUS_MAPPING_ERROR"; break;
    case 13: name = "CUBLAS_STATUS_EXECUTION_FAILED"; break;
    case 14: name = "CUBLAS_STATUS_INTERNAL_ERROR"; break;
    case 15: name = "CUBLAS_STATUS_NOT_SUPPORTED"; break;
    case 16: name = "CUBLAS_STATUS_LICENSE_ERROR"; break;
  }
  return std::string(name) + " (" + std::to_string(status) + ")";
}

ColumnMajorGemm column_major_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                                  int64_t ldb) {
  ColumnMajorGemm g;
  g.transpose_first = transpose_b ? kCublasOpT : kCublasOpN;
  g.transpose_second = transpose_a ? kCublasOpT : kCublasOpN;
  g.m = static_cast<int>(n);
  g.n = static_cast<int>(m);
  g.k = static_cast<int>(k);
  g.ld_first = static_cast<int>(std::max<int64_t>(ldb, 1));
  g.ld_second = static_cast<int>(std::max<int64_t>(lda, 1));
  g.ldc = static_cast<int>(std::max<int64_t>(n, 1));
  return g;
}

}  // namespace kiln::ral::library
