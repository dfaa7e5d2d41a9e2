// gemm: c = alpha * op(a) @ op(b) + beta * c, for each of the products its tensors hold
// (gemm_shape.h). The cpu device calls OpenBLAS's cblas (the library a user would otherwise
// call, loaded when the first gemm runs: openblas.h); opencl calls CLBlast on the device
// (ral/library/clblast.h) and cuda cuBLAS (cuda_library.h), or OpenBLAS over mapped buffers;
// interp has a plain triple loop, the reference. A batch is a loop of products over strided
// pointers: each product is large (the automatic calls ask for M·N·K ≥ 16³), so the loop's cost
// is small beside it.
#include <algorithm>
#include <array>
#include <utility>

#include "kiln/hal/buffer.h"
#include "kiln/ir/gemm_groups.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/clblast.h"
#include "ral/library/cuda_library.h"
#include "ral/library/gemm_shape.h"
#include "ral/library/library.h"
#include "ral/library/openblas.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// Every product of `s` through OpenBLAS, over host memory.
template <typename T>
Status blas_products(const GemmShape& s, const T* a, const T* b, T* c, T alpha, T beta) {
  if (s.m == 0 || s.n == 0) return Status();
  for (int64_t p = 0; p < s.batch; ++p) {
    KILN_RETURN_IF_ERROR(openblas_gemm<T>(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a + p * s.stride_a(),
                                          s.lda(), b + p * s.stride_b(), s.ldb(), beta, c + p * s.stride_c(),
                                          s.ldc()));
  }
  return Status();
}

template <typename T, int RA, int RB, int RC>
Status gemm_blas(ExecutionContext*, MemRef<T, RA> a, MemRef<T, RB> b, MemRef<T, RC> c, int64_t transpose_a,
                 int64_t transpose_b, T alpha, T beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b, batch));
  return blas_products<T>(s, a.data, b.data, c.data, alpha, beta);
}

// OpenBLAS over mapped buffers: gemm on a device whose memory the host maps, where the device's
// own library does not run it. Each memref's data is the tensor's hal::Buffer.
template <typename T>
Status gemm_mapped(const GemmShape& s, T* a, T* b, T* c, T alpha, T beta) {
  std::array<hal::Mapping, 3> mapped;
  T* buffers[3] = {a, b, c};
  for (size_t i = 0; i < 3; ++i) {
    Result<hal::Mapping> m = reinterpret_cast<hal::Buffer*>(buffers[i])->map(i == 2 ? hal::MapAccess::kReadWrite
                                                                                    : hal::MapAccess::kRead);
    if (!m.ok()) return m.status().annotate("gemm: mapping its tensors");
    mapped[i] = std::move(*m);
  }
  return blas_products<T>(s, static_cast<const T*>(mapped[0].data()), static_cast<const T*>(mapped[1].data()),
                          static_cast<T*>(mapped[2].data()), alpha, beta);
}

// The opencl and cuda devices' gemm, which work on device memory (Memory::kDevice): `library`
// (CLBlast or cuBLAS, given the shape) runs it on the device where `place` says so, else
// gemm_mapped does (on a CPU device, without the library, or when KILN_OPENCL_GEMM /
// KILN_CUDA_GEMM asks for the host). k = 0 (c = beta * c) is always left to the host: CLBlast
// refuses a zero dimension.
template <typename T, int RA, int RB, int RC, typename Place, typename Library>
Status gemm_on_device(MemRef<T, RA> a, MemRef<T, RB> b, MemRef<T, RC> c, int64_t transpose_a, int64_t transpose_b,
                      T alpha, T beta, int64_t batch, Place&& place, Library&& library) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a, b, c, transpose_a, transpose_b, batch));
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status();
  KILN_ASSIGN_OR_RETURN(GemmPlace where, place(buffer_of(c)));
  return run_gemm_at(
      "gemm", s.k == 0 ? GemmPlace::kHost : where, [&] { return library(s); },
      [&] { return gemm_mapped<T>(s, a.data, b.data, c.data, alpha, beta); });
}

template <typename T, int RA, int RB, int RC>
Status gemm_opencl(ExecutionContext*, MemRef<T, RA> a, MemRef<T, RB> b, MemRef<T, RC> c, int64_t transpose_a,
                   int64_t transpose_b, T alpha, T beta, int64_t batch) {
  return gemm_on_device<T>(a, b, c, transpose_a, transpose_b, alpha, beta, batch, opencl_gemm, [&](const GemmShape& s) {
    return clblast_gemm<T>(buffer_of(a), buffer_of(b), buffer_of(c), s, alpha, beta);
  });
}

template <typename T, int RA, int RB, int RC>
Status gemm_cuda(ExecutionContext* context, MemRef<T, RA> a, MemRef<T, RB> b, MemRef<T, RC> c, int64_t transpose_a,
                 int64_t transpose_b, T alpha, T beta, int64_t batch) {
  return gemm_on_device<T>(a, b, c, transpose_a, transpose_b, alpha, beta, batch, cuda_gemm, [&](const GemmShape& s) {
    return cublas_gemm<T>(context, buffer_of(a), buffer_of(b), buffer_of(c), s, alpha, beta);
  });
}

template <typename T, int RA, int RB, int RC>
Status gemm_reference(ExecutionContext*, MemRef<T, RA> a_ref, MemRef<T, RB> b_ref, MemRef<T, RC> c_ref,
                      int64_t transpose_a, int64_t transpose_b, T alpha, T beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, check_gemm(a_ref, b_ref, c_ref, transpose_a, transpose_b, batch));
  for (int64_t q = 0; q < s.batch; ++q) {
    const T* a = a_ref.data + q * s.stride_a();
    const T* b = b_ref.data + q * s.stride_b();
    T* c = c_ref.data + q * s.stride_c();
    auto at = [&](int64_t i, int64_t p) { return s.transpose_a ? a[p * s.m + i] : a[i * s.k + p]; };
    auto bt = [&](int64_t p, int64_t j) { return s.transpose_b ? b[j * s.k + p] : b[p * s.n + j]; };
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += at(i, p) * bt(p, j);
        T& out = c[i * s.n + j];
        // beta = 0 ignores c (it may hold NaNs), as BLAS does.
        out = beta == 0 ? alpha * sum : alpha * sum + beta * out;
      }
    }
  }
  return Status();
}

// gemm on every device for tensors of these ranks, where some batch makes them a product.
template <typename T, int RA, int RB, int RC>
Status register_ranks(Registry& registry) {
  if constexpr (!ir::gemm_ranks_possible(RA, RB, RC)) {
    return Status();
  } else {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cpu", &gemm_blas<T, RA, RB, RC>>()));
    KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "opencl", &gemm_opencl<T, RA, RB, RC>, Memory::kDevice>()));
    KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cuda", &gemm_cuda<T, RA, RB, RC>, Memory::kDevice>()));
    return registry.add(make_function<"gemm", "interp", &gemm_reference<T, RA, RB, RC>>());
  }
}

// register_ranks for every rank of a, b and c from 2 to 4.
template <typename T>
Status register_all_ranks(Registry& registry) {
  static_assert(ir::kGemmMaxRank == 4, "the ranks below run from 2 to kGemmMaxRank");
  Status status;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((status = status.ok() ? register_ranks<T, 2 + I / 9, 2 + I / 3 % 3, 2 + I % 3>(registry) : status), ...);
  }(std::make_integer_sequence<int, 27>{});
  return status;
}

}  // namespace

Status register_gemm(Registry& registry) {
  KILN_RETURN_IF_ERROR(register_all_ranks<float>(registry));
  return register_all_ranks<double>(registry);
}

}  // namespace kiln::ral::library
