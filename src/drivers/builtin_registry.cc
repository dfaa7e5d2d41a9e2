#include "kiln/drivers/drivers.h"

namespace kiln::drivers {

const hal::DriverRegistry& builtin_registry() {
  static const hal::DriverRegistry* registry = [] {
    auto* r = new hal::DriverRegistry();
    r->add(make_cpu_driver()).ignore();
    r->add(make_interp_driver()).ignore();
    r->add(make_opencl_driver()).ignore();
    return r;
  }();
  return *registry;
}

}  // namespace kiln::drivers
