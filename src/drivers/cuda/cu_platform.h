// Device discovery: cuInit, then every device the driver reports, numbered "cuda:0", "cuda:1", ...
// in the driver's order (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER apply), with the capabilities
// the HAL reports and the attributes the device will need.
#pragma once

#include <string>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "kiln/hal/device.h"

namespace kiln::cuda {

struct CuDeviceRecord {
  CUdevice device = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int driver_version = 0;  // 12040 for CUDA 12.4
  bool memory_pools = false;         // cuMemAllocAsync works on the device
  bool unified_addressing = false;   // host and device pointers share one address space
  bool can_map_host_memory = false;  // cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP) works
  hal::DeviceInfo info;
};

// UNAVAILABLE with the reason when cuInit fails: "no CUDA device" for CUDA_ERROR_NO_DEVICE (also
// when the driver reports zero devices), else the call and its error, e.g. a stub library or a
// driver too old for the kernel module. A failing query of a device is UNAVAILABLE naming it.
Result<std::vector<CuDeviceRecord>> enumerate_devices(const Api& api);

}  // namespace kiln::cuda
