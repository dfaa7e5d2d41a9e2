// The `interp` driver: one device, "interp:0", a CPU device whose executables are loop-IR
// kernels run by the reference interpreter (executable format "kiln-loop").
#include "drivers/cpu/cpu_device.h"
#include "drivers/interp/interp_compiler.h"
#include "kiln/drivers/drivers.h"

namespace kiln::interp {

namespace {

hal::DeviceInfo interp_device_info() {
  hal::DeviceInfo info = cpu::CpuDevice::host_info("interp", "reference interpreter of the loop IR", kLoopFormat);
  // Interpreting a store costs tens of compiled ones.
  info.capabilities.max_caller_stores = int64_t{1} << 8;
  return info;
}

class InterpDriver final : public hal::Driver {
 public:
  std::string name() const override { return "interp"; }
  // A malformed KILN_CPU_THREADS, KILN_CPU_AFFINITY or KILN_CC_TIMEOUT would fail every device: not available then.
  Status availability() override { return cpu::CpuDevice::check_settings(); }
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
    cpu::CpuDevice::apply_caller_stores(options, info);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<cpu::ThreadPool> pool,
                          cpu::CpuDevice::thread_pool(options, info.capabilities.compute_units));
    return hal::DeviceRef(std::make_shared<cpu::CpuDevice>(std::move(info), std::move(pool),
                                                           std::make_unique<InterpCompiler>(), options.spread_queues));
  }
};

}  // namespace

}  // namespace kiln::interp

namespace kiln::drivers {
hal::DriverRef make_interp_driver() { return std::make_shared<interp::InterpDriver>(); }
}  // namespace kiln::drivers
