#include "kiln/drivers/drivers.h"

#include <string>
#include <vector>

namespace kiln::drivers {

const hal::DriverRegistry& builtin_registry() {
  static const hal::DriverRegistry* registry = [] {
    auto* r = new hal::DriverRegistry();
    r->add(make_cpu_driver()).ignore();
    r->add(make_interp_driver()).ignore();
    r->add(make_opencl_driver()).ignore();
    r->add(make_cuda_driver()).ignore();
    return r;
  }();
  return *registry;
}

const std::vector<std::string>& usable_device_names() {
  static const std::vector<std::string>* names = [] {
    auto* list = new std::vector<std::string>();
    for (const hal::DriverRef& driver : builtin_registry().drivers()) {
      if (!driver->availability().ok()) continue;
      Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate_devices();
      if (!devices.ok()) continue;
      for (size_t i = 0; i < devices->size(); ++i) {
        list->push_back(i == 0 ? driver->name() : driver->name() + ":" + std::to_string(i));
      }
    }
    return list;
  }();
  return *names;
}

}  // namespace kiln::drivers
