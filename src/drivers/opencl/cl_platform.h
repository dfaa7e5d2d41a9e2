// Platform and device enumeration: every device of every OpenCL platform, in platform order,
// numbered "opencl:0", "opencl:1", ... with the capabilities the HAL reports.
#pragma once

#include <string>
#include <vector>

#include "drivers/opencl/cl_api.h"
#include "kiln/hal/device.h"

namespace kiln::opencl {

struct ClDeviceRecord {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string platform_name, platform_version;
  std::string device_name, device_version, driver_version;
  bool cpu = false;  // CL_DEVICE_TYPE_CPU: the device runs on the host's cores
  hal::DeviceInfo info;
};

// UNAVAILABLE naming the failing call when there is no platform or no device.
Result<std::vector<ClDeviceRecord>> enumerate_devices(const Api& api);

}  // namespace kiln::opencl
