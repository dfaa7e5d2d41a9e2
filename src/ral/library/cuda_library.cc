#include "ral/library/cuda_library.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>

#include "base/disk_cache.h"
#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_image_builder.h"
#include "ral/library/cuda_kernels.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

using cuda::CUdeviceptr;

// Threads per block of the library kernels, and the most blocks a launch asks for (the kernels
// stride over the rest).
constexpr uint64_t kBlockThreads = 256;
constexpr uint64_t kMaxBlocks = 65536;

}  // namespace

Result<CUdeviceptr> device_pointer(const hal::Buffer& buffer, const char* function, const char* operand) {
  if (!cuda::cu_storage(buffer)) {
    return invalid_argument_error(std::string(function) + ": " + operand + " is not CUDA memory");
  }
  return cuda::buffer_pointer(buffer);
}

Result<CudaLibrary*> CudaLibrary::of(ExecutionContext* execution, const hal::Buffer& buffer,
                                     std::string_view function) {
  const cuda::CuStorage* storage = cuda::cu_storage(buffer);
  if (!storage) return invalid_argument_error(std::string(function) + ": the tensor is not CUDA memory");
  // One library per CUDA context; the resource holds the context, so the address stays its own.
  char key[64];
  std::snprintf(key, sizeof key, "cuda.library.%p", static_cast<const void*>(storage->context().get()));
  std::shared_ptr<cuda::CuContext> context = storage->context();
  KILN_ASSIGN_OR_RETURN(Resource * resource,
                        execution->context().get_or_create(
                            key, Lifetime::kContext,
                            [&]() -> Result<std::unique_ptr<Resource>> {
                              return std::unique_ptr<Resource>(std::make_unique<CudaLibrary>(context));
                            },
                            execution));
  return static_cast<CudaLibrary*>(resource);
}

CudaLibrary::~CudaLibrary() {
  cuda::ContextScope scope(context_->target());
  if (!scope.status("the CUDA library's teardown").ok()) return;
  const cuda::Api& api = context_->api();
  for (const auto& [stream, state] : streams_) {
    if (state.blas) cublas().Destroy(state.blas);
    for (const Scratch& s : state.scratch) {
      if (s.pointer) context_->free_device(s.pointer);
    }
  }
  if (module_) api.ModuleUnload(module_);
  if (own_stream_) api.StreamDestroy(own_stream_);
}

Status CudaLibrary::run(const ExecutionContext& execution, std::string_view what,
                        const std::function<Status()>& work) {
  std::lock_guard<std::mutex> lock(mutex_);
  const cuda::Api& api = context_->api();
  KILN_RETURN_IF_ERROR(context_->lost());  // a lost device runs nothing more
  cuda::ContextScope scope(context_->target());
  KILN_RETURN_IF_ERROR(scope.status(what));
  auto* queue_stream = static_cast<cuda::CUstream>(execution.device_stream());
  if (!queue_stream && !own_stream_) {
    const cuda::CUresult made = api.StreamCreate(&own_stream_, cuda::CU_STREAM_NON_BLOCKING);
    if (made != cuda::CUDA_SUCCESS) {
      own_stream_ = nullptr;
      return cuda::cu_error("cuStreamCreate", made, what);
    }
  }
  stream_ = queue_stream ? queue_stream : own_stream_;
  state_ = &streams_[stream_];
  Status status = work();
  state_ = nullptr;
  // On a queue's stream the queue waits for the work, as for its own kernels, and a fault in it
  // marks the device lost there.
  if (queue_stream) return status.ok() ? status : status.annotate(std::string(what));
  // Waited for even after a failed step: the steps before it may still use the scratch memory.
  // An error the wait returns came from the device (a fault in a kernel of the library's or of
  // cuBLAS's), which is sticky: the device is lost, as for a fault in a queue's kernel.
  // The lost state names the fault, which a step that failed too (a launch returns the sticky
  // error once the fault has happened) would only echo.
  const cuda::CUresult waited = api.StreamSynchronize(own_stream_);
  if (waited != cuda::CUDA_SUCCESS) return context_->mark_lost(cuda::cu_error("cuStreamSynchronize", waited, what));
  return status.ok() ? status : status.annotate(std::string(what));
}

Status await_call_stream(const ExecutionContext& execution, const hal::Buffer& buffer, std::string_view function) {
  auto* stream = static_cast<cuda::CUstream>(execution.device_stream());
  const cuda::CuStorage* storage = cuda::cu_storage(buffer);
  if (!stream || !storage) return Status();
  const std::shared_ptr<cuda::CuContext>& context = storage->context();
  Status waited = cuda::call_in_context(context->target(), "cuStreamSynchronize",
                                        std::string(function) + " on the host: the work before it on its queue",
                                        [&](const cuda::Api& api) { return api.StreamSynchronize(stream); });
  return waited.ok() ? waited : context->mark_lost(waited);
}

Result<cuda::CUfunction> CudaLibrary::kernel(const char* name) {
  const cuda::Api& api = context_->api();
  if (!module_) {
    KILN_ASSIGN_OR_RETURN(DiskCache cache, DiskCache::configured(std::nullopt));
    cuda::ImageBuilder builder{std::move(cache)};
    KILN_ASSIGN_OR_RETURN(cuda::KernelImage image,
                          builder.build(cuda_library_source(), context_->arch(), "kiln library kernels"));
    KILN_ASSIGN_OR_RETURN(module_, cuda::load_module(api, image, "the library kernels"));
  }
  auto [it, added] = functions_.try_emplace(name, nullptr);
  if (added) {
    const cuda::CUresult found = api.ModuleGetFunction(&it->second, module_, name);
    if (found != cuda::CUDA_SUCCESS) {
      functions_.erase(it);
      return cuda::cu_error("cuModuleGetFunction", found, name);
    }
  }
  return it->second;
}

Status CudaLibrary::launch(const char* name, uint64_t threads, std::initializer_list<const void*> args) {
  if (threads == 0) return Status();
  KILN_ASSIGN_OR_RETURN(cuda::CUfunction function, kernel(name));
  std::vector<void*> params;
  for (const void* arg : args) params.push_back(const_cast<void*>(arg));
  const auto blocks = static_cast<unsigned>(std::min((threads + kBlockThreads - 1) / kBlockThreads, kMaxBlocks));
  const cuda::CUresult launched = context_->api().LaunchKernel(function, blocks, 1, 1, kBlockThreads, 1, 1, 0,
                                                               stream_, params.data(), nullptr);
  return launched == cuda::CUDA_SUCCESS ? Status() : cuda::cu_error("cuLaunchKernel", launched, name);
}

Result<CUdeviceptr> CudaLibrary::scratch(size_t slot, size_t bytes) {
  Scratch& s = state_->scratch[slot];
  if (s.pointer && s.bytes >= bytes) return s.pointer;
  // The steps before this one in the call use other slots. The old block goes once the stream's
  // work so far is done (the own stream is idle between calls). From the context's pool
  // (cuMemAlloc and cuMemFree would each wait for the whole device, other libraries' work
  // included).
  if (s.pointer) context_->free_device_after(s.pointer, stream_);
  s = Scratch();
  KILN_ASSIGN_OR_RETURN(CUdeviceptr pointer, context_->allocate_device(bytes, "library scratch memory"));
  s = Scratch{pointer, bytes};
  return pointer;
}

Result<cublasHandle_t> CudaLibrary::blas() {
  const Cublas& lib = cublas();
  KILN_RETURN_IF_ERROR(lib.status);
  if (!state_->blas) {
    cublasHandle_t handle = nullptr;
    if (const cublasStatus_t made = lib.Create(&handle); made != 0) {
      return unavailable_error("cuBLAS " + lib.version + " could not start: cublasCreate failed: " +
                               cublas_status_name(made));
    }
    state_->blas = handle;
  }
  if (const cublasStatus_t bound = lib.SetStream(state_->blas, stream_); bound != 0) {
    return internal_error("cublasSetStream failed: " + cublas_status_name(bound));
  }
  return state_->blas;
}

Result<GemmPlace> cuda_gemm(const hal::Buffer&) {
  const Status& loaded = cublas().status;
  KILN_ASSIGN_OR_RETURN(std::optional<GemmPlace> asked, gemm_place_asked("KILN_CUDA_GEMM", "cublas", loaded));
  return asked.value_or(loaded.ok() ? GemmPlace::kLibraryElseHost : GemmPlace::kHost);
}

Result<GemmOperands> gemm_operands(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b,
                                   const hal::Buffer& c, const char* function) {
  GemmOperands out;
  KILN_ASSIGN_OR_RETURN(out.a, device_pointer(a, function, "a"));
  KILN_ASSIGN_OR_RETURN(out.b, device_pointer(b, function, "b"));
  KILN_ASSIGN_OR_RETURN(out.c, device_pointer(c, function, "c"));
  KILN_ASSIGN_OR_RETURN(out.library, CudaLibrary::of(execution, c, function));
  return out;
}

template <typename T>
Status cublas_gemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c,
                   const GemmShape& s, T alpha, T beta) {
  KILN_ASSIGN_OR_RETURN(const GemmOperands on, gemm_operands(execution, a, b, c, "gemm"));
  CudaLibrary* library = on.library;
  const CUdeviceptr a_ptr = on.a, b_ptr = on.b, c_ptr = on.c;
  const ColumnMajorGemm g = column_major_gemm(s.transpose_a, s.transpose_b, s.m, s.n, s.k, s.lda(), s.ldb());
  return library->run(*execution, "gemm on cuda", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(cublasHandle_t handle, library->blas());
    // The products one after another on the handle's stream, each at its own offsets.
    for (int64_t p = 0; p < s.batch; ++p) {
      const T* first = reinterpret_cast<const T*>(b_ptr) + p * s.stride_b();
      const T* second = reinterpret_cast<const T*>(a_ptr) + p * s.stride_a();
      T* out = reinterpret_cast<T*>(c_ptr) + p * s.stride_c();
      cublasStatus_t done;
      if constexpr (std::is_same_v<T, float>) {
        done = cublas().Sgemm(handle, g.transpose_first, g.transpose_second, g.m, g.n, g.k, &alpha, first, g.ld_first,
                              second, g.ld_second, &beta, out, g.ldc);
      } else {
        done = cublas().Dgemm(handle, g.transpose_first, g.transpose_second, g.m, g.n, g.k, &alpha, first, g.ld_first,
                              second, g.ld_second, &beta, out, g.ldc);
      }
      if (done != 0) {
        return internal_error(std::string(std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm") +
                              " failed: " + cublas_status_name(done));
      }
    }
    return Status();
  });
}

template Status cublas_gemm<float>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&, const hal::Buffer&,
                                   const GemmShape&, float, float);
template Status cublas_gemm<double>(ExecutionContext*, const hal::Buffer&, const hal::Buffer&, const hal::Buffer&,
                                    const GemmShape&, double, double);

namespace {

// The suffix of T's kernels: its RAL code (kiln/ral/element_types.h).
template <typename T>
constexpr std::string_view type_suffix() {
  return dtype_code(*dtype_of<T>());
}

// Sorts each of `rows` rows of x (length n) through the bitonic network and writes the first
// `count` of each to `values` and/or `indices`.
template <typename T>
Status sort_on_device(ExecutionContext* execution, const char* function, const hal::Buffer& x,
                      const hal::Buffer* values, const hal::Buffer* indices, bool descending, int64_t rows, int64_t n,
                      int64_t count) {
  if (rows == 0 || n == 0) return Status();
  if (n > INT32_MAX) return invalid_argument_error(std::string(function) + ": rows longer than 2^31 - 1");
  KILN_ASSIGN_OR_RETURN(CUdeviceptr x_ptr, device_pointer(x, function, "x"));
  CUdeviceptr values_ptr = 0, indices_ptr = 0;
  if (values) {
    KILN_ASSIGN_OR_RETURN(values_ptr, device_pointer(*values, function, "the values"));
  }
  if (indices) {
    KILN_ASSIGN_OR_RETURN(indices_ptr, device_pointer(*indices, function, "the indices"));
  }
  KILN_ASSIGN_OR_RETURN(CudaLibrary * library, CudaLibrary::of(execution, x, function));
  const uint64_t row_count = static_cast<uint64_t>(rows), length = static_cast<uint64_t>(n);
  const uint64_t padded = std::bit_ceil(length), stored = static_cast<uint64_t>(count);
  uint64_t elements = 0, key_bytes = 0;
  if (__builtin_mul_overflow(row_count, padded, &elements) ||
      __builtin_mul_overflow(elements, sizeof(T) + sizeof(uint32_t), &key_bytes)) {
    return invalid_argument_error(std::string(function) + ": the tensor is too large to sort");
  }
  const int flag = descending ? 1 : 0;
  const std::string suffix(type_suffix<T>());
  const std::string load = "kiln_sort_load_" + suffix, step = "kiln_sort_step_" + suffix,
                    store = "kiln_sort_store_" + suffix;
  return library->run(*execution, std::string(function) + " on cuda", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(CUdeviceptr keys, library->scratch(0, elements * sizeof(T)));
    KILN_ASSIGN_OR_RETURN(CUdeviceptr idx, library->scratch(1, elements * sizeof(uint32_t)));
    KILN_RETURN_IF_ERROR(library->launch(load.c_str(), elements, {&x_ptr, &keys, &idx, &row_count, &length, &padded}));
    for (const auto& [k, j] : bitonic_stages(padded)) {
      KILN_RETURN_IF_ERROR(
          library->launch(step.c_str(), elements, {&keys, &idx, &row_count, &length, &padded, &k, &j, &flag}));
    }
    return library->launch(store.c_str(), row_count * stored,
                           {&keys, &idx, &values_ptr, &indices_ptr, &row_count, &padded, &stored});
  });
}

template <typename T, int N>
Status sort_cuda(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_rows("sort", x, "x", y, "y", true));
  return sort_on_device<T>(execution, "sort", buffer_of(x), &buffer_of(y), nullptr, descending != 0,
                           row_count(x), row_length(x), row_length(x));
}

template <typename T, int N>
Status argsort_cuda(ExecutionContext* execution, MemRef<T, N> x, MemRef<int32_t, N> idx, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_argsort(x, idx));
  return sort_on_device<T>(execution, "argsort", buffer_of(x), nullptr, &buffer_of(idx),
                           descending != 0, row_count(x), row_length(x), row_length(x));
}

template <typename T, int N>
Status topk_cuda(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> values, MemRef<int32_t, N> indices) {
  KILN_ASSIGN_OR_RETURN(const int64_t k, check_topk(x, values, indices));
  if (k == 0) return Status();
  return sort_on_device<T>(execution, "topk", buffer_of(x), &buffer_of(values),
                           &buffer_of(indices), true, row_count(x), row_length(x), k);
}

// Fills r with the numbers of `kernel` (kiln_random_{uniform,normal}_{f32,f64,f16,bf16}), whose
// last two arguments are `p` and `q` (P: f64 for f64, else f32).
template <typename T, typename P, int N>
Status random_on_device(ExecutionContext* execution, const char* function, MemRef<T, N> r, P p, P q,
                        int64_t call_site) {
  const uint64_t count = static_cast<uint64_t>(r.element_count());
  if (count == 0) return Status();
  const hal::Buffer& buffer = buffer_of(r);
  KILN_ASSIGN_OR_RETURN(CUdeviceptr out, device_pointer(buffer, function, "r"));
  KILN_ASSIGN_OR_RETURN(CudaLibrary * library, CudaLibrary::of(execution, buffer, function));
  const uint32_t key0 = static_cast<uint32_t>(execution->seed()), key1 = static_cast<uint32_t>(execution->seed() >> 32);
  const uint32_t site = static_cast<uint32_t>(call_site), run = static_cast<uint32_t>(execution->run());
  // One thread per Philox block: four f32 (f16, bf16) or two f64 elements.
  const uint64_t threads = std::is_same_v<P, float> ? (count + 3) / 4 : (count + 1) / 2;
  const std::string kernel = std::string("kiln_") + function + "_" + std::string(type_suffix<T>());
  return library->run(*execution, std::string(function) + " on cuda", [&]() {
    return library->launch(kernel.c_str(), threads, {&out, &count, &key0, &key1, &site, &run, &p, &q});
  });
}

template <typename T, int N>
Status uniform_cuda(ExecutionContext* execution, MemRef<T, N> r, T lo, T hi, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_uniform_range(lo, hi));
  return random_on_device<T, T, N>(execution, "random_uniform", r, lo, hi, call_site);
}

template <typename T, int N>
Status uniform_cuda_narrow(ExecutionContext* execution, MemRef<T, N> r, float lo, float hi, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_uniform_range(lo, hi));
  return random_on_device<T, float, N>(execution, "random_uniform", r, lo, hi, call_site);
}

template <typename T, int N>
Status normal_cuda_narrow(ExecutionContext* execution, MemRef<T, N> r, float mean, float std_dev, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_normal_parameters(mean, std_dev));
  return random_on_device<T, float, N>(execution, "random_normal", r, mean, std_dev, call_site);
}

template <typename T, int N>
Status normal_cuda(ExecutionContext* execution, MemRef<T, N> r, T mean, T std_dev, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_normal_parameters(mean, std_dev));
  return random_on_device<T, T, N>(execution, "random_normal", r, mean, std_dev, call_site);
}

}  // namespace

Status register_cuda_library(Registry& registry) {
  KILN_RETURN_IF_ERROR((for_each_element_type([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"sort", "cuda", &sort_cuda<T, N>, Memory::kDeviceStream>()));
    KILN_RETURN_IF_ERROR(registry.add(make_function<"argsort", "cuda", &argsort_cuda<T, N>, Memory::kDeviceStream>()));
    return registry.add(make_function<"topk", "cuda", &topk_cuda<T, N>, Memory::kDeviceStream>());
  })));
  KILN_RETURN_IF_ERROR((for_each_type_and_rank<Half, BFloat16>([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(
        registry.add(make_function<"random_uniform", "cuda", &uniform_cuda_narrow<T, N>, Memory::kDeviceStream>()));
    return registry.add(make_function<"random_normal", "cuda", &normal_cuda_narrow<T, N>, Memory::kDeviceStream>());
  })));
  return for_each_type_and_rank<float, double>([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"random_uniform", "cuda", &uniform_cuda<T, N>, Memory::kDeviceStream>()));
    return registry.add(make_function<"random_normal", "cuda", &normal_cuda<T, N>, Memory::kDeviceStream>());
  });
}

}  // namespace kiln::ral::library
