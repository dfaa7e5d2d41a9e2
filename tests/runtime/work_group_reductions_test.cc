// Work-group reductions on OpenCL (src/codegen/kernel_work_groups.cc): with several work items
// per work group, the lanes of a split reduction live in __local memory and are shared by the
// group's work items. Each lane still gets the same operations in the same order, so every
// output with 64 work items must be bit-identical to the output with one (the same OpenCL
// compiler; PoCL's float sums are not the interpreter's bits, so that comparison is within a
// tolerance), for any row count (fewer rows than groups, a tail of lanes), type and
// reduction; and kernels that read back what they store must keep the private form. Skipped,
// naming why, without OpenCL.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <string>

#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/code.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

// Every output after running the default routines on `device_name`, inputs random (seed 7);
// on OpenCL with `work_items` per work group.
Result<std::map<std::string, HostTensor>> outputs_on(const std::string& device_name,
                                                     const ir::Program& program,
                                                     const char* work_items = "1") {
  // Read when the device builds the kernels.
  setenv("KILN_OPENCL_WORK_ITEMS", work_items, 1);
  TempDir cache;
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, open_device(device_name, cache.path()));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ProgramInstance> instance,
                        runtime::ProgramInstance::create(device, program, {}));
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role == ir::Role::kInput) {
      KILN_RETURN_IF_ERROR(write_tensor(*instance, node.name, random_tensor(node, 7)));
    }
  }
  for (const std::string& routine : default_routines(program)) {
    KILN_RETURN_IF_ERROR(instance->run(routine));
  }
  std::map<std::string, HostTensor> out;
  for (const ir::TensorNode* node : result_nodes(program)) {
    KILN_ASSIGN_OR_RETURN(out[node->name], read_tensor(*instance, *node));
  }
  return out;
}

// The OpenCL C of `program`'s kernels.
Result<std::string> opencl_source(const ir::Program& program) {
  KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, ir::lower_program(program));
  TempDir cache;
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, open_device("opencl", cache.path()));
  std::string format;
  return runtime::generate_source(lowered, device->info(), &format);
}

class WorkGroupReductionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = driver_availability("opencl");
    if (!available.ok()) GTEST_SKIP() << "no OpenCL: " << available;
  }
  void TearDown() override { unsetenv("KILN_OPENCL_WORK_ITEMS"); }

  // `text` runs bit-identically on opencl with 64 and 1 work items, and as the interpreter
  // within a tolerance; `shared` says whether its kernels should share lanes in __local memory.
  void expect_exact(const std::string& text, bool shared) {
    Result<ir::Program> program = lang::parse_program(text, "work_groups.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    Result<std::string> source = opencl_source(*program);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ(source->find("__local") != std::string::npos, shared) << *source;
    if (shared) {
      EXPECT_NE(source->find("barrier(CLK_LOCAL_MEM_FENCE)"), std::string::npos);
    }
    auto reference = outputs_on("interp", *program);
    ASSERT_TRUE(reference.ok()) << reference.status();
    auto one = outputs_on("opencl", *program, "1");
    ASSERT_TRUE(one.ok()) << one.status();
    auto group = outputs_on("opencl", *program, "64");
    ASSERT_TRUE(group.ok()) << group.status();
    for (const auto& [name, want] : *reference) {
      EXPECT_TRUE(group->at(name).bytes == one->at(name).bytes)
          << name << ": 64 work items give other bits than one";
      for (int64_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(close_enough(want.at(i), group->at(name).at(i), Tolerance{}))
            << name << " element " << i << ": " << want.at(i) << " vs " << group->at(name).at(i);
      }
    }
  }
};

TEST_F(WorkGroupReductionsTest, RowSumWithATailOfLanes) {
  // 1000 = 31 blocks of 32 lanes and 8 more; 37 rows over the groups.
  expect_exact("input x : f32[37, 1000]\noutput y : f32[37]\ny[i] = sum(x[i, j])\n", true);
}

TEST_F(WorkGroupReductionsTest, FewerRowsThanWorkGroups) {
  expect_exact("input x : f32[3, 640]\noutput y : f32[3]\ny[i] = sum(x[i, j])\n", true);
}

TEST_F(WorkGroupReductionsTest, MaxAndMinOfTheSameRowsInOneKernel) {
  expect_exact(
      "input x : f32[20, 300]\noutput hi : f32[20]\noutput lo : f32[20]\n"
      "hi[i] = max(x[i, j])\nlo[i] = min(x[i, j] * 2)\n",
      true);
}

TEST_F(WorkGroupReductionsTest, DoubleAndIntegerSums) {
  expect_exact("input x : f64[9, 500]\noutput y : f64[9]\ny[i] = sum(x[i, j])\n", true);
  expect_exact("input x : i32[9, 500]\noutput y : i32[9]\ny[i] = sum(x[i, j] * 3)\n", true);
}

TEST_F(WorkGroupReductionsTest, SoftmaxWithTheRowInPrivateMemory) {
  // Fused into one kernel: the row of exponentials is a private array of each work item, the
  // max and the sum share their lanes.
  expect_exact(
      "input x : f32[12, 200]\noutput y : f32[12, 200]\ntensor m : f32[12]\n"
      "tensor e : f32[12, 200]\ntensor s : f32[12]\n"
      "m[i] = max(x[i, j])\ne[i, j] = exp(x[i, j] - m[i])\ns[i] = sum(e[i, j])\n"
      "y[i, j] = e[i, j] / s[i]\n",
      true);
}

TEST_F(WorkGroupReductionsTest, KernelThatReadsBackWhatItStoresStaysPrivate) {
  // y += ... reads y where it stores it: work item 0 alone stores for the group, so the others
  // would read a stale y; the kernel keeps one work item per row.
  expect_exact("input x : f32[12, 200]\nparam y : f32[12]\ny[i] += sum(x[i, j])\n", false);
}

}  // namespace
}  // namespace kiln::e2e
