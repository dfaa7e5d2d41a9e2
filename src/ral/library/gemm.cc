// gemm: c = alpha * op(a) @ op(b) + beta * c. The cpu device calls OpenBLAS's cblas (the
// library a user would otherwise call); opencl calls CLBlast on the device (ral/library/
// clblast.h), or OpenBLAS over mapped buffers; interp has a plain triple loop, the reference.
#include <cblas.h>

#include <array>

#include "kiln/hal/buffer.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/clblast.h"
#include "ral/library/library.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

template <typename T>
Status gemm_blas(ExecutionContext*, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                 int64_t transpose_b, T alpha, T beta) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  const auto ta = transpose_a ? CblasTrans : CblasNoTrans, tb = transpose_b ? CblasTrans : CblasNoTrans;
  const auto m = static_cast<blasint>(s.m), n = static_cast<blasint>(s.n), k = static_cast<blasint>(s.k);
  const auto lda = static_cast<blasint>(a.sizes[1] > 0 ? a.sizes[1] : 1);
  const auto ldb = static_cast<blasint>(b.sizes[1] > 0 ? b.sizes[1] : 1);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.data, lda, b.data, ldb, beta, c.data, n);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.data, lda, b.data, ldb, beta, c.data, n);
  }
  return Status();
}

// The opencl device's gemm, which works on device memory (Memory::kDevice): each memref's data
// is the tensor's hal::Buffer. CLBlast runs it on the device, or OpenBLAS over mapped buffers
// as for the other functions (on a CPU device, without CLBlast, or with KILN_OPENCL_GEMM=host).
template <typename T>
Status gemm_opencl(ExecutionContext* context, MemRef<T, 2> a, MemRef<T, 2> b, MemRef<T, 2> c, int64_t transpose_a,
                   int64_t transpose_b, T alpha, T beta) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  const std::array<hal::Buffer*, 3> buffers = {reinterpret_cast<hal::Buffer*>(a.data),
                                               reinterpret_cast<hal::Buffer*>(b.data),
                                               reinterpret_cast<hal::Buffer*>(c.data)};
  KILN_ASSIGN_OR_RETURN(OpenClGemm where, opencl_gemm(*buffers[2]));
  // k = 0 (c = beta * c) is left to the host: CLBlast refuses a zero dimension.
  if (where == OpenClGemm::kClBlast && s.k > 0) {
    return clblast_gemm<T>(*buffers[0], *buffers[1], *buffers[2], transpose_a != 0, transpose_b != 0,
                           static_cast<size_t>(s.m), static_cast<size_t>(s.n), static_cast<size_t>(s.k),
                           static_cast<size_t>(a.sizes[1] > 0 ? a.sizes[1] : 1),
                           static_cast<size_t>(b.sizes[1] > 0 ? b.sizes[1] : 1), alpha, beta);
  }
  std::array<hal::Mapping, 3> mapped;
  for (size_t i = 0; i < 3; ++i) {
    Result<hal::Mapping> m = buffers[i]->map(i == 2 ? hal::MapAccess::kReadWrite : hal::MapAccess::kRead);
    if (!m.ok()) return m.status().annotate("gemm: mapping its tensors");
    mapped[i] = std::move(*m);
  }
  a.data = static_cast<T*>(mapped[0].data());
  b.data = static_cast<T*>(mapped[1].data());
  c.data = static_cast<T*>(mapped[2].data());
  return gemm_blas<T>(context, a, b, c, transpose_a, transpose_b, alpha, beta);
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
  // cuda: on the host over mapped buffers until cuBLAS is wired in (docs/cuda.md).
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cuda", &gemm_blas<float>>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cuda", &gemm_blas<double>>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "interp", &gemm_reference<float>>()));
  return registry.add(make_function<"gemm", "interp", &gemm_reference<double>>());
}

}  // namespace kiln::ral::library
