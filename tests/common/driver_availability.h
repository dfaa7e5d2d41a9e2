// Why a device of a built-in driver cannot be opened here (OpenCL without a platform, CUDA without
// a GPU), for tests that skip themselves where their device is missing.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/drivers/drivers.h"

namespace kiln::test {

// The driver's availability as a status: OK when a device of driver `name` can be opened.
inline Status driver_availability(const std::string& name) {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find(name);
  if (!driver.ok()) return driver.status();
  return (*driver)->availability();
}

}  // namespace kiln::test
