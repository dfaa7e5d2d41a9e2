#include "drivers/cpu/cpu_device.h"

#include "drivers/cpu/cpu_executable.h"
#include "drivers/cpu/cpu_queue.h"
#include "kiln/base/env.h"

namespace kiln::cpu {

Result<std::shared_ptr<CpuDevice>> CpuDevice::create(hal::DeviceInfo info,
                                                     const hal::DeviceOptions& options) {
  uint32_t threads = info.capabilities.compute_units;
  if (options.worker_threads) {
    if (*options.worker_threads == 0 || *options.worker_threads > 1024) {
      return invalid_argument_error("worker_threads must be in [1, 1024], got " +
                                    std::to_string(*options.worker_threads));
    }
    threads = *options.worker_threads;
  } else {
    KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> env, env_uint("KILN_CPU_THREADS", 1, 1024));
    if (env) threads = static_cast<uint32_t>(*env);
  }
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> timeout_s, env_uint("KILN_CC_TIMEOUT", 1, 86400));
  std::string compiler = options.c_compiler.value_or(env_string("KILN_CC").value_or("cc"));
  std::string flags = env_string("KILN_CFLAGS").value_or("");
  std::string cache_dir = options.cache_dir.value_or(DiskCache::default_dir());
  auto cc = std::make_unique<CpuCompiler>(std::move(compiler), std::move(flags),
                                          DiskCache(std::move(cache_dir)),
                                          static_cast<int64_t>(timeout_s.value_or(600)) * 1000);
  info.capabilities.compute_units = threads;
  return std::make_shared<CpuDevice>(std::move(info), threads, std::move(cc));
}

CpuDevice::CpuDevice(hal::DeviceInfo info, uint32_t threads, std::unique_ptr<CpuCompiler> compiler)
    : info_(std::move(info)),
      allocator_(tag(), info_.capabilities.max_allocation_size),
      pool_(std::make_shared<ThreadPool>(threads)),
      compiler_(std::move(compiler)) {}

Result<hal::QueueRef> CpuDevice::create_queue(const std::string& name) {
  uint32_t index = queue_count_.fetch_add(1);
  std::string queue_name = name.empty() ? info_.name + "/q" + std::to_string(index) : name;
  return hal::QueueRef(std::make_shared<CpuQueue>(std::move(queue_name), tag(), pool_));
}

Result<hal::ExecutableRef> CpuDevice::compile_executable(const hal::ExecutableSource& source) {
  if (source.format != "c") {
    return unimplemented_error("executable '" + source.label + "': format '" + source.format +
                               "' is not supported by the CPU device (it builds \"c\")");
  }
  if (source.exports.empty()) {
    return invalid_argument_error("executable '" + source.label + "' declares no exports");
  }
  for (size_t i = 0; i < source.exports.size(); ++i) {
    const std::string& name = source.exports[i].name;
    bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!identifier) {
      return invalid_argument_error("executable '" + source.label + "': export name '" + name +
                                    "' is not a C identifier");
    }
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedLibrary> library,
                        compiler_->build(source.source, source.label));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CpuExecutable> executable,
                        CpuExecutable::load(tag(), source.exports, std::move(library)));
  return hal::ExecutableRef(std::move(executable));
}

}  // namespace kiln::cpu
