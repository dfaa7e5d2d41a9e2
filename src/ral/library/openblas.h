// OpenBLAS (Debian's libopenblas0), loaded with dlopen when the first host gemm runs, like
// libOpenCL and CLBlast: a kiln command that runs no gemm never loads it, so its threads and
// buffers cost nothing there and the dynamic loader cannot fail kiln for want of it.
#pragma once

#include <cstddef>
#include <string>

#include "kiln/base/status.h"

namespace kiln::ral::library {

// c = alpha * op(a) @ op(b) + beta * c, row-major, on the host, through OpenBLAS's cblas_?gemm.
// m, n > 0; lda, ldb and ldc are the stored row lengths (≥ 1). UNAVAILABLE, saying which
// library was tried and how to install it, when OpenBLAS cannot be loaded; INVALID_ARGUMENT when a
// dimension does not fit OpenBLAS's 32-bit integers, or KILN_CPU_THREADS is malformed.
// OpenBLAS runs on at most KILN_CPU_THREADS threads when that is set (read at each call, applied
// when it changes), else on OpenBLAS's own default (OPENBLAS_NUM_THREADS, else the cores).
template <typename T>
Status openblas_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                     int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// The number of threads OpenBLAS runs gemm on now; UNAVAILABLE when it cannot be loaded.
Result<int> openblas_threads();
// The name of the kernels OpenBLAS runs ("SkylakeX", "Haswell", ...): its own choice, or on an
// Intel processor kiln's by the processor's features unless OPENBLAS_CORETYPE is set (openblas.cc);
// UNAVAILABLE when it cannot be loaded or does not say.
Result<std::string> openblas_core();

}  // namespace kiln::ral::library
