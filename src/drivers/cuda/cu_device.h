// A CUDA device: the device's primary context with its allocator, queues and compiler.
#pragma once

#include <atomic>
#include <memory>

#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_executable.h"
#include "kiln/hal/device.h"

namespace kiln::cuda {

class CuDevice final : public hal::Device {
 public:
  // The disk cache of kernel images is options.cache_dir, else KILN_CACHE_DIR / the default
  // (DiskCache::configured: shared when KILN_CACHE_SHARED=1).
  static Result<std::shared_ptr<CuDevice>> create(const Api& api, CuDeviceRecord record,
                                                  const hal::DeviceOptions& options);
  CuDevice(std::shared_ptr<CuContext> context, DiskCache cache)
      : context_(std::move(context)), allocator_(context_, tag()), compiler_(context_, std::move(cache)) {}

  const hal::DeviceInfo& info() const override { return context_->record().info; }
  hal::Allocator& allocator() override { return allocator_; }
  Result<hal::QueueRef> create_queue(const std::string& name) override;
  Result<hal::ExecutableRef> compile_executable(const hal::ExecutableSource& source) override;

 private:
  std::shared_ptr<CuContext> context_;
  CuAllocator allocator_;
  CuCompiler compiler_;
  std::atomic<uint32_t> queue_count_{0};
};

}  // namespace kiln::cuda
