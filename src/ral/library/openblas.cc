#include "ral/library/openblas.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <limits>
#include <mutex>
#include <string>
#include <tuple>

#include "kiln/base/env.h"
#include "kiln/base/log.h"
#include "kiln/base/settings.h"
#include "kiln/base/shared_library.h"

namespace kiln::ral::library {

namespace {

// cblas.h's values, declared here so that kiln builds without OpenBLAS's headers.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111, kTrans = 112;
using blasint = int;  // Debian's libopenblas0 is the 32-bit-integer build
template <typename T>
using GemmFn = void (*)(int order, int transpose_a, int transpose_b, blasint m, blasint n, blasint k, T alpha,
                        const T* a, blasint lda, const T* b, blasint ldb, T beta, T* c, blasint ldc);

template <typename T>
using GemvFn = void (*)(int order, int transpose, blasint m, blasint n, T alpha, const T* a, blasint lda, const T* x,
                        blasint incx, T beta, T* y, blasint incy);

struct OpenBlas {
  GemmFn<float> sgemm = nullptr;
  GemmFn<double> dgemm = nullptr;
  GemvFn<float> sgemv = nullptr;
  GemvFn<double> dgemv = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
  char* (*get_corename)() = nullptr;  // optional: OpenBLAS's own, not part of cblas
  Status status;
};

// OpenBLAS starts its worker threads when it loads, one per core unless OPENBLAS_NUM_THREADS says
// otherwise, and each spins for a while before it sleeps: openblas_set_num_threads afterwards
// bounds the threads a gemm uses, not those. Each thread also maps a buffer of about 128 MiB, and
// under an address-space limit (ulimit -v) too small for them a thread retries its mmap forever
// and the process never exits. So just before the load the thread count is chosen here: at most
// KILN_CPU_THREADS when set, and at most what the limit leaves room for; it is passed on as
// OPENBLAS_NUM_THREADS unless the user set one of OpenBLAS's own variables. (setenv while another
// thread reads the environment is a race in C; this runs once, at the first gemm.)
// Measured under ulimit -v with Debian's OpenBLAS 0.3.21: the library and the calling thread's
// buffer fit in 58 MiB on one machine, but needed between 165 and 184 MiB on another (an Intel
// Xeon whose kernels map OpenBLAS's whole 128 MiB buffer): with 165 MiB left the first gemm
// retried its mmap forever. Each worker thread adds 60 to 157 MiB. The larger figure is the one
// that never hangs; a limit between the two is refused where it might have sufficed.
constexpr uint64_t kBytesPerThread = uint64_t{136} << 20;  // a worker's buffer and its stack
constexpr uint64_t kBytesToLoad = uint64_t{192} << 20;     // the library and the caller's buffer

// Address space left under RLIMIT_AS, or nullopt without a limit.
std::optional<uint64_t> address_space_left() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  uint64_t pages = 0;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%lu", &pages) != 1) pages = 0;
    std::fclose(statm);
  }
  const uint64_t used = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return limit.rlim_cur > used ? limit.rlim_cur - used : 0;
}

// OpenBLAS's idle threads spin (sched_yield) for 2^28 cycles, about 0.1 s, after each threaded
// gemm: between the gemms of a training step they never sleep, and take a core from kiln's own
// queue threads (a third of a core in the 2-stream demo). 2^16 cycles is about as long as kiln's
// own threads spin. Set when kiln is loaded, unless the user set it: before main (or while a
// host dlopens kiln), not at the first gemm, where other threads may be reading the environment.
[[gnu::constructor]] void default_thread_timeout() {
  if (!::getenv("OPENBLAS_THREAD_TIMEOUT") && !::getenv("GOTO_THREAD_TIMEOUT")) {
    ::setenv("OPENBLAS_THREAD_TIMEOUT", "16", 0);
  }
}

// OpenBLAS picks its kernels by the processor's model, and 0.3.21 (Debian 12) does not know the
// Intel models released after it (Sapphire Rapids): it falls back to its Prescott kernels (SSE3),
// and a 1024³ sgemm took 63 ms there instead of 10.8 ms (docs/performance.md). On an Intel
// processor kiln names the kernels by the processor's features instead, as OpenBLAS does for the
// models it knows (SkylakeX for AVX-512, Haswell for AVX2 and FMA), unless OPENBLAS_CORETYPE is
// set. Other vendors keep OpenBLAS's own choice. At load, like the timeout above.
[[gnu::constructor]] void default_core_type() {
  if (::getenv("OPENBLAS_CORETYPE")) return;
  __builtin_cpu_init();  // a constructor may run before the compiler's own that fills these in
  if (!__builtin_cpu_is("intel")) return;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    ::setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    ::setenv("OPENBLAS_CORETYPE", "Haswell", 0);
  }
}

Status choose_threads_before_load() {
  std::optional<uint64_t> asked;
  for (const char* own : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (std::optional<std::string> value = env_string(own)) {
      asked = std::strtoull(value->c_str(), nullptr, 10);
      break;
    }
  }
  const bool own_variable = asked.has_value();
  if (!asked) {
    KILN_ASSIGN_OR_RETURN(asked, setting_uint("KILN_CPU_THREADS"));
  }
  uint64_t threads = asked && *asked > 0 ? *asked : static_cast<uint64_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  if (std::optional<uint64_t> left = address_space_left()) {
    KILN_LOG(kDebug, "gemm on the host: " + std::to_string(*left >> 20) +
                         " MiB of address space left under RLIMIT_AS before OpenBLAS loads");
    const uint64_t fit = *left >= kBytesToLoad ? 1 + (*left - kBytesToLoad) / kBytesPerThread : 0;
    if (fit == 0) {
      return resource_exhausted_error("gemm on the host: OpenBLAS needs about " + std::to_string(kBytesToLoad >> 20) +
                                      " MiB of address space, and the address-space limit (ulimit -v) leaves " +
                                      std::to_string(*left >> 20) + " MiB");
    }
    if (fit < threads) {
      if (own_variable) {
        return resource_exhausted_error("gemm on the host: OpenBLAS's " + std::to_string(threads) +
                                        " threads need about " +
                                        std::to_string((kBytesToLoad + (threads - 1) * kBytesPerThread) >> 20) +
                                        " MiB of address space, and the address-space limit (ulimit -v) leaves " +
                                        std::to_string(*left >> 20) + " MiB; set OPENBLAS_NUM_THREADS lower");
      }
      threads = fit;
    }
  }
  if (own_variable) return Status();  // the user configures OpenBLAS: all of it
  if (asked || threads < static_cast<uint64_t>(::sysconf(_SC_NPROCESSORS_ONLN))) {
    ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  }
  return Status();
}

// Loaded once per process and never unloaded (its threads outlive any kiln object).
const OpenBlas& openblas() {
  static const OpenBlas loaded = [] {
    OpenBlas out;
    if (Status chosen = choose_threads_before_load(); !chosen.ok()) {
      out.status = chosen;
      return out;
    }
    Result<void*> handle = load_shared_library({"libopenblas.so.0", "libopenblas.so"});
    if (!handle.ok()) {
      out.status = unavailable_error("gemm on the host needs OpenBLAS, which was not found (" +
                                     handle.status().message() + "); install libopenblas0");
      return out;
    }
    SymbolBinder binder(*handle);
    binder.bind(out.sgemm, "cblas_sgemm");
    binder.bind(out.dgemm, "cblas_dgemm");
    binder.bind(out.sgemv, "cblas_sgemv");
    binder.bind(out.dgemv, "cblas_dgemv");
    binder.bind(out.set_num_threads, "openblas_set_num_threads");
    binder.bind(out.get_num_threads, "openblas_get_num_threads");
    if (!binder.missing().empty()) out.status = unavailable_error("the OpenBLAS library lacks " + binder.missing());
    out.get_corename = reinterpret_cast<char* (*)()>(::dlsym(*handle, "openblas_get_corename"));
    return out;
  }();
  return loaded;
}

// Applies KILN_CPU_THREADS to OpenBLAS when it changed since the last call (a mutex, because
// openblas_set_num_threads must not race with itself; gemms already running keep their threads).
Status apply_thread_limit(const OpenBlas& blas) {
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> limit, setting_uint("KILN_CPU_THREADS"));
  if (!limit) return Status();
  static std::mutex mutex;
  static int applied = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (applied != static_cast<int>(*limit)) {
    blas.set_num_threads(static_cast<int>(*limit));
    applied = static_cast<int>(*limit);
  }
  return Status();
}

Status fits(int64_t value, const char* name) {
  if (value >= 0 && value <= std::numeric_limits<blasint>::max()) return Status();
  return invalid_argument_error(std::string("gemm: ") + name + " = " + std::to_string(value) +
                                " does not fit OpenBLAS's 32-bit dimensions");
}

}  // namespace

template <typename T>
Status openblas_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                     int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const OpenBlas& blas = openblas();
  KILN_RETURN_IF_ERROR(blas.status);
  for (auto [value, name] : {std::pair{m, "m"}, {n, "n"}, {k, "k"}, {lda, "lda"}, {ldb, "ldb"}, {ldc, "ldc"}}) {
    KILN_RETURN_IF_ERROR(fits(value, name));
  }
  KILN_RETURN_IF_ERROR(apply_thread_limit(blas));
  const int ta = transpose_a ? kTrans : kNoTrans, tb = transpose_b ? kTrans : kNoTrans;
  const GemvFn<T> gemv = std::get<GemvFn<T>>(std::tuple{blas.sgemv, blas.dgemv});
  // A product with one row or one column is a matrix-vector product: OpenBLAS 0.3.21's gemm
  // would copy the whole matrix into its packed layout first (at batch 1 a classifier's weights,
  // 8 MB for ResNet-50's, at every call), where gemv reads it once as it is stored.
  auto as_blas = [](int64_t v) { return static_cast<blasint>(v); };
  if (m == 1 && k > 0) {
    // c's row = alpha · a's row · op(b) + beta · c's row: op(b)ᵀ times a's row. b is k × n
    // (n × k transposed) row-major; a's row steps by lda where a is stored transposed.
    gemv(kRowMajor, transpose_b ? kNoTrans : kTrans, as_blas(transpose_b ? n : k), as_blas(transpose_b ? k : n), alpha,
         b, as_blas(ldb), a, as_blas(transpose_a ? lda : 1), beta, c, 1);
    return Status();
  }
  if (n == 1 && k > 0) {
    // c's column = alpha · op(a) · b's column + beta · c's column; c's column steps by ldc.
    gemv(kRowMajor, ta, as_blas(transpose_a ? k : m), as_blas(transpose_a ? m : k), alpha, a, as_blas(lda), b,
         as_blas(transpose_b ? 1 : ldb), beta, c, as_blas(ldc));
    return Status();
  }
  const GemmFn<T> gemm = std::get<GemmFn<T>>(std::tuple{blas.sgemm, blas.dgemm});
  gemm(kRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
       static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  return Status();
}

template Status openblas_gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                     const float*, int64_t, float, float*, int64_t);
template Status openblas_gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                      const double*, int64_t, double, double*, int64_t);

Result<int> openblas_threads() {
  const OpenBlas& blas = openblas();
  KILN_RETURN_IF_ERROR(blas.status);
  KILN_RETURN_IF_ERROR(apply_thread_limit(blas));
  return blas.get_num_threads();
}

Result<std::string> openblas_core() {
  const OpenBlas& blas = openblas();
  KILN_RETURN_IF_ERROR(blas.status);
  if (!blas.get_corename) return unavailable_error("the OpenBLAS library does not name its kernels");
  return std::string(blas.get_corename());
}

}  // namespace kiln::ral::library
