// The CTS's CUDA test kernels build, without a GPU: NVRTC (loaded as the CUDA driver loads it)
// makes PTX of them for sm_80 and sm_90, and refuses the broken source with its error, so that on
// a machine with a GPU the CTS fails only for what the device does. Skipped without NVRTC.
#include <gtest/gtest.h>

#include "hal/cts.h"
#include "kiln/drivers/drivers.h"

namespace kiln::cts {
namespace {

hal::DeviceInfo cuda_description() {
  hal::DeviceInfo info;
  info.driver = "cuda";
  info.name = "cuda:0";
  info.capabilities.executable_formats = {"cuda-c"};
  return info;
}

TEST(CtsCudaKernelsTest, BuildForSm80AndSm90) {
  if (Status nvrtc = drivers::check_cuda_arch(80); !nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc;
  Result<hal::ExecutableSource> source = test_kernel_source(cuda_description());
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->format, "cuda-c");
  for (int arch : {80, 90}) {
    Result<std::string> ptx = drivers::compile_cuda_ptx(source->source, arch, source->label);
    ASSERT_TRUE(ptx.ok()) << "sm_" << arch << ": " << ptx.status();
    for (const hal::ExportInfo& e : source->exports) {
      EXPECT_NE(ptx->find(".entry " + e.name + "("), std::string::npos) << e.name << " missing for sm_" << arch;
    }
  }
  Result<hal::ExecutableSource> broken = broken_kernel_source(cuda_description());
  ASSERT_TRUE(broken.ok()) << broken.status();
  Result<std::string> refused = drivers::compile_cuda_ptx(broken->source, 90, broken->label);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("cts_undeclared_identifier"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace kiln::cts
