// Driver: a device family (cpu, opencl, cuda) and the registry that finds drivers by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/hal/device.h"

namespace kiln::hal {

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  // OK when devices can be created; otherwise UNAVAILABLE saying why (no platform, no library).
  virtual Status availability() = 0;
  virtual Result<std::vector<DeviceInfo>> enumerate_devices() = 0;
  virtual Result<DeviceRef> create_device(uint32_t ordinal, const DeviceOptions& options) = 0;
};

using DriverRef = std::shared_ptr<Driver>;

class DriverRegistry {
 public:
  // ALREADY_EXISTS for a second driver of the same name.
  Status add(DriverRef driver);
  const std::vector<DriverRef>& drivers() const { return drivers_; }
  // NOT_FOUND naming the known drivers.
  Result<DriverRef> find(std::string_view name) const;
  // "cpu" or "cpu:1". INVALID_ARGUMENT for a malformed spec, NOT_FOUND for an unknown driver,
  // the driver's UNAVAILABLE status when it cannot start, OUT_OF_RANGE for a missing ordinal.
  Result<DeviceRef> create_device(std::string_view spec, const DeviceOptions& options = {}) const;

 private:
  std::vector<DriverRef> drivers_;
};

}  // namespace kiln::hal
