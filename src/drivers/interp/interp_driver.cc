// The `interp` driver: one device, "interp:0", a CPU device whose executables are loop-IR
// kernels run by the reference interpreter (executable format "kiln-loop").
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "drivers/cpu/cpu_device.h"
#include "drivers/interp/interp_compiler.h"
#include "kiln/drivers/drivers.h"

namespace kiln::interp {

namespace {

hal::DeviceInfo interp_device_info() {
  hal::DeviceInfo info;
  info.driver = "interp";
  info.ordinal = 0;
  info.name = "interp:0";
  info.description = "reference interpreter of the loop IR";
  hal::DeviceCapabilities& caps = info.capabilities;
  caps.compute_units = std::max(1u, std::thread::hardware_concurrency());
  long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  caps.total_memory = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
  caps.max_allocation_size = caps.total_memory ? caps.total_memory : (uint64_t{1} << 40);
  caps.max_workgroup_size = 1;
  caps.fp64 = true;
  caps.fp16 = false;
  caps.local_memory_size = 0;
  caps.unified_memory = true;
  caps.executable_formats = {kLoopFormat};
  return info;
}

class InterpDriver final : public hal::Driver {
 public:
  std::string name() const override { return "interp"; }
  Status availability() override { return Status(); }
  Result<std::vector<hal::DeviceInfo>> enumerate_devices() override {
    return std::vector<hal::DeviceInfo>{interp_device_info()};
  }
  Result<hal::DeviceRef> create_device(uint32_t ordinal,
                                       const hal::DeviceOptions& options) override {
    if (ordinal != 0) {
      return out_of_range_error("interp driver has 1 device; ordinal " + std::to_string(ordinal) +
                                " does not exist");
    }
    hal::DeviceInfo info = interp_device_info();
    KILN_ASSIGN_OR_RETURN(uint32_t threads,
                          cpu::CpuDevice::thread_count(options, info.capabilities.compute_units));
    return hal::DeviceRef(std::make_shared<cpu::CpuDevice>(std::move(info), threads,
                                                           std::make_unique<InterpCompiler>()));
  }
};

}  // namespace

}  // namespace kiln::interp

namespace kiln::drivers {
hal::DriverRef make_interp_driver() { return std::make_shared<interp::InterpDriver>(); }
}  // namespace kiln::drivers
