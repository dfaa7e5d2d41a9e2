// An OpenCL device: one cl_context with its allocator, queues and compiler.
#pragma once

#include <atomic>
#include <memory>

#include "drivers/opencl/cl_allocator.h"
#include "drivers/opencl/cl_context.h"
#include "drivers/opencl/cl_executable.h"
#include "kiln/hal/device.h"

namespace kiln::opencl {

class ClDevice final : public hal::Device {
 public:
  // The disk cache is options.cache_dir, else KILN_CACHE_DIR / the default directory
  // (DiskCache::configured: shared when KILN_CACHE_SHARED=1).
  static Result<std::shared_ptr<ClDevice>> create(const Api& api, ClDeviceRecord record,
                                                  const hal::DeviceOptions& options);
  ClDevice(std::shared_ptr<ClContext> context, DiskCache cache, std::optional<bool> device_waits)
      : context_(std::move(context)),
        allocator_(context_, tag()),
        compiler_(context_, std::move(cache)),
        device_waits_(device_waits) {}

  const hal::DeviceInfo& info() const override { return context_->record().info; }
  hal::Allocator& allocator() override { return allocator_; }
  Result<hal::QueueRef> create_queue(const std::string& name) override;
  Result<hal::ExecutableRef> compile_executable(const hal::ExecutableSource& source) override;
  const ClCompiler& compiler() const { return compiler_; }
  const ClDeviceRecord& record() const { return context_->record(); }

 private:
  std::shared_ptr<ClContext> context_;
  ClAllocator allocator_;
  ClCompiler compiler_;
  std::optional<bool> device_waits_;  // DeviceOptions::device_waits
  std::atomic<uint32_t> queue_count_{0};
};

}  // namespace kiln::opencl
