// The OpenCL device for the driver's tests, or null where no platform is present (the test then
// skips).
#pragma once

#include "kiln/drivers/drivers.h"

namespace kiln {

inline hal::DeviceRef open_opencl() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find("opencl");
  if (!driver.ok() || !(*driver)->availability().ok()) return nullptr;
  auto device = drivers::builtin_registry().create_device("opencl");
  return device.ok() ? *device : nullptr;
}

}  // namespace kiln
