// The drivers built into kiln, registered in one registry.
#pragma once

#include <string>
#include <vector>

#include <string_view>

#include "kiln/hal/driver.h"

namespace kiln::drivers {

// A registry holding every built-in driver (cpu, interp, opencl, cuda). Drivers
// whose libraries are missing are still listed, and say why through availability().
const hal::DriverRegistry& builtin_registry();
// The devices that can be used here, as names for DriverRegistry::create_device: the first
// device of a driver by the driver's name ("cpu", "opencl"), the others as "opencl:1", ...
// Computed once, on the first call.
const std::vector<std::string>& usable_device_names();

// The CPU driver alone.
hal::DriverRef make_cpu_driver();

// The reference interpreter of the loop IR: one device "interp:0", executable format
// "kiln-loop" (loop-IR kernel text, see kiln/loop/loop.h), run on CPU worker threads.
hal::DriverRef make_interp_driver();

// OpenCL: every device of every platform as "opencl:N", executable format "opencl-c". The
// library is loaded at run time; without it the driver is listed and says why it is unavailable.
hal::DriverRef make_opencl_driver();

// CUDA: every device the NVIDIA driver reports as "cuda:N", executable format "cuda-c". libcuda
// (libcuda.so.1, or KILN_CUDA_LIBRARY) is loaded at run time; without it, without a device or
// without NVRTC the driver is listed and says why it is unavailable. The device itself is not
// built yet: where everything is present, availability() names the devices found and says so.
hal::DriverRef make_cuda_driver();

// Ahead-of-time CUDA code (kiln compile --target cuda:sm_NN), with NVRTC alone: no GPU and no
// CUDA driver needed. OK when NVRTC can build for sm_`arch`; UNAVAILABLE without NVRTC,
// INVALID_ARGUMENT (listing what it supports) for an architecture it cannot.
Status check_cuda_arch(int arch);
// PTX for sm_`arch` of generated CUDA C ("cuda-c"), behind kiln's CUDA kernel ABI; the build log
// in an INVALID_ARGUMENT error when it does not compile. `label` names the source in messages.
Result<std::string> compile_cuda_ptx(std::string_view source, int arch, std::string_view label);

}  // namespace kiln::drivers
