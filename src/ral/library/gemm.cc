// gemm: c = alpha * op(a) @ op(b) + beta * c, for each of the products its tensors hold
// (gemm_shape.h). The cpu device calls OpenBLAS's cblas (the library a user would otherwise
// call, loaded when the first gemm runs: openblas.h), or for f32 products with alpha 1 and beta
// 0 oneDNN's matmul primitive where oneDNN loads (onednn.h); opencl calls CLBlast on the device
// (ral/library/clblast.h) and cuda cuBLAS (cuda_library.h), or OpenBLAS over mapped buffers;
// interp has a plain triple loop, the reference. oneDNN takes a batch in one call, spread over
// its threads; for OpenBLAS a batch is a loop of products over strided pointers (each product is
// large: the automatic calls ask for M·N·K ≥ 16³).
#include <algorithm>
#include <array>
#include <span>
#include <type_traits>
#include <utility>

#include "kiln/hal/buffer.h"
#include "kiln/ir/gemm_groups.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/clblast.h"
#include "ral/library/cuda_library.h"
#include "ral/library/gemm_shape.h"
#include "ral/library/library.h"
#include "ral/library/onednn.h"
#include "ral/library/openblas.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// Whether oneDNN's matmul primitive runs an f32 product c = a @ b rather than OpenBLAS, as
// measured on the 2-core development machine (2026-11-30, docs/ral.md): it took 0.44x the time of
// OpenBLAS's loop on a batch of 32 attention products (128 x 128 x 64), 0.8x on a transformer's
// projections (k = 256 and 1024) and 0.9x at 512³, where OpenBLAS was as fast or faster on
// products whose every dimension is 1024 or more (2048³: 0.93x oneDNN's time) and on small ones
// (below 2^24 multiply-adds; still so once oneDNN ran those below 2^22 on one thread: a GPT-style
// decoder at batch 1 measured even either way).
// Products of one row or one column stay with OpenBLAS's gemv (openblas.h).
bool onednn_runs(const GemmShape& s) {
  if (s.m <= 1 || s.n <= 1) return false;
  if (s.batch > 1) return true;
  return s.m * s.n * s.k > (int64_t{1} << 24) && std::min({s.m, s.n, s.k}) < 1024;
}

// Every product of `s` through OpenBLAS (or oneDNN, above), over host memory.
template <typename T>
Status blas_products(const GemmShape& s, const T* a, const T* b, T* c, T alpha, T beta) {
  if (s.m == 0 || s.n == 0) return Status();
  if (alpha == 0 || s.k == 0) {  // c = beta * c without reading a or b, as BLAS (OpenBLAS reads them)
    for (int64_t i = 0; i < s.batch * s.m * s.n; ++i) c[i] = beta == 0 ? T(0) : beta * c[i];
    return Status();
  }
  if constexpr (std::is_same_v<T, float>) {
    if (alpha == 1 && beta == 0 && onednn_runs(s)) {
      Status done = onednn_matmul_f32(s.batch, s.transpose_a, s.transpose_b, s.m, s.n, s.k, a, s.lda(), b, s.ldb(),
                                      c, s.ldc());
      if (done.code() != StatusCode::kUnavailable && done.code() != StatusCode::kUnimplemented) return done;
    }
  }
  for (int64_t p = 0; p < s.batch; ++p) {
    KILN_RETURN_IF_ERROR(openblas_gemm<T>(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a + p * s.stride_a(),
                                          s.lda(), b + p * s.stride_b(), s.ldb(), beta, c + p * s.stride_c(),
                                          s.ldc()));
  }
  return Status();
}

// The devices' gemm once its shape is known, for one element type: the functions of each
// combination of ranks (gemm_of_ranks, below) only find the shape, so that these are compiled
// once per type rather than once per type and ranks. a, b and c are the tensors' data.
template <typename T>
Status gemm_blas(ExecutionContext*, const GemmShape& s, T* a, T* b, T* c, T alpha, T beta) {
  return blas_products<T>(s, a, b, c, alpha, beta);
}

// OpenBLAS over mapped buffers: gemm on a device whose memory the host maps, where the device's
// own library does not run it. a, b and c are the tensors' hal::Buffers.
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
// KILN_CUDA_GEMM asks for the host), once `host_ready` has returned. k = 0 (c = beta * c) is
// always left to the host: CLBlast refuses a zero dimension.
template <typename T, typename Place, typename Library, typename HostReady>
Status gemm_on_device(const GemmShape& s, T* a, T* b, T* c, T alpha, T beta, Place&& place, Library&& library,
                      HostReady&& host_ready) {
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status();
  KILN_ASSIGN_OR_RETURN(GemmPlace where, place(buffer_at(c)));
  return run_gemm_at(
      "gemm", s.k == 0 ? GemmPlace::kHost : where, [&] { return library(s); },
      [&] {
        KILN_RETURN_IF_ERROR(host_ready());
        return gemm_mapped<T>(s, a, b, c, alpha, beta);
      });
}

template <typename T>
Status gemm_opencl(ExecutionContext*, const GemmShape& s, T* a, T* b, T* c, T alpha, T beta) {
  return gemm_on_device<T>(s, a, b, c, alpha, beta, opencl_gemm, [&](const GemmShape& shape) {
    return clblast_gemm<T>(buffer_at(a), buffer_at(b), buffer_at(c), shape, alpha, beta);
  }, [] { return Status(); });
}

template <typename T>
Status gemm_cuda(ExecutionContext* context, const GemmShape& s, T* a, T* b, T* c, T alpha, T beta) {
  return gemm_on_device<T>(s, a, b, c, alpha, beta, cuda_gemm, [&](const GemmShape& shape) {
    return cublas_gemm<T>(context, buffer_at(a), buffer_at(b), buffer_at(c), shape, alpha, beta);
  }, [&] { return await_call_stream(*context, buffer_at(c), "gemm"); });
}

template <typename T>
Status gemm_reference(ExecutionContext*, const GemmShape& s, T* a_data, T* b_data, T* c_data, T alpha, T beta) {
  for (int64_t q = 0; q < s.batch; ++q) {
    const T* a = a_data + q * s.stride_a();
    const T* b = b_data + q * s.stride_b();
    T* c = c_data + q * s.stride_c();
    auto at = [&](int64_t i, int64_t p) { return s.transpose_a ? a[p * s.m + i] : a[i * s.k + p]; };
    auto bt = [&](int64_t p, int64_t j) { return s.transpose_b ? b[j * s.k + p] : b[p * s.n + j]; };
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        T sum = 0;
        if (alpha != 0) {  // alpha = 0 reads neither a nor b (they may hold NaNs), as BLAS
          for (int64_t p = 0; p < s.k; ++p) sum += at(i, p) * bt(p, j);
        }
        T& out = c[i * s.n + j];
        // beta = 0 ignores c (it may hold NaNs), as BLAS does.
        out = beta == 0 ? alpha * sum : alpha * sum + beta * out;
      }
    }
  }
  return Status();
}

// The shape, then `Products` (one of the functions above): out of the functions of each rank,
// which would otherwise each compile their own copy.
template <auto Products, typename T>
[[gnu::noinline]] Status gemm_of_sizes(ExecutionContext* context, std::span<const int64_t> a_sizes, T* a,
                                       std::span<const int64_t> b_sizes, T* b, std::span<const int64_t> c_sizes, T* c,
                                       int64_t transpose_a, int64_t transpose_b, T alpha, T beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, gemm_shape(a_sizes, b_sizes, c_sizes, transpose_a, transpose_b, batch));
  return Products(context, s, a, b, c, alpha, beta);
}

// gemm(a, b) -> c of these ranks through `Products`.
template <auto Products, typename T, int RA, int RB, int RC>
Status gemm_of_ranks(ExecutionContext* context, MemRef<T, RA> a, MemRef<T, RB> b, MemRef<T, RC> c, int64_t transpose_a,
                     int64_t transpose_b, T alpha, T beta, int64_t batch) {
  return gemm_of_sizes<Products, T>(context, a.sizes, a.data, b.sizes, b.data, c.sizes, c.data, transpose_a,
                                    transpose_b, alpha, beta, batch);
}

// gemm on every device for tensors of these ranks, where some batch makes them a product.
template <typename T, int RA, int RB, int RC>
Status register_ranks(Registry& registry) {
  if constexpr (!ir::gemm_ranks_possible(RA, RB, RC)) {
    return Status();
  } else {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cpu", &gemm_of_ranks<&gemm_blas<T>, T, RA, RB, RC>>()));
    KILN_RETURN_IF_ERROR(registry.add(
        make_function<"gemm", "opencl", &gemm_of_ranks<&gemm_opencl<T>, T, RA, RB, RC>, Memory::kDevice>()));
    KILN_RETURN_IF_ERROR(registry.add(
        make_function<"gemm", "cuda", &gemm_of_ranks<&gemm_cuda<T>, T, RA, RB, RC>, Memory::kDeviceStream>()));
    return registry.add(make_function<"gemm", "interp", &gemm_of_ranks<&gemm_reference<T>, T, RA, RB, RC>>());
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
