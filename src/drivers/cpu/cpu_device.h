// The CPU device: host memory, a thread pool for workgroups, a queue worker per queue, and the
// system C compiler.
#pragma once

#include <memory>

#include "drivers/cpu/cpu_allocator.h"
#include "drivers/cpu/cpu_compiler.h"
#include "drivers/cpu/thread_pool.h"
#include "kiln/hal/device.h"

namespace kiln::cpu {

class CpuDevice final : public hal::Device {
 public:
  // Reads defaults from KILN_CPU_THREADS, KILN_CC, KILN_CFLAGS, KILN_CACHE_DIR and
  // KILN_CC_TIMEOUT (seconds); a malformed value is INVALID_ARGUMENT naming the variable.
  static Result<std::shared_ptr<CpuDevice>> create(hal::DeviceInfo info,
                                                   const hal::DeviceOptions& options);

  const hal::DeviceInfo& info() const override { return info_; }
  hal::Allocator& allocator() override { return allocator_; }
  Result<hal::QueueRef> create_queue(const std::string& name) override;
  Result<hal::ExecutableRef> compile_executable(const hal::ExecutableSource& source) override;

  CpuDevice(hal::DeviceInfo info, uint32_t threads, std::unique_ptr<CpuCompiler> compiler);
  const CpuCompiler& compiler() const { return *compiler_; }

 private:
  hal::DeviceInfo info_;
  CpuAllocator allocator_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<CpuCompiler> compiler_;
  std::atomic<uint32_t> queue_count_{0};
};

}  // namespace kiln::cpu
