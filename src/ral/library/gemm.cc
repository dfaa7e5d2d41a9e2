// gemm: c = alpha * op(a) @ op(b) + beta * c. The cpu device calls OpenBLAS's cblas (the
// library a user would otherwise call, loaded when the first gemm runs: openblas.h); opencl calls CLBlast on the device (ral/library/
// clblast.h) and cuda cuBLAS (cuda_library.h), or OpenBLAS over mapped buffers; interp has a
// plain triple loop, the reference.
#include <algorithm>
#include <array>
#include <mutex>

#include "kiln/base/log.h"
#include "kiln/hal/buffer.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/clblast.h"
#include "ral/library/cuda_library.h"
#include "ral/library/library.h"
#include "ral/library/openblas.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

template <typename T>
Status gemm_blas(ExecutionContext*, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                 int64_t transpose_b, T alpha, T beta) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  return openblas_gemm<T>(transpose_a != 0, transpose_b != 0, s.m, s.n, s.k, alpha, a.data,
                          std::max<int64_t>(a.sizes[1], 1), b.data, std::max<int64_t>(b.sizes[1], 1), beta, c.data,
                          s.n);
}

// OpenBLAS over mapped buffers: gemm on a device whose memory the host maps, where the device's
// own library does not run it. Each memref's data is the tensor's hal::Buffer.
template <typename T>
Status gemm_mapped(ExecutionContext* context, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                   int64_t transpose_b, T alpha, T beta) {
  std::array<hal::Mapping, 3> mapped;
  T** data[3] = {&a.data, &b.data, &c.data};
  for (size_t i = 0; i < 3; ++i) {
    Result<hal::Mapping> m = reinterpret_cast<hal::Buffer*>(*data[i])->map(i == 2 ? hal::MapAccess::kReadWrite
                                                                                  : hal::MapAccess::kRead);
    if (!m.ok()) return m.status().annotate("gemm: mapping its tensors");
    mapped[i] = std::move(*m);
    *data[i] = static_cast<T*>(mapped[i].data());
  }
  return gemm_blas<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta);
}

// The opencl and cuda devices' gemm, which work on device memory (Memory::kDevice): `library`
// (CLBlast or cuBLAS, given the shape and a's and b's row lengths) runs it on the device where
// `place` says so, else gemm_mapped does (on a CPU device, without the library, or when
// KILN_OPENCL_GEMM / KILN_CUDA_GEMM asks for the host). k = 0 (c = beta * c) is always left to
// the host: CLBlast refuses a zero dimension.
template <typename T, typename Place, typename Library>
Status gemm_on_device(ExecutionContext* context, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                      int64_t transpose_b, T alpha, T beta, Place&& place, Library&& library) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  KILN_ASSIGN_OR_RETURN(GemmPlace where, place(buffer_of(c)));
  if (where == GemmPlace::kHost || s.k == 0) return gemm_mapped<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta);
  Status done = library(s, std::max<int64_t>(a.sizes[1], 1), std::max<int64_t>(b.sizes[1], 1));
  if (where == GemmPlace::kLibraryElseHost && done.code() == StatusCode::kUnavailable) {
    static std::once_flag warned;
    std::call_once(warned, [&] { KILN_LOG(kWarn, "gemm runs on the host: " + done.message()); });
    return gemm_mapped<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta);
  }
  return done;
}

template <typename T>
Status gemm_opencl(ExecutionContext* context, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                   int64_t transpose_b, T alpha, T beta) {
  return gemm_on_device<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta, opencl_gemm,
                           [&](const GemmShape& s, int64_t lda, int64_t ldb) {
                             return clblast_gemm<T>(buffer_of(a), buffer_of(b), buffer_of(c), transpose_a != 0,
                                                    transpose_b != 0, static_cast<size_t>(s.m),
                                                    static_cast<size_t>(s.n), static_cast<size_t>(s.k),
                                                    static_cast<size_t>(lda), static_cast<size_t>(ldb), alpha, beta);
                           });
}

template <typename T>
Status gemm_cuda(ExecutionContext* context, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                 int64_t transpose_b, T alpha, T beta) {
  return gemm_on_device<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta, cuda_gemm,
                           [&](const GemmShape& s, int64_t lda, int64_t ldb) {
                             return cublas_gemm<T>(context, buffer_of(a), buffer_of(b), buffer_of(c),
                                                   transpose_a != 0, transpose_b != 0, s.m, s.n, s.k, lda, ldb, alpha,
                                                   beta);
                           });
}

template <typename T>
Status gemm_reference(ExecutionContext*, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                      int64_t transpose_b, T alpha, T beta) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b));
  auto at = [&](int64_t i, int64_t p) { return transpose_a ? a.data[p * a.sizes[1] + i] : a.data[i * a.sizes[1] + p]; };
  auto bt = [&](int64_t p, int64_t j) { return transpose_b ? b.data[j * b.sizes[1] + p] : b.data[p * b.sizes[1] + j]; };
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      T sum = 0;
      for (int64_t p = 0; p < s.k; ++p) sum += at(i, p) * bt(p, j);
      T& out = c.data[i * s.n + j];
      // beta = 0 ignores c (it may hold NaNs), as BLAS does.
      out = beta == 0 ? alpha * sum : alpha * sum + beta * out;
    }
  }
  return Status();
}

}  // namespace

Status register_gemm(Registry& registry) {
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cpu", &gemm_blas<float>>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cpu", &gemm_blas<double>>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "opencl", &gemm_opencl<float>, Memory::kDevice>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "opencl", &gemm_opencl<double>, Memory::kDevice>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cuda", &gemm_cuda<float>, Memory::kDevice>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cuda", &gemm_cuda<double>, Memory::kDevice>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "interp", &gemm_reference<float>>()));
  return registry.add(make_function<"gemm", "interp", &gemm_reference<double>>());
}

}  // namespace kiln::ral::library
