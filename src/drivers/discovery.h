// Discovery: what a driver whose library loads at run time (opencl, cuda) found when it first
// looked, kept for the life of the process: the loaded API table, or why there is none, and one
// record per device (each with its hal::DeviceInfo as `info`).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/hal/device.h"

namespace kiln::drivers {

template <typename Api, typename Record>
struct Discovery {
  const Api* api = nullptr;
  Status status;  // OK when `api` is loaded and `devices` enumerated
  std::vector<Record> devices;

  // Loads the API, then enumerates its devices; the first failure becomes `status`.
  static Discovery run(Result<const Api*> loaded,
                       Result<std::vector<Record>> (*enumerate)(const Api&)) {
    Discovery d;
    if (!loaded.ok()) {
      d.status = loaded.status();
      return d;
    }
    d.api = *loaded;
    Result<std::vector<Record>> devices = enumerate(**loaded);
    if (!devices.ok()) {
      d.status = devices.status();
    } else {
      d.devices = std::move(*devices);
    }
    return d;
  }

  // For Driver::enumerate_devices.
  Result<std::vector<hal::DeviceInfo>> infos() const {
    KILN_RETURN_IF_ERROR(status);
    std::vector<hal::DeviceInfo> out;
    for (const Record& r : devices) out.push_back(r.info);
    return out;
  }

  // For Driver::create_device: the record of `ordinal`, the discovery's failure, or OUT_OF_RANGE
  // naming `driver` and how many devices it has.
  Result<const Record*> device(const std::string& driver, uint32_t ordinal) const {
    KILN_RETURN_IF_ERROR(status);
    if (ordinal >= devices.size()) {
      return out_of_range_error(driver + " driver has " + std::to_string(devices.size()) +
                                " device(s); ordinal " + std::to_string(ordinal) +
                                " does not exist");
    }
    return &devices[ordinal];
  }
};

}  // namespace kiln::drivers
