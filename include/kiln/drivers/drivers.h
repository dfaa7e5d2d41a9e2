// The drivers built into kiln, registered in one registry.
#pragma once

#include "kiln/hal/driver.h"

namespace kiln::drivers {

// A registry holding every built-in driver (cpu now; opencl and cuda as they arrive). Drivers
// whose libraries are missing are still listed, and say why through availability().
const hal::DriverRegistry& builtin_registry();

// The CPU driver alone.
hal::DriverRef make_cpu_driver();

}  // namespace kiln::drivers
