#include "ral/library/onednn.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "kiln/base/settings.h"
#include "kiln/base/shared_library.h"

namespace kiln::ral::library {

namespace {

// dnnl.h's declarations (oneDNN 2.x, whose C API is stable), here so that kiln builds without
// its headers. dnnl_dim_t is int64_t; dnnl_status_t 0 is success.
using dnnl_dim_t = int64_t;
using GemmBf16Fn = int (*)(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k, float alpha,
                           const uint16_t* a, dnnl_dim_t lda, const uint16_t* b, dnnl_dim_t ldb, float beta,
                           float* c, dnnl_dim_t ldc);
using GemmS8Fn = int (*)(char transa, char transb, char offsetc, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                         float alpha, const int8_t* a, dnnl_dim_t lda, int8_t ao, const int8_t* b, dnnl_dim_t ldb,
                         int8_t bo, float beta, int32_t* c, dnnl_dim_t ldc, const int32_t* co);

struct OneDnn {
  GemmBf16Fn gemm_bf16 = nullptr;
  GemmS8Fn gemm_s8 = nullptr;
  // OpenMP's, from the runtime Debian's oneDNN is built with (libgomp); null with another one.
  void (*set_num_threads)(int) = nullptr;
  Status status;
};

// OpenMP's idle threads spin before they sleep (libgomp's default policy), and on a machine with
// few cores they take one from kiln's own queue threads between products: measured on 2 cores,
// a 1024^3 bf16 product ran in 26 ms by the median of 20 runs with the default and in 8.8 ms
// with OMP_WAIT_POLICY=passive. So where oneDNN brings OpenMP into the process (libgomp not yet
// loaded, by PyTorch say, whose settings then stay its own) and the user set neither variable,
// its threads are asked to sleep when idle. (setenv while another thread reads the environment
// is a race in C, as for OpenBLAS's variables: this runs once, at the first such product.)
void default_wait_policy() {
  if (::getenv("OMP_WAIT_POLICY") || ::getenv("GOMP_SPINCOUNT")) return;
  if (void* gomp = ::dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(gomp);
    return;
  }
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
}

// Loaded once per process and never unloaded (its thread pool outlives any kiln object).
const OneDnn& onednn() {
  static const OneDnn loaded = [] {
    OneDnn out;
    default_wait_policy();
    Result<void*> handle = load_shared_library({"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"});
    if (!handle.ok()) {
      out.status = unavailable_error("a product of bf16 or i8 operands on the host needs oneDNN, which was not found (" +
                                     handle.status().message() + "); install libdnnl2");
      return out;
    }
    SymbolBinder binder(*handle);
    binder.bind(out.gemm_bf16, "dnnl_gemm_bf16bf16f32");
    binder.bind(out.gemm_s8, "dnnl_gemm_s8s8s32");
    if (!binder.missing().empty()) out.status = unavailable_error("the oneDNN library lacks " + binder.missing());
    SymbolBinder optional(*handle);
    optional.bind(out.set_num_threads, "omp_set_num_threads");
    return out;
  }();
  return loaded;
}

// KILN_CPU_THREADS bounds oneDNN's threads as it does OpenBLAS's, unless the user configures
// OpenMP itself (OMP_NUM_THREADS). OpenMP keeps the number per calling thread, so it is set
// before each call, on the thread that makes it.
Status apply_thread_limit(const OneDnn& dnnl) {
  if (::getenv("OMP_NUM_THREADS")) return Status();
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> limit, setting_uint("KILN_CPU_THREADS"));
  if (limit && *limit > 0 && dnnl.set_num_threads) dnnl.set_num_threads(static_cast<int>(*limit));
  return Status();
}

Status checked(int status, const char* what) {
  if (status == 0) return Status();
  return internal_error(std::string("oneDNN's ") + what + " failed with dnnl_status_t " + std::to_string(status));
}

}  // namespace

Status onednn_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                        int64_t ldc) {
  const OneDnn& dnnl = onednn();
  KILN_RETURN_IF_ERROR(dnnl.status);
  KILN_RETURN_IF_ERROR(apply_thread_limit(dnnl));
  return checked(dnnl.gemm_bf16(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                beta, c, ldc),
                 "dnnl_gemm_bf16bf16f32");
}

Status onednn_gemm_s8(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float beta, int32_t* c,
                      int64_t ldc) {
  const OneDnn& dnnl = onednn();
  KILN_RETURN_IF_ERROR(dnnl.status);
  KILN_RETURN_IF_ERROR(apply_thread_limit(dnnl));
  const int32_t no_offset = 0;
  return checked(dnnl.gemm_s8(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', 'F', m, n, k, alpha, a, lda, 0, b,
                              ldb, 0, beta, c, ldc, &no_offset),
                 "dnnl_gemm_s8s8s32");
}

}  // namespace kiln::ral::library
