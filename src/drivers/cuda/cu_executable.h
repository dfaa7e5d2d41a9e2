// CUDA executables and the compiler that makes them: the "cuda-c" source becomes an image
// (ImageBuilder: a cubin for the device's exact architecture, else PTX, from the disk cache when
// it can) and the image a CUmodule, loaded once per context and source: executables built from
// the same source share it. This happens when the runtime links a program (compile_executable),
// never on a queue.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_image_builder.h"
#include "kiln/hal/executable.h"

namespace kiln::cuda {

// A loaded module; unloaded with the last executable using it.
class CuModule {
 public:
  CuModule(std::shared_ptr<CuContext> context, CUmodule module)
      : context_(std::move(context)), module_(module) {}
  ~CuModule();
  CuModule(const CuModule&) = delete;
  CuModule& operator=(const CuModule&) = delete;
  CUmodule get() const { return module_; }

 private:
  std::shared_ptr<CuContext> context_;
  CUmodule module_;
};

struct CuKernel {
  CUfunction function = nullptr;
  // Threads per block in x: 1, or for an export with any_local_size the block size chosen from
  // the kernel's limit (choose_block_size in cu_executable.cc).
  unsigned block_size = 1;
  // Whether its module's source calls printf (value tracing does): see CuQueue::finish.
  bool prints = false;
  // hal::ExportInfo's: whether it can fail other than by its entry check of the bindings'
  // sizes, and the sizes that check asks for. CuQueue gives a status slot only to actions that
  // may fail.
  bool may_fail = true;
  std::vector<uint64_t> min_bytes;
};

class CuExecutable final : public hal::Executable {
 public:
  CuExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
               std::shared_ptr<CuModule> module, std::vector<CuKernel> kernels)
      : Executable(device_tag, std::move(exports)), module_(std::move(module)), kernels_(std::move(kernels)) {}
  const CuKernel& kernel(uint32_t ordinal) const { return kernels_[ordinal]; }

 private:
  std::shared_ptr<CuModule> module_;
  std::vector<CuKernel> kernels_;
};

class CuCompiler {
 public:
  CuCompiler(std::shared_ptr<CuContext> context, DiskCache cache)
      : context_(std::move(context)), images_(std::move(cache)) {}

  // INVALID_ARGUMENT with NVRTC's log when the source does not build; NOT_FOUND for an export
  // the module does not have; the driver's error when it refuses the image.
  Result<hal::ExecutableRef> compile(const hal::ExecutableSource& source, const void* device_tag);
  const ImageBuilder& images() const { return images_; }

  // Device printf writes into a circular buffer (1 MiB by default) that overwrites its oldest
  // lines until a synchronization flushes it. A queue flushes after each action whose kernels
  // print, so one action may print this much before its first lines are lost: at kiln's 16 trace
  // lines per statement and ~150 bytes a line, about 27,000 traced statements.
  static constexpr size_t kPrintfBufferBytes = size_t{64} << 20;

 private:
  Result<std::shared_ptr<CuModule>> load(const hal::ExecutableSource& source);
  // Grows the context's printf buffer to kPrintfBufferBytes, before the first kernel that prints
  // is loaded (CUDA takes the limit only before such a kernel has run). Where CUDA refuses it (a
  // kernel of another library's printed first), warns once and keeps the buffer there is.
  Status reserve_printf_buffer();

  std::shared_ptr<CuContext> context_;
  ImageBuilder images_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<CuModule>> loaded_;  // by source; guarded by mutex_
};

}  // namespace kiln::cuda
