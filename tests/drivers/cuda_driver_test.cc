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

#include "base/process.h"
#include "drivers/cuda/cu_api.h"
#include "kiln/drivers/drivers.h"

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
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  EXPECT_GT(n, 0);
  if (n <= 0) return "";
  self[n] = '\0';
  Result<ProcessResult> run =
      run_process({"/usr/bin/env", "KILN_CUDA_LIBRARY=" + library, "KILN_CUDA_TEST_CHILD=1", self,
                   "--gtest_filter=CudaChildTest.ReportsLoadAndAvailability"},
                  60000);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return "";
  EXPECT_FALSE(run->signalled) << run->output;
  EXPECT_EQ(run->exit_code, 0) << run->output;
  return run->output;
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

}  // namespace
}  // namespace kiln
