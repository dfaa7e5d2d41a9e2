// The OpenCL driver: every device of every platform the ICD loader finds, as "opencl:N".
// The library is loaded and the platforms enumerated once per process, on first use, so that
// OCL_ICD_VENDORS and similar settings take effect if set before then.
#include "drivers/discovery.h"
#include "drivers/opencl/cl_device.h"
#include "drivers/opencl/cl_platform.h"
#include "kiln/drivers/drivers.h"

namespace kiln::opencl {

namespace {

using Discovery = drivers::Discovery<Api, ClDeviceRecord>;

const Discovery& discover() {
  static const Discovery* discovery = new Discovery(Discovery::run(load_api(), enumerate_devices));
  return *discovery;
}

class ClDriver final : public hal::Driver {
 public:
  std::string name() const override { return "opencl"; }
  Status availability() override { return discover().status; }
  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override { return discover().infos(); }
  Result<hal::DeviceRef> create_device(uint32_t ordinal, const hal::DeviceOptions& options) override {
    const Discovery& d = discover();
    KILN_ASSIGN_OR_RETURN(const ClDeviceRecord* record, d.device(name(), ordinal));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ClDevice> device, ClDevice::create(*d.api, *record, options));
    return hal::DeviceRef(std::move(device));
  }
};

}  // namespace
}  // namespace kiln::opencl

namespace kiln::drivers {
hal::DriverRef make_opencl_driver() { return std::make_shared<opencl::ClDriver>(); }
}  // namespace kiln::drivers
