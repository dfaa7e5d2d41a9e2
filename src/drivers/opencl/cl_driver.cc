// The OpenCL driver: every device of every platform the ICD loader finds, as "opencl:N".
// The library is loaded and the platforms enumerated once per process, on first use, so that
// OCL_ICD_VENDORS and similar settings take effect if set before then.
#include <mutex>

#include "drivers/opencl/cl_device.h"
#include "drivers/opencl/cl_platform.h"
#include "kiln/drivers/drivers.h"

namespace kiln::opencl {

namespace {

struct Discovery {
  const Api* api = nullptr;
  Status status;
  std::vector<ClDeviceRecord> devices;
};

const Discovery& discover() {
  static const Discovery* discovery = [] {
    auto* d = new Discovery();
    Result<const Api*> api = load_api();
    if (!api.ok()) {
      d->status = api.status();
      return d;
    }
    d->api = *api;
    Result<std::vector<ClDeviceRecord>> devices = enumerate_devices(**api);
    if (!devices.ok()) {
      d->status = devices.status();
    } else {
      d->devices = std::move(*devices);
    }
    return d;
  }();
  return *discovery;
}

class ClDriver final : public hal::Driver {
 public:
  std::string name() const override { return "opencl"; }
  Status availability() override { return discover().status; }
  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override {
    const Discovery& d = discover();
    KILN_RETURN_IF_ERROR(d.status);
    std::vector<hal::DeviceInfo> infos;
    for (const ClDeviceRecord& r : d.devices) infos.push_back(r.info);
    return infos;
  }
  Result<hal::DeviceRef> create_device(uint32_t ordinal, const hal::DeviceOptions& options) override {
    const Discovery& d = discover();
    KILN_RETURN_IF_ERROR(d.status);
    if (ordinal >= d.devices.size()) {
      return out_of_range_error("opencl driver has " + std::to_string(d.devices.size()) +
                                " device(s); ordinal " + std::to_string(ordinal) +
                                " does not exist");
    }
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ClDevice> device,
                          ClDevice::create(*d.api, d.devices[ordinal], options));
    return hal::DeviceRef(std::move(device));
  }
};

}  // namespace
}  // namespace kiln::opencl

namespace kiln::drivers {
hal::DriverRef make_opencl_driver() { return std::make_shared<opencl::ClDriver>(); }
}  // namespace kiln::drivers
