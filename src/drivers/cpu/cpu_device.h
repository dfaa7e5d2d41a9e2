// The CPU device: host memory, a thread pool for workgroups, a queue worker per queue, and a
// host compiler: the system C compiler for the `cpu` driver, the loop-IR interpreter for `interp`.
#pragma once

#include <memory>

#include "drivers/cpu/cpu_allocator.h"
#include "drivers/cpu/host_executable.h"
#include "drivers/cpu/queue_cores.h"
#include "drivers/cpu/thread_pool.h"
#include "kiln/hal/device.h"

namespace kiln::cpu {

class CpuDevice final : public hal::Device {
 public:
  // Reads defaults from KILN_CPU_THREADS, KILN_CC, KILN_CFLAGS, KILN_CACHE_DIR and
  // KILN_CC_TIMEOUT (seconds); a malformed value is INVALID_ARGUMENT naming the variable.
  static Result<std::shared_ptr<CpuDevice>> create(hal::DeviceInfo info,
                                                   const hal::DeviceOptions& options);
  // What a device on this machine's processors reports: its cores, memory and capabilities, with
  // `driver`'s name ("<driver>:0"), `description` and one executable format.
  static hal::DeviceInfo host_info(const std::string& driver, std::string description,
                                   std::string format);
  // The settings a CPU device reads (KILN_CPU_THREADS, KILN_CC_TIMEOUT, KILN_CPU_AFFINITY): OK, or the first
  // malformed one's error. The cpu and interp drivers are unavailable while one is malformed.
  static Status check_settings();
  // The workgroup thread count: options, else KILN_CPU_THREADS, else `default_threads`.
  static Result<uint32_t> thread_count(const hal::DeviceOptions& options, uint32_t default_threads);
  // The workgroup pool of thread_count() threads, the queue's thread that helps among them (it
  // starts one worker fewer); RESOURCE_EXHAUSTED naming the setting when the system cannot start
  // that many.
  static Result<std::shared_ptr<ThreadPool>> thread_pool(const hal::DeviceOptions& options,
                                                         uint32_t default_threads);
  // DeviceOptions::max_caller_stores into `info`'s capabilities, where set.
  static void apply_caller_stores(const hal::DeviceOptions& options, hal::DeviceInfo& info);

  const hal::DeviceInfo& info() const override { return info_; }
  hal::Allocator& allocator() override { return allocator_; }
  Result<hal::QueueRef> create_queue(const std::string& name) override;
  Result<hal::ExecutableRef> compile_executable(const hal::ExecutableSource& source) override;
  // On the workgroup pool, the caller helping.
  void host_parallel(uint64_t parts, const std::function<void(uint64_t)>& part) override {
    pool_->run_parts(parts, part);
  }
  uint32_t host_threads() const override { return pool_->thread_count(); }

  // `info.capabilities.executable_formats` is taken from the compiler; `spread_queues` is
  // DeviceOptions::spread_queues.
  CpuDevice(hal::DeviceInfo info, std::shared_ptr<ThreadPool> pool, std::unique_ptr<HostCompiler> compiler,
            std::optional<bool> spread_queues);

 private:
  hal::DeviceInfo info_;
  CpuAllocator allocator_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<HostCompiler> compiler_;
  std::atomic<uint32_t> queue_count_{0};
  QueueCores queue_cores_;
};

}  // namespace kiln::cpu
