#include "kiln/hal/driver.h"

#include <charconv>
#include <string>

#include "kiln/base/log.h"

namespace kiln::hal {

Status DriverRegistry::add(DriverRef driver) {
  if (!driver) return invalid_argument_error("driver registry: null driver");
  for (const DriverRef& existing : drivers_) {
    if (existing->name() == driver->name()) {
      return already_exists_error("driver '" + driver->name() + "' is already registered");
    }
  }
  drivers_.push_back(std::move(driver));
  return Status();
}

Result<DriverRef> DriverRegistry::find(std::string_view name) const {
  std::string known;
  for (const DriverRef& driver : drivers_) {
    if (driver->name() == name) return driver;
    known += (known.empty() ? "" : ", ") + driver->name();
  }
  return not_found_error("no driver named '" + std::string(name) + "'; known drivers: " +
                         (known.empty() ? "none" : known));
}

Result<DeviceRef> DriverRegistry::create_device(std::string_view spec,
                                                const DeviceOptions& options) const {
  std::string_view name = spec;
  uint32_t ordinal = 0;
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    name = spec.substr(0, colon);
    std::string_view digits = spec.substr(colon + 1);
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) {
      return invalid_argument_error("device '" + std::string(spec) +
                                    "': expected NAME or NAME:ORDINAL, e.g. cpu:0");
    }
  }
  if (name.empty()) {
    return invalid_argument_error("device name is empty; expected NAME or NAME:ORDINAL");
  }
  KILN_ASSIGN_OR_RETURN(DriverRef driver, find(name));
  // Every KILN_* variable is checked when a device is created; the logger cannot report its own.
  KILN_RETURN_IF_ERROR(log_level_from_env().status());
  KILN_RETURN_IF_ERROR(driver->availability());
  KILN_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, driver->enumerate_devices());
  if (ordinal >= devices.size()) {
    return out_of_range_error("device '" + std::string(spec) + "': driver '" + driver->name() +
                              "' has " + std::to_string(devices.size()) + " device(s)");
  }
  return driver->create_device(ordinal, options);
}

}  // namespace kiln::hal
