#include "drivers/cpu/cpu_device.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "drivers/cpu/cpu_compiler.h"
#include "drivers/cpu/cpu_executable.h"
#include "drivers/cpu/cpu_queue.h"
#include "kiln/base/settings.h"
#include "kiln/base/env.h"

namespace kiln::cpu {

hal::DeviceInfo CpuDevice::host_info(const std::string& driver, std::string description,
                                     std::string format) {
  hal::DeviceInfo info;
  info.driver = driver;
  info.ordinal = 0;
  info.name = driver + ":0";
  info.description = std::move(description);
  hal::DeviceCapabilities& caps = info.capabilities;
  caps.compute_units = std::max(1u, std::thread::hardware_concurrency());
  long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  caps.total_memory = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
  caps.max_allocation_size = caps.total_memory ? caps.total_memory : (uint64_t{1} << 40);
  caps.max_workgroup_size = 1;
  caps.fp64 = true;
  caps.fp16 = false;
  caps.local_memory_size = 0;
  caps.unified_memory = true;
  // A hand-off to the queue's thread and back costs 1-10 µs; a few thousand stores cost about one.
  caps.max_caller_stores = int64_t{1} << 13;
  caps.executable_formats = {std::move(format)};
  return info;
}

namespace {

// How many compiles of one program's parts run side by side: KILN_CC_JOBS, else the cores this
// process may run on.
Result<size_t> compile_jobs() {
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> jobs, setting_uint("KILN_CC_JOBS"));
  if (jobs) return static_cast<size_t>(*jobs);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<size_t>(std::max(1, CPU_COUNT(&set)));
  return static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

Status CpuDevice::check_settings() {
  KILN_RETURN_IF_ERROR(setting_uint("KILN_CPU_THREADS").status());
  KILN_RETURN_IF_ERROR(setting_uint("KILN_CC_JOBS").status());
  KILN_RETURN_IF_ERROR(setting_choice("KILN_CPU_AFFINITY").status());
  return setting_uint("KILN_CC_TIMEOUT").status();
}

Result<uint32_t> CpuDevice::thread_count(const hal::DeviceOptions& options,
                                         uint32_t default_threads) {
  if (options.worker_threads) {
    if (*options.worker_threads == 0 || *options.worker_threads > 1024) {
      return invalid_argument_error("worker_threads must be in [1, 1024], got " +
                                    std::to_string(*options.worker_threads));
    }
    return *options.worker_threads;
  }
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> env, setting_uint("KILN_CPU_THREADS"));
  return env ? static_cast<uint32_t>(*env) : default_threads;
}

Result<std::shared_ptr<ThreadPool>> CpuDevice::thread_pool(const hal::DeviceOptions& options,
                                                           uint32_t default_threads) {
  KILN_ASSIGN_OR_RETURN(uint32_t threads, thread_count(options, default_threads));
  Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(threads);
  if (!pool.ok()) {
    return pool.status().annotate(options.worker_threads ? "DeviceOptions::worker_threads"
                                                         : "the cpu device's workgroup threads (KILN_CPU_THREADS)");
  }
  return pool;
}

void CpuDevice::apply_caller_stores(const hal::DeviceOptions& options, hal::DeviceInfo& info) {
  if (options.max_caller_stores) info.capabilities.max_caller_stores = std::max<int64_t>(0, *options.max_caller_stores);
}

Result<std::shared_ptr<CpuDevice>> CpuDevice::create(hal::DeviceInfo info,
                                                     const hal::DeviceOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ThreadPool> pool, thread_pool(options, info.capabilities.compute_units));
  apply_caller_stores(options, info);
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> timeout_s, setting_uint("KILN_CC_TIMEOUT"));
  std::string compiler = options.c_compiler.value_or(env_string("KILN_CC").value_or("cc"));
  std::string flags = env_string("KILN_CFLAGS").value_or("");
  KILN_ASSIGN_OR_RETURN(DiskCache cache, DiskCache::configured(options.cache_dir));
  KILN_ASSIGN_OR_RETURN(size_t jobs, compile_jobs());
  auto cc = std::make_unique<CpuCompiler>(std::move(compiler), std::move(flags), std::move(cache),
                                          static_cast<int64_t>(timeout_s.value_or(600)) * 1000, jobs);
  return std::make_shared<CpuDevice>(std::move(info), std::move(pool),
                                     std::make_unique<CCompiler>(std::move(cc)), options.spread_queues);
}

CpuDevice::CpuDevice(hal::DeviceInfo info, std::shared_ptr<ThreadPool> pool,
                     std::unique_ptr<HostCompiler> compiler, std::optional<bool> spread_queues)
    : info_(std::move(info)),
      allocator_(tag(), info_.capabilities.max_allocation_size),
      pool_(std::move(pool)),
      compiler_(std::move(compiler)),
      queue_cores_(spread_queues) {
  info_.capabilities.compute_units = pool_->thread_count();
  info_.capabilities.executable_formats = compiler_->formats();
}

Result<hal::QueueRef> CpuDevice::create_queue(const std::string& name) {
  uint32_t index = queue_count_.fetch_add(1);
  std::string queue_name = name.empty() ? info_.name + "/q" + std::to_string(index) : name;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CpuQueue> queue, CpuQueue::create(std::move(queue_name), tag(), pool_,
                                                                                 info_.capabilities.max_caller_stores > 0));
  KILN_RETURN_IF_ERROR(queue_cores_.place(queue));
  return hal::QueueRef(std::move(queue));
}

Result<hal::ExecutableRef> CpuDevice::compile_executable(const hal::ExecutableSource& source) {
  const std::vector<std::string>& formats = info_.capabilities.executable_formats;
  if (std::find(formats.begin(), formats.end(), source.format) == formats.end()) {
    std::string known;
    for (const std::string& f : formats) known += (known.empty() ? "\"" : ", \"") + f + "\"";
    return unimplemented_error("executable '" + source.label + "': format '" + source.format +
                               "' is not supported by device " + info_.name + " (it builds " +
                               known + ")");
  }
  if (source.exports.empty()) {
    return invalid_argument_error("executable '" + source.label + "' declares no exports");
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<HostExecutable> executable,
                        compiler_->compile(source, tag()));
  return hal::ExecutableRef(std::move(executable));
}

}  // namespace kiln::cpu
