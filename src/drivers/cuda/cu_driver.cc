// The CUDA driver: every device the NVIDIA driver reports, as "cuda:N". libcuda is loaded and
// the devices enumerated once per process, on first use, so that KILN_CUDA_LIBRARY and
// CUDA_VISIBLE_DEVICES take effect if set before then.
//
// The device, its queues and executables are not written yet: availability() reports the devices
// it found and says so, so that nothing (usable_device_names, the conformance suite, `kiln
// devices`) takes a cuda device for usable, and create_device() is UNIMPLEMENTED.
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
    KILN_RETURN_IF_ERROR(nvrtc_available());
    std::string found;
    for (const CuDeviceRecord& r : d.devices) {
      found += (found.empty() ? "" : "; ") + r.info.name + " " + summary(r);
    }
    return unavailable_error(found + ": the cuda device is not built yet");
  }

  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override { return discover().infos(); }

  Result<hal::DeviceRef> create_device(uint32_t ordinal, const hal::DeviceOptions& options) override {
    KILN_RETURN_IF_ERROR(discover().device(name(), ordinal).status());
    return unimplemented_error("the cuda device is not built yet");
  }
};

}  // namespace
}  // namespace kiln::cuda

namespace kiln::drivers {
hal::DriverRef make_cuda_driver() { return std::make_shared<cuda::CuDriver>(); }
}  // namespace kiln::drivers
