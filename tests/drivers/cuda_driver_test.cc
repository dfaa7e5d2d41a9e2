// CUDA driver specifics that need no GPU: the error statuses of cu_error, the driver's place in
// the registry, and why it is unavailable. The library is loaded once per process, so each
// KILN_CUDA_LIBRARY case runs the test binary again as a child (CudaChildTest) and reads what it
// printed: a missing file, a library without the CUDA symbols, and (where CMake found the
// toolkit) the toolkit's stub libcuda.so, which exports every symbol but runs nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_child.h"
#include "drivers/cuda/cu_api.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/semaphore.h"

namespace kiln {
namespace {

hal::DriverRef cuda_driver() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find("cuda");
  EXPECT_TRUE(driver.ok()) << driver.status();
  return driver.ok() ? *driver : nullptr;
}

TEST(CudaErrorTest, NamesTheCallTheErrorAndWhere) {
  Status status = cuda::cu_error("cuMemAlloc_v2", cuda::CUDA_ERROR_OUT_OF_MEMORY, "allocating 4 GiB");
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status;
  EXPECT_EQ(status.message(), "allocating 4 GiB: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
  Status bare = cuda::cu_error("cuLaunchKernel", cuda::CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(bare.code(), StatusCode::kInternal) << bare;
  EXPECT_EQ(bare.message(), "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED (719)");
  EXPECT_EQ(cuda::cu_error("cuInit", cuda::CUDA_ERROR_NO_DEVICE).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cuda::cu_error("cuInit", cuda::CUDA_ERROR_STUB_LIBRARY).code(), StatusCode::kUnavailable);
  // A code neither kiln nor (when loaded) the driver knows keeps its number.
  EXPECT_EQ(cuda::error_name(static_cast<cuda::CUresult>(123456)), "CUDA error (123456)");
}

// NVRTC and cuBLAS of a CUDA newer than the driver cannot work with it (PTX from NVRTC 13 is
// refused by a 12.x driver): those names are left out where a driver is present, and said why.
TEST(CudaLibraryNames, LeaveOutLibrariesNewerThanTheDriver) {
  std::string why;
  std::vector<std::string> names = cuda::library_names_for_driver(
      12040, {{13, "libnvrtc.so.13"}, {12, "libnvrtc.so.12"}, {11, "libnvrtc.so.11.2"}}, "libnvrtc.so", &why);
  EXPECT_EQ(names, (std::vector<std::string>{"libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}));
  EXPECT_EQ(why, "libnvrtc.so.13 (the CUDA driver supports CUDA 12.4)");
  why.clear();
  names = cuda::library_names_for_driver(std::nullopt, {{13, "libcublas.so.13"}, {12, "libcublas.so.12"}},
                                         "libcublas.so", &why);
  EXPECT_EQ(names, (std::vector<std::string>{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}));
  EXPECT_EQ(why, "");
  EXPECT_EQ(cuda::cuda_version_text(13000), "13.0");
}

TEST(CudaDriverTest, RegisteredAfterOpenCL) {
  const auto& drivers = drivers::builtin_registry().drivers();
  std::vector<std::string> names;
  for (const hal::DriverRef& d : drivers) names.push_back(d->name());
  auto opencl = std::find(names.begin(), names.end(), "opencl");
  auto cuda = std::find(names.begin(), names.end(), "cuda");
  ASSERT_NE(cuda, names.end());
  ASSERT_NE(opencl, names.end());
  EXPECT_EQ(cuda - opencl, 1);
}

TEST(CudaDriverTest, AvailableOrSaysWhy) {
  hal::DriverRef driver = cuda_driver();
  ASSERT_TRUE(driver);
  Status available = driver->availability();
  Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate_devices();
  if (!available.ok()) {
    ASSERT_EQ(available.code(), StatusCode::kUnavailable) << available;
    const std::string& why = available.message();
    const bool known = why.rfind("no CUDA driver (", 0) == 0 || why == "no CUDA device" ||
                       why.find("cuInit failed: ") != std::string::npos || why.rfind("NVRTC", 0) == 0;
    EXPECT_TRUE(known) << why;
    auto device = drivers::builtin_registry().create_device("cuda");
    EXPECT_EQ(device.status().code(), StatusCode::kUnavailable) << device.status();
    for (const std::string& name : drivers::usable_device_names()) EXPECT_NE(name.rfind("cuda", 0), 0u) << name;
    if (!devices.ok()) {
      EXPECT_EQ(devices.status().message(), why);
      return;
    }
  }
  // Where the driver found devices, they are listed as cuda:N.
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  for (uint32_t i = 0; i < devices->size(); ++i) {
    const hal::DeviceInfo& info = (*devices)[i];
    EXPECT_EQ(info.name, "cuda:" + std::to_string(i));
    EXPECT_EQ(info.driver, "cuda");
    EXPECT_NE(info.description.find("compute capability"), std::string::npos) << info.description;
    EXPECT_GT(info.capabilities.total_memory, 0u);
  }
  if (available.ok()) {
    Result<hal::DeviceRef> device = driver->create_device(0, {});
    EXPECT_TRUE(device.ok()) << device.status();
  }
  EXPECT_EQ(driver->create_device(static_cast<uint32_t>(devices->size()), {}).status().code(),
            available.ok() ? StatusCode::kOutOfRange : StatusCode::kUnavailable);
}

// Child mode: prints what loading the library and asking the driver gave, for ChildSees().
TEST(CudaChildTest, ReportsLoadAndAvailability) {
  if (!std::getenv("KILN_CUDA_TEST_CHILD")) GTEST_SKIP() << "runs only as a child process";
  Result<const cuda::Api*> api = cuda::Api::load();
  std::printf("load: %s\n", api.ok() ? "ok" : api.status().to_string().c_str());
  hal::DriverRef driver = cuda_driver();
  ASSERT_TRUE(driver);
  Status available = driver->availability();
  std::printf("availability: %s\n", available.to_string().c_str());
}

// Runs CudaChildTest with KILN_CUDA_LIBRARY=`library`; its output.
std::string child_output(const std::string& library) {
  return test::run_test_child({"KILN_CUDA_LIBRARY=" + library, "KILN_CUDA_TEST_CHILD=1"},
                   "CudaChildTest.ReportsLoadAndAvailability");
}

TEST(CudaDriverTest, MissingLibraryIsNamed) {
  std::string out = child_output("libkiln-no-such-cuda.so.1");
  EXPECT_NE(out.find("load: UNAVAILABLE: no CUDA driver (libkiln-no-such-cuda.so.1): "), std::string::npos) << out;
  EXPECT_NE(out.find("availability: UNAVAILABLE: no CUDA driver (libkiln-no-such-cuda.so.1): "), std::string::npos)
      << out;
}

TEST(CudaDriverTest, LibraryWithoutTheSymbolsNamesThem) {
  // The C library loads everywhere and exports none of the CUDA functions.
  std::string out = child_output("libc.so.6");
  EXPECT_NE(out.find("the CUDA driver library libc.so.6 lacks cuInit, cuDriverGetVersion,"), std::string::npos) << out;
  EXPECT_NE(out.find("cuMemAlloc_v2"), std::string::npos) << out;
  EXPECT_NE(out.find("cuLaunchKernel (kiln needs a driver for CUDA 11.2 or newer)"), std::string::npos) << out;
}

TEST(CudaDriverTest, ToolkitStubLoadsButRunsNothing) {
#ifdef KILN_CUDA_STUB_LIBRARY
  // The stub exports every function of the driver API: each symbol the loader binds must exist.
  // A binary carried to another machine (scripts/cuda-device-check.sh) may not find it there.
  if (::access(KILN_CUDA_STUB_LIBRARY, R_OK) != 0) {
    GTEST_SKIP() << "the toolkit's stub " << KILN_CUDA_STUB_LIBRARY << " is not on this machine";
  }
  std::string out = child_output(KILN_CUDA_STUB_LIBRARY);
  EXPECT_NE(out.find("load: ok"), std::string::npos) << out;
  EXPECT_NE(out.find("availability: UNAVAILABLE: cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)"), std::string::npos)
      << out;
#else
  GTEST_SKIP() << "CMake did not find the CUDA toolkit's stub libcuda.so when configuring";
#endif
}

// Child mode, on a GPU: a kernel that executes __trap() faults the context, which CUDA makes
// sticky and after which it runs no stream callback. What the queue then reports, line by line.
TEST(CudaFaultChild, TrapFailsTheQueueWithoutHanging) {
  if (!std::getenv("KILN_CUDA_FAULT_CHILD")) GTEST_SKIP() << "runs only as a child process";
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("cuda");
  ASSERT_TRUE(device.ok()) << device.status();
  hal::ExecutableSource source;
  source.format = "cuda-c";
  source.label = "trap";
  source.source =
      "extern \"C\" __global__ void trap_kernel(KILN_STATUS_PARAMS) { __trap(); }\n"
      "extern \"C\" __global__ void ok_kernel(KILN_STATUS_PARAMS) { KILN_ENTRY(); }\n";
  source.exports = {{"trap_kernel", 0, 0, false}, {"ok_kernel", 0, 0, false}};
  Result<hal::ExecutableRef> executable = (*device)->compile_executable(source);
  ASSERT_TRUE(executable.ok()) << executable.status();
  hal::QueueRef first = *(*device)->create_queue(), second = *(*device)->create_queue();
  auto faulted = hal::Semaphore::create(), behind = hal::Semaphore::create(), later = hal::Semaphore::create();
  hal::DispatchCommand trap, ok;
  trap.executable = ok.executable = *executable;
  ok.export_ordinal = 1;
  ASSERT_TRUE(first->dispatch({}, {{faulted, 1}}, trap).ok());
  ASSERT_TRUE(first->dispatch({}, {{behind, 1}}, ok).ok());
  std::printf("faulted: %s\n", faulted->wait(1, Timeout::after_ms(30000)).to_string().c_str());
  std::printf("behind: %s\n", behind->wait(1, Timeout::after_ms(30000)).to_string().c_str());
  ASSERT_TRUE(second->dispatch({}, {{later, 1}}, ok).ok());
  std::printf("later: %s\n", later->wait(1, Timeout::after_ms(30000)).to_string().c_str());
  first.reset();
  second.reset();
  std::printf("destroyed\n");
}

// On a GPU: a faulting kernel fails its own semaphores, those of the work behind it and of every
// later submission, naming the fault, and the queues are destroyed without hanging (a child
// process, since the fault ends the device for the process).
TEST(CudaDriverTest, AKernelFaultFailsTheQueueInsteadOfHanging) {
  hal::DriverRef driver = cuda_driver();
  ASSERT_TRUE(driver);
  if (Status available = driver->availability(); !available.ok()) GTEST_SKIP() << "no CUDA device: " << available;
  std::string out = test::run_test_child({"KILN_CUDA_FAULT_CHILD=1"}, "CudaFaultChild.*");
  for (const char* line : {"faulted: INTERNAL", "behind: INTERNAL", "later: INTERNAL", "destroyed"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_NE(out.find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("cuda:0 is lost"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
