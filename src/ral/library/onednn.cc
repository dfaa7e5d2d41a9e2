#include "ral/library/onednn.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

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
using SgemmFn = int (*)(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k, float alpha, const float* a,
                       dnnl_dim_t lda, const float* b, dnnl_dim_t ldb, float beta, float* c, dnnl_dim_t ldc);
using GemmS8Fn = int (*)(char transa, char transb, char offsetc, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                         float alpha, const int8_t* a, dnnl_dim_t lda, int8_t ao, const int8_t* b, dnnl_dim_t ldb,
                         int8_t bo, float beta, int32_t* c, dnnl_dim_t ldc, const int32_t* co);

// oneDNN 2.x's primitive API, declared here as above. Its descriptors are plain structs whose
// sizes a major version fixes (2.6.3: 696 and 2800 bytes): kiln keeps them in storage larger
// than that and takes this path only with a version 2 library. Handles are opaque pointers.
struct MemoryDesc {
  alignas(16) unsigned char bytes[2048];
};
struct MatmulDesc {
  alignas(16) unsigned char bytes[8192];
};
struct ExecArg {
  int arg;
  void* memory;
};
struct Version {
  int major, minor, patch;
};
constexpr int kCpuEngine = 1, kInOrderStream = 1;                      // dnnl_cpu, dnnl_stream_in_order
constexpr int kF32 = 3, kS32 = 4, kS8 = 5, kBf16 = 2;                   // dnnl_data_type_t
constexpr int kArgSrc = 1, kArgDst = 17, kArgWeights = 33;              // DNNL_ARG_*
constexpr int kQueryImplInfoStr = 8;                                    // dnnl_query_impl_info_str (2.x)

struct Primitives {
  const Version* (*version)() = nullptr;
  int (*engine_create)(void** engine, int kind, size_t index) = nullptr;
  int (*stream_create)(void** stream, void* engine, unsigned flags) = nullptr;
  int (*stream_destroy)(void* stream) = nullptr;
  int (*memory_desc_init_by_strides)(MemoryDesc* desc, int ndims, const int64_t* dims, int type,
                                     const int64_t* strides) = nullptr;
  int (*matmul_desc_init)(MatmulDesc* desc, const MemoryDesc* src, const MemoryDesc* weights, const MemoryDesc* bias,
                          const MemoryDesc* dst) = nullptr;
  int (*primitive_desc_create)(void** pd, const void* op_desc, const void* attr, void* engine,
                               const void* hint) = nullptr;
  int (*primitive_desc_destroy)(void* pd) = nullptr;
  int (*primitive_desc_query)(const void* pd, int what, int index, void* result) = nullptr;
  int (*primitive_create)(void** primitive, const void* pd) = nullptr;
  int (*memory_create)(void** memory, const MemoryDesc* desc, void* engine, void* data) = nullptr;
  int (*memory_destroy)(void* memory) = nullptr;
  int (*primitive_execute)(const void* primitive, void* stream, int nargs, const ExecArg* args) = nullptr;
  int (*stream_wait)(void* stream) = nullptr;
};

struct OneDnn {
  GemmBf16Fn gemm_bf16 = nullptr;
  GemmS8Fn gemm_s8 = nullptr;
  SgemmFn sgemm = nullptr;
  // OpenMP's, from the runtime Debian's oneDNN is built with (libgomp); null with another one.
  void (*set_num_threads)(int) = nullptr;
  int (*max_threads)() = nullptr;
  int (*num_procs)() = nullptr;
  // The matmul primitive, where the library is version 2 and has it (`engine` not null).
  Primitives api;
  void* engine = nullptr;
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

// The matmul primitive's functions and a cpu engine, where the library is version 2 and has
// them; otherwise `dnnl.engine` stays null and products go through the gemm functions.
void bind_primitives(void* handle, OneDnn& dnnl) {
  Primitives api;
  SymbolBinder binder(handle);
  binder.bind(api.version, "dnnl_version");
  binder.bind(api.engine_create, "dnnl_engine_create");
  binder.bind(api.stream_create, "dnnl_stream_create");
  binder.bind(api.stream_destroy, "dnnl_stream_destroy");
  binder.bind(api.memory_desc_init_by_strides, "dnnl_memory_desc_init_by_strides");
  binder.bind(api.matmul_desc_init, "dnnl_matmul_desc_init");
  binder.bind(api.primitive_desc_create, "dnnl_primitive_desc_create");
  binder.bind(api.primitive_desc_destroy, "dnnl_primitive_desc_destroy");
  binder.bind(api.primitive_desc_query, "dnnl_primitive_desc_query");
  binder.bind(api.primitive_create, "dnnl_primitive_create");
  binder.bind(api.memory_create, "dnnl_memory_create");
  binder.bind(api.memory_destroy, "dnnl_memory_destroy");
  binder.bind(api.primitive_execute, "dnnl_primitive_execute");
  binder.bind(api.stream_wait, "dnnl_stream_wait");
  if (!binder.missing().empty() || api.version()->major != 2) return;
  if (api.engine_create(&dnnl.engine, kCpuEngine, 0) != 0) {
    dnnl.engine = nullptr;
    return;
  }
  dnnl.api = api;
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
    binder.bind(out.sgemm, "dnnl_sgemm");
    if (!binder.missing().empty()) out.status = unavailable_error("the oneDNN library lacks " + binder.missing());
    SymbolBinder optional(*handle);
    optional.bind(out.set_num_threads, "omp_set_num_threads");
    optional.bind(out.max_threads, "omp_get_max_threads");
    optional.bind(out.num_procs, "omp_get_num_procs");
    bind_primitives(*handle, out);
    return out;
  }();
  return loaded;
}

// Below this many multiply-adds a product runs on the calling thread alone: OpenMP's threads
// sleep between products (default_wait_policy), and waking them and joining them again cost more
// than they bring. A GPT-style decoder at batch 1 (attention products of 4 x 64 x 64 x 32) took
// 1.56-1.62 ms a run with every product on 2 threads against 1.25-1.37 ms with one (medians of
// 300, 2026-11-30).
constexpr int64_t kParallelWork = int64_t{1} << 22;

// The threads for a product of `work` multiply-adds, set on the calling thread (OpenMP keeps the
// number per calling thread): one below kParallelWork, else KILN_CPU_THREADS where set (it bounds
// oneDNN's threads as it does OpenBLAS's), else every processor. Nothing where the user
// configures OpenMP itself (OMP_NUM_THREADS).
Status apply_thread_limit(const OneDnn& dnnl, int64_t work) {
  if (::getenv("OMP_NUM_THREADS") || !dnnl.set_num_threads) return Status();
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> limit, setting_uint("KILN_CPU_THREADS"));
  int threads = limit && *limit > 0 ? static_cast<int>(*limit) : dnnl.num_procs ? dnnl.num_procs() : 0;
  if (work < kParallelWork) threads = 1;
  if (threads > 0) dnnl.set_num_threads(threads);
  return Status();
}

// oneDNN, loaded, with the calling thread's thread count set for a product of `work`
// multiply-adds; why not where it cannot load.
Result<const OneDnn*> ready(int64_t work) {
  const OneDnn& dnnl = onednn();
  KILN_RETURN_IF_ERROR(dnnl.status);
  KILN_RETURN_IF_ERROR(apply_thread_limit(dnnl, work));
  return &dnnl;
}

// batch · m · n · k, saturated: a product's multiply-adds.
int64_t work_of(int64_t batch, int64_t m, int64_t n, int64_t k) {
  int64_t work = 1;
  for (int64_t d : {batch, m, n, k}) {
    if (d > 0 && work > std::numeric_limits<int64_t>::max() / d) return std::numeric_limits<int64_t>::max();
    work *= std::max<int64_t>(d, 0);
  }
  return work;
}

Status checked(int status, const char* what) {
  if (status == 0) return Status();
  return internal_error(std::string("oneDNN's ") + what + " failed with dnnl_status_t " + std::to_string(status));
}

// A matmul primitive for one shape, kept for the life of the process: oneDNN's gemm functions
// take the AVX-512 BF16/VNNI path, its matmul primitive the faster brgemm one (AMX where the CPU
// has it): a 1024^3 bf16 product took 3.6 ms through it against 4.0 ms (2 threads, 2026-11-30).
struct MatmulKey {
  int type_ab, type_c;
  bool transpose_a, transpose_b;
  int64_t m, n, k, lda, ldb, ldc;
  int threads;  // oneDNN splits the work when the primitive is made
  int64_t batch = 1;  // products one after another in each tensor, dense
  auto tie() const {
    return std::tie(type_ab, type_c, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, threads, batch);
  }
  bool operator<(const MatmulKey& other) const { return tie() < other.tie(); }
};

struct Matmul {
  MemoryDesc a, b, c;
  void* primitive = nullptr;
  bool on_amx = false;  // oneDNN's implementation for it uses AMX (its name says "amx")
};

// The primitive for `key`, made on first use; null where oneDNN has none for it. At most
// kMaxMatmuls shapes are kept, so that a program of ever new sizes cannot grow this without end.
const Matmul* matmul_for(const OneDnn& dnnl, const MatmulKey& key) {
  constexpr size_t kMaxMatmuls = 256;
  static std::mutex mutex;
  // Never destroyed: the primitives outlive every caller, and stay reachable to leak checkers.
  static std::map<MatmulKey, Matmul>& made = *new std::map<MatmulKey, Matmul>;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = made.find(key); found != made.end()) return found->second.primitive ? &found->second : nullptr;
  if (made.size() >= kMaxMatmuls) return nullptr;
  const Primitives& api = dnnl.api;
  Matmul out;
  // One product is a 2-d matmul; a batch, a 3-d one whose first dimension steps by a whole matrix.
  const int ndims = key.batch > 1 ? 3 : 2, first = 3 - ndims;
  int64_t a_dims[3] = {key.batch, key.m, key.k}, b_dims[3] = {key.batch, key.k, key.n},
          c_dims[3] = {key.batch, key.m, key.n};
  int64_t a_strides[3] = {key.m * key.k, key.transpose_a ? 1 : key.lda, key.transpose_a ? key.lda : 1};
  int64_t b_strides[3] = {key.k * key.n, key.transpose_b ? 1 : key.ldb, key.transpose_b ? key.ldb : 1};
  int64_t c_strides[3] = {key.m * key.n, key.ldc, 1};
  MatmulDesc desc;
  void* pd = nullptr;
  if (api.memory_desc_init_by_strides(&out.a, ndims, a_dims + first, key.type_ab, a_strides + first) == 0 &&
      api.memory_desc_init_by_strides(&out.b, ndims, b_dims + first, key.type_ab, b_strides + first) == 0 &&
      api.memory_desc_init_by_strides(&out.c, ndims, c_dims + first, key.type_c, c_strides + first) == 0 &&
      api.matmul_desc_init(&desc, &out.a, &out.b, nullptr, &out.c) == 0 &&
      api.primitive_desc_create(&pd, &desc, nullptr, dnnl.engine, nullptr) == 0) {
    if (api.primitive_create(&out.primitive, pd) != 0) out.primitive = nullptr;
    const char* name = nullptr;
    out.on_amx = api.primitive_desc_query(pd, kQueryImplInfoStr, 0, &name) == 0 && name &&
                 std::string_view(name).find("amx") != std::string_view::npos;
    api.primitive_desc_destroy(pd);
  }
  const Matmul& kept = made.emplace(key, out).first->second;
  return kept.primitive ? &kept : nullptr;
}

// c = a @ b through the primitive; false where there is none for this product (then nothing was
// written), so that the caller uses the gemm function.
Result<bool> run_matmul(const OneDnn& dnnl, MatmulKey key, const void* a, const void* b, void* c) {
  if (!dnnl.engine || key.k == 0) return false;
  key.threads = dnnl.max_threads ? dnnl.max_threads() : 0;
  const Matmul* matmul = matmul_for(dnnl, key);
  if (!matmul) return false;
  const Primitives& api = dnnl.api;
  // A stream per thread, destroyed with it: oneDNN's cpu streams are cheap, and one is not to be
  // shared between threads that execute at once.
  struct Stream {
    void* handle = nullptr;
    int (*destroy)(void*) = nullptr;
    ~Stream() {
      if (handle) destroy(handle);
    }
  };
  thread_local Stream stream;
  if (!stream.handle) {
    KILN_RETURN_IF_ERROR(
        checked(api.stream_create(&stream.handle, dnnl.engine, kInOrderStream), "dnnl_stream_create"));
    stream.destroy = api.stream_destroy;
  }
  ExecArg args[3] = {{kArgSrc, nullptr}, {kArgWeights, nullptr}, {kArgDst, nullptr}};
  int status = api.memory_create(&args[0].memory, &matmul->a, dnnl.engine, const_cast<void*>(a));
  if (status == 0) status = api.memory_create(&args[1].memory, &matmul->b, dnnl.engine, const_cast<void*>(b));
  if (status == 0) status = api.memory_create(&args[2].memory, &matmul->c, dnnl.engine, c);
  if (status == 0) status = api.primitive_execute(matmul->primitive, stream.handle, 3, args);
  if (status == 0) status = api.stream_wait(stream.handle);
  for (ExecArg& arg : args) {
    if (arg.memory) api.memory_destroy(arg.memory);
  }
  KILN_RETURN_IF_ERROR(checked(status, "matmul primitive"));
  return true;
}

}  // namespace

bool onednn_bf16_on_amx() {
  static const bool on_amx = [] {
    Result<const OneDnn*> dnnl = ready(work_of(1, 64, 64, 64));
    if (!dnnl.ok() || !(*dnnl)->engine) return false;
    const Matmul* matmul = matmul_for(**dnnl, {kBf16, kF32, false, false, 64, 64, 64, 64, 64, 64, 0});
    return matmul && matmul->on_amx;
  }();
  return on_amx;
}

Status onednn_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                        int64_t ldc) {
  KILN_ASSIGN_OR_RETURN(const OneDnn* ready_dnnl, ready(work_of(1, m, n, k)));
  const OneDnn& dnnl = *ready_dnnl;
  if (alpha == 1 && beta == 0) {
    KILN_ASSIGN_OR_RETURN(bool ran, run_matmul(dnnl, {kBf16, kF32, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, 0},
                                               a, b, c));
    if (ran) return Status();
  }
  return checked(dnnl.gemm_bf16(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                beta, c, ldc),
                 "dnnl_gemm_bf16bf16f32");
}

Status onednn_gemm_bf16_to_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, uint16_t* c,
                                int64_t ldc) {
  KILN_ASSIGN_OR_RETURN(const OneDnn* ready_dnnl, ready(work_of(1, m, n, k)));
  const OneDnn& dnnl = *ready_dnnl;
  KILN_ASSIGN_OR_RETURN(bool ran, run_matmul(dnnl, {kBf16, kBf16, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, 0},
                                             a, b, c));
  return ran ? Status() : unimplemented_error("oneDNN has no matmul primitive for this bf16 product");
}

Status onednn_gemm_s8(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float beta, int32_t* c,
                      int64_t ldc) {
  KILN_ASSIGN_OR_RETURN(const OneDnn* ready_dnnl, ready(work_of(1, m, n, k)));
  const OneDnn& dnnl = *ready_dnnl;
  if (alpha == 1 && beta == 0) {
    KILN_ASSIGN_OR_RETURN(bool ran, run_matmul(dnnl, {kS8, kS32, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, 0},
                                               a, b, c));
    if (ran) return Status();
  }
  const int32_t no_offset = 0;
  return checked(dnnl.gemm_s8(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', 'F', m, n, k, alpha, a, lda, 0, b,
                              ldb, 0, beta, c, ldc, &no_offset),
                 "dnnl_gemm_s8s8s32");
}

Status onednn_matmul_f32(int64_t batch, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  KILN_ASSIGN_OR_RETURN(const OneDnn* ready_dnnl, ready(work_of(batch, m, n, k)));
  MatmulKey key{kF32, kF32, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, 0};
  key.batch = batch;
  KILN_ASSIGN_OR_RETURN(bool ran, run_matmul(*ready_dnnl, key, a, b, c));
  return ran ? Status() : unimplemented_error("oneDNN has no matmul primitive for this f32 product");
}

Status onednn_sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  KILN_ASSIGN_OR_RETURN(const OneDnn* ready_dnnl, ready(work_of(1, m, n, k)));
  return checked(ready_dnnl->sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                   beta, c, ldc),
                 "dnnl_sgemm");
}

}  // namespace kiln::ral::library
