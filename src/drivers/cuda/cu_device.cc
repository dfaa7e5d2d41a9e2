#include "drivers/cuda/cu_device.h"

#include <algorithm>

#include "drivers/cuda/cu_queue.h"

namespace kiln::cuda {

Result<std::shared_ptr<CuDevice>> CuDevice::create(const Api& api, CuDeviceRecord record,
                                                   const hal::DeviceOptions& options) {
  KILN_ASSIGN_OR_RETURN(DiskCache cache, DiskCache::configured(options.cache_dir));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CuContext> context, CuContext::create(api, std::move(record)));
  return std::make_shared<CuDevice>(std::move(context), std::move(cache));
}

Result<hal::QueueRef> CuDevice::create_queue(const std::string& name) {
  uint32_t index = queue_count_.fetch_add(1);
  std::string queue_name = name.empty() ? info().name + "/q" + std::to_string(index) : name;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CuQueue> queue, CuQueue::create(std::move(queue_name), tag(), context_));
  return hal::QueueRef(std::move(queue));
}

Result<hal::ExecutableRef> CuDevice::compile_executable(const hal::ExecutableSource& source) {
  const std::vector<std::string>& formats = info().capabilities.executable_formats;
  if (std::find(formats.begin(), formats.end(), source.format) == formats.end()) {
    return unimplemented_error("executable '" + source.label + "': format '" + source.format +
                               "' is not supported by device " + info().name + " (it builds \"cuda-c\")");
  }
  if (source.exports.empty()) {
    return invalid_argument_error("executable '" + source.label + "' declares no exports");
  }
  return compiler_.compile(source, tag());
}

}  // namespace kiln::cuda
