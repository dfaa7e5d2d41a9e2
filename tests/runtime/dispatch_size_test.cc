// How the runtime sizes a dispatch from the device's capabilities (dispatch_workgroups): a CPU
// gets a few large workgroups, a GPU enough blocks to keep every SM busy, and a fixed count
// (BackendOptions::max_workgroups) is honoured on both.
#include <gtest/gtest.h>

#include <string>

#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "runtime/routine_steps.h"

namespace kiln::runtime {
namespace {

ir::Kernel kernel_of(const std::string& text) {
  Result<ir::Program> program = lang::parse_program(text, "test.kiln");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, {});
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowered.ok() ? lowered->routines.front().kernels.front() : ir::Kernel{};
}

hal::DeviceCapabilities cpu_caps() {
  hal::DeviceCapabilities caps;
  caps.compute_units = 2;
  return caps;
}

// What the cuda driver reports for a 132-SM GPU (cu_platform.cc).
hal::DeviceCapabilities gpu_caps() {
  hal::DeviceCapabilities caps;
  caps.compute_units = 132;
  caps.workgroups_per_compute_unit = 32;
  caps.min_stores_per_workgroup = 128;
  return caps;
}

TEST(DispatchWorkgroups, FillAGpuAndSpareACpu) {
  const ir::Kernel big = kernel_of("input a : f32[16777216]\noutput y : f32[16777216]\ny[i] = a[i] + 1\n");
  EXPECT_EQ(dispatch_workgroups(big, cpu_caps(), 0), 8u);  // 4 per core
  EXPECT_EQ(dispatch_workgroups(big, gpu_caps(), 0), 132u * 32u);
  // A small kernel: one workgroup on a CPU, one 128-thread block per 128 stores on a GPU.
  const ir::Kernel small = kernel_of("input a : f32[2048]\noutput y : f32[2048]\ny[i] = a[i] + 1\n");
  EXPECT_EQ(dispatch_workgroups(small, cpu_caps(), 0), 1u);
  EXPECT_EQ(dispatch_workgroups(small, gpu_caps(), 0), 16u);
  // Never past the parallel extent: 4 rows of 2^20.
  const ir::Kernel rows = kernel_of("input a : f32[4, 1048576]\noutput y : f32[4]\ny[i] = sum(a[i, j])\n");
  EXPECT_EQ(dispatch_workgroups(rows, gpu_caps(), 0), 4u);
  // A fixed count, within the extent.
  EXPECT_EQ(dispatch_workgroups(big, gpu_caps(), 1), 1u);
  EXPECT_EQ(dispatch_workgroups(rows, cpu_caps(), 64), 4u);
}

}  // namespace
}  // namespace kiln::runtime
