// The CPU driver: one device, this machine's processors.
#include <fstream>

#include "drivers/cpu/cpu_device.h"
#include "kiln/drivers/drivers.h"

namespace kiln::cpu {

namespace {

std::string processor_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "host processor";
}

hal::DeviceInfo cpu_device_info() { return CpuDevice::host_info("cpu", processor_model(), "c"); }

class CpuDriver final : public hal::Driver {
 public:
  std::string name() const override { return "cpu"; }
  // A malformed KILN_CPU_THREADS, KILN_CPU_AFFINITY or KILN_CC_TIMEOUT would fail every device: not available then.
  Status availability() override { return CpuDevice::check_settings(); }
  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override {
    return std::vector<hal::DeviceInfo>{cpu_device_info()};
  }
  Result<hal::DeviceRef> create_device(uint32_t ordinal, const hal::DeviceOptions& options) override {
    if (ordinal != 0) {
      return out_of_range_error("cpu driver has 1 device; ordinal " + std::to_string(ordinal) +
                                " does not exist");
    }
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<CpuDevice> device, CpuDevice::create(cpu_device_info(), options));
    return hal::DeviceRef(std::move(device));
  }
};

}  // namespace
}  // namespace kiln::cpu

namespace kiln::drivers {
hal::DriverRef make_cpu_driver() { return std::make_shared<cpu::CpuDriver>(); }
}  // namespace kiln::drivers
