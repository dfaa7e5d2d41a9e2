// The library functions on the cuda device's own memory (ral::Memory::kDevice): gemm through
// cuBLAS, random numbers and sorting through kiln's kernels (cuda_kernels.h). Each call runs on
// the CudaLibrary of the buffers' CUDA context, a ral::Context resource holding the kernels'
// module, and per stream a cuBLAS handle and scratch memory. A call the runtime runs in a queue's
// order (ExecutionContext::device_stream) puts its work on that queue's stream and returns;
// otherwise it runs on the library's own stream and returns when its device work has finished,
// as a device-memory function must.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "drivers/cuda/cu_context.h"
#include "kiln/hal/buffer.h"
#include "kiln/ral/context.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/cublas.h"
#include "ral/library/gemm_shape.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

class CudaLibrary final : public Resource {
 public:
  // The library of the CUDA context that holds `buffer`, made in `execution`'s ral::Context on
  // first use. INVALID_ARGUMENT naming `function` when the buffer is not CUDA memory.
  static Result<CudaLibrary*> of(ExecutionContext* execution, const hal::Buffer& buffer, std::string_view function);

  explicit CudaLibrary(std::shared_ptr<cuda::CuContext> context) : context_(std::move(context)) {}
  ~CudaLibrary() override;

  // Runs `work` with the context pushed, one call at a time, on the stream of the call at hand
  // (ExecutionContext::device_stream) without waiting for it, or where there is none on the
  // library's own stream, which it then waits for: the first error, annotated with `what`.
  Status run(const ExecutionContext& execution, std::string_view what, const std::function<Status()>& work);

  const std::shared_ptr<cuda::CuContext>& context() const { return context_; }

  // Only inside run's work:
  // The stream the work goes on (the queue's, or the library's own).
  cuda::CUstream stream() const { return stream_; }
  // Launches kernel `name` of cuda_library_source() over `threads` threads (none when 0).
  Status launch(const char* name, uint64_t threads, std::initializer_list<const void*> args);
  // At least `bytes` of device memory in scratch slot `slot` (0 or 1) of the stream, kept for the
  // stream's later calls and grown when too small, from the context's memory pool (CuContext::
  // allocate_device: no cuMemAlloc, which waits for the whole device); what it replaces is freed
  // after the work already on the stream.
  Result<cuda::CUdeviceptr> scratch(size_t slot, size_t bytes);
  // The stream's cuBLAS handle (made on first use), in cuBLAS's default math mode: f32 products
  // stay f32 (TF32 only where NVIDIA_TF32_OVERRIDE=1 asks for it, NVIDIA's switch for every
  // library in the process), and the narrow products use the tensor cores with the f32 sums
  // their compute type keeps.
  Result<cublasHandle_t> blas();

 private:
  Result<cuda::CUfunction> kernel(const char* name);

  struct Scratch {
    cuda::CUdeviceptr pointer = 0;
    size_t bytes = 0;
  };
  // What the calls on one stream use, so that calls on two queues' streams never share them.
  struct StreamState {
    cublasHandle_t blas = nullptr;
    Scratch scratch[2];
  };

  std::shared_ptr<cuda::CuContext> context_;
  std::mutex mutex_;  // one run at a time; guards everything below
  cuda::CUstream own_stream_ = nullptr;  // for calls without a queue's stream
  cuda::CUmodule module_ = nullptr;
  std::unordered_map<std::string, cuda::CUfunction> functions_;  // of module_, by name
  std::unordered_map<cuda::CUstream, StreamState> streams_;      // by stream, the own one's too
  // During run: the stream it runs on and its state.
  cuda::CUstream stream_ = nullptr;
  StreamState* state_ = nullptr;
};

// For a call that reads or writes `buffer`'s device memory on the host (a product over mapped
// buffers) in a queue's order (ExecutionContext::device_stream): waits until the work before it
// on that stream is over, on the thread that issues it. Nothing for a call without a stream (its
// waits are met).
Status await_call_stream(const ExecutionContext& execution, const hal::Buffer& buffer, std::string_view function);

// The device address of `buffer`; INVALID_ARGUMENT naming `function` and `operand` when it is
// not CUDA memory.
Result<cuda::CUdeviceptr> device_pointer(const hal::Buffer& buffer, const char* function, const char* operand);

// The device addresses of a product's a, b and c, and the library of c's CUDA context, for
// `function` (gemm, qgemm): INVALID_ARGUMENT naming the function and the operand that is not CUDA
// memory.
struct GemmOperands {
  cuda::CUdeviceptr a = 0, b = 0, c = 0;
  CudaLibrary* library = nullptr;
};
Result<GemmOperands> gemm_operands(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b,
                                   const hal::Buffer& c, const char* function);

// Where gemm runs for the cuda device: KILN_CUDA_GEMM (`cublas` or `host`) when set, else cuBLAS
// where it loads and the host otherwise. INVALID_ARGUMENT naming the variable for another value;
// UNAVAILABLE saying why when `cublas` is asked for and cuBLAS cannot be loaded.
Result<GemmPlace> cuda_gemm(const hal::Buffer& c);

// c = alpha * op(a) @ op(b) + beta * c for each of the s.batch products (row-major) through
// cuBLAS on the buffers' device, one cublasXgemm per product on the execution's stream.
// UNAVAILABLE when cuBLAS cannot be loaded.
template <typename T>
Status cublas_gemm(ExecutionContext* execution, const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c,
                   const GemmShape& s, T alpha, T beta);

}  // namespace kiln::ral::library
