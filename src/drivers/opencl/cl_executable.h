// OpenCL executables and the compiler that builds them: clCreateProgramWithSource +
// clBuildProgram, with the program binary (CL_PROGRAM_BINARIES) cached on disk by the source,
// the build options, and the device, driver and platform identity; a warm build uses
// clCreateProgramWithBinary and falls back to the source when the binary is refused.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/disk_cache.h"
#include "drivers/opencl/cl_context.h"
#include "kiln/hal/executable.h"

namespace kiln::opencl {

// A built cl_program; shared by the executables built from the same source.
class ClProgram {
 public:
  ClProgram(std::shared_ptr<ClContext> context, cl_program program)
      : context_(std::move(context)), program_(program) {}
  ~ClProgram() { context_->api().ReleaseProgram(program_); }
  cl_program get() const { return program_; }

 private:
  std::shared_ptr<ClContext> context_;
  cl_program program_;
};

// One kernel object per export. clSetKernelArg is not thread-safe for one cl_kernel, so a
// dispatch holds `mutex` from setting the arguments until the kernel is enqueued.
struct ClKernel {
  cl_kernel kernel = nullptr;
  // Work items per work group in x: 1, or for an export with any_local_size a size chosen from
  // the kernel's limits (choose_local_size in cl_executable.cc).
  size_t local_size = 1;
  std::mutex mutex;
};

class ClExecutable final : public hal::Executable {
 public:
  ClExecutable(const void* device_tag, std::vector<hal::ExportInfo> exports,
               std::shared_ptr<ClProgram> program, std::vector<std::unique_ptr<ClKernel>> kernels,
               const Api& api)
      : Executable(device_tag, std::move(exports)),
        program_(std::move(program)),
        kernels_(std::move(kernels)),
        api_(api) {}
  ~ClExecutable() override;
  ClKernel& kernel(uint32_t ordinal) const { return *kernels_[ordinal]; }

 private:
  std::shared_ptr<ClProgram> program_;
  std::vector<std::unique_ptr<ClKernel>> kernels_;
  const Api& api_;
};

struct ClCompilerStats {
  uint64_t source_builds = 0;
  uint64_t binary_loads = 0;
  uint64_t memory_hits = 0;
  uint64_t refused_binaries = 0;
};

// Builds `full_source` (the ABI already prepended) for the context's device with
// ClCompiler::kBuildOptions; INVALID_ARGUMENT with the build log when it does not build. `label`
// names it in messages.
Result<cl_program> build_program_from_source(const ClContext& context, const std::string& full_source,
                                             const std::string& label);

class ClCompiler {
 public:
  ClCompiler(std::shared_ptr<ClContext> context, DiskCache cache)
      : context_(std::move(context)), cache_(std::move(cache)) {}

  // INVALID_ARGUMENT with the build log when the source does not build; UNIMPLEMENTED when it
  // enables cl_khr_fp64 on a device without it; NOT_FOUND for an export that is not a kernel.
  Result<hal::ExecutableRef> compile(const hal::ExecutableSource& source, const void* device_tag);
  ClCompilerStats stats() const;

  // Build options of every program (part of the cache key).
  static constexpr const char* kBuildOptions = "";

 private:
  Result<std::shared_ptr<ClProgram>> build(const hal::ExecutableSource& source);
  Result<cl_program> build_from_binary(const std::string& binary);

  std::shared_ptr<ClContext> context_;
  DiskCache cache_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<ClProgram>> loaded_;  // guarded by mutex_
  ClCompilerStats stats_;                                               // guarded by mutex_
};

}  // namespace kiln::opencl
