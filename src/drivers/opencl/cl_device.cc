#include "drivers/opencl/cl_device.h"

#include <algorithm>

#include "drivers/opencl/cl_queue.h"

namespace kiln::opencl {

Result<std::shared_ptr<ClDevice>> ClDevice::create(const Api& api, ClDeviceRecord record,
                                                   const hal::DeviceOptions& options) {
  KILN_ASSIGN_OR_RETURN(DiskCache cache, DiskCache::configured(options.cache_dir));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ClContext> context, ClContext::create(api, std::move(record)));
  return std::make_shared<ClDevice>(std::move(context), std::move(cache), options.device_waits);
}

Result<hal::QueueRef> ClDevice::create_queue(const std::string& name) {
  uint32_t index = queue_count_.fetch_add(1);
  std::string queue_name = name.empty() ? info().name + "/q" + std::to_string(index) : name;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ClQueue> queue,
                        ClQueue::create(std::move(queue_name), tag(), context_, device_waits_));
  return hal::QueueRef(std::move(queue));
}

Result<hal::ExecutableRef> ClDevice::compile_executable(const hal::ExecutableSource& source) {
  const std::vector<std::string>& formats = info().capabilities.executable_formats;
  if (std::find(formats.begin(), formats.end(), source.format) == formats.end()) {
    return unimplemented_error("executable '" + source.label + "': format '" + source.format +
                               "' is not supported by device " + info().name +
                               " (it builds \"opencl-c\")");
  }
  if (source.exports.empty()) {
    return invalid_argument_error("executable '" + source.label + "' declares no exports");
  }
  return compiler_.compile(source, tag());
}

}  // namespace kiln::opencl
