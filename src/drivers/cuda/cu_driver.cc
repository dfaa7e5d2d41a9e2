// The CUDA driver: every device the NVIDIA driver reports, as "cuda:N". libcuda is loaded and
// the devices enumerated once per process, on first use, so that KILN_CUDA_LIBRARY and
// CUDA_VISIBLE_DEVICES take effect if set before then.
//
// availability() is OK when a device and NVRTC are present. The device has not yet run on an
// NVIDIA GPU (docs/cuda.md says what was verified where).
#include "drivers/cuda/cu_device.h"
#include "drivers/cuda/cu_platform.h"
#include "drivers/cuda/nvrtc.h"
#include "drivers/discovery.h"
#include "kiln/drivers/drivers.h"

namespace kiln::cuda {

namespace {

using Discovery = drivers::Discovery<Api, CuDeviceRecord>;

const Discovery& discover() {
  static const Discovery* discovery = new Discovery(Discovery::run(Api::load(), enumerate_devices));
  return *discovery;
}

class CuDriver final : public hal::Driver {
 public:
  std::string name() const override { return "cuda"; }

  Status availability() override {
    const Discovery& d = discover();
    KILN_RETURN_IF_ERROR(d.status);
    return nvrtc_available();
  }

  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override { return discover().infos(); }

  Result<hal::DeviceRef> create_device(uint32_t ordinal, const hal::DeviceOptions& options) override {
    const Discovery& d = discover();
    KILN_RETURN_IF_ERROR(nvrtc_available());
    KILN_ASSIGN_OR_RETURN(const CuDeviceRecord* record, d.device(name(), ordinal));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<CuDevice> device, CuDevice::create(*d.api, *record, options));
    return hal::DeviceRef(std::move(device));
  }
};

}  // namespace
}  // namespace kiln::cuda

namespace kiln::drivers {
hal::DriverRef make_cuda_driver() { return std::make_shared<cuda::CuDriver>(); }
}  // namespace kiln::drivers
