// OpenCL driver specifics: availability without a platform (in a child process whose ICD loader
// sees an empty vendor directory), build failures with their log, allocations above
// CL_DEVICE_MAX_MEM_ALLOC_SIZE, large buffers (in huge pages of the driver's own on a CPU
// device), the program-binary disk cache (warm loads, refused binaries, binaries planted in
// another user's cache), transfers between the
// OpenCL and CPU devices, and work groups of several work items for kernels
// written for any local size. Every test skips, naming why, without OpenCL.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "common/driver_availability.h"
#include "common/files_under.h"
#include "common/other_user.h"
#include "common/scoped_env.h"
#include "common/temp_dir.h"
#include "common/test_child.h"
#include "common/wait_limit.h"
#include "drivers/opencl/cl_device.h"
#include "kiln/drivers/drivers.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::kWaitMs;

#define REQUIRE_OPENCL()                                                   \
  do {                                                                     \
    Status available_ = test::driver_availability("opencl");               \
    if (!available_.ok()) GTEST_SKIP() << "no OpenCL: " << available_;     \
  } while (0)

using test::TempDir;

hal::DeviceRef open_device(const std::string& cache_dir) {
  hal::DeviceOptions options;
  options.cache_dir = cache_dir;
  auto device = drivers::builtin_registry().create_device("opencl", options);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? *device : nullptr;
}

// Child mode: run by NoPlatformIsUnavailable with OCL_ICD_VENDORS naming an empty directory.
TEST(OpenCLChildTest, ReportsNoPlatform) {
  if (!std::getenv("KILN_OPENCL_TEST_CHILD")) GTEST_SKIP() << "runs only as a child process";
  Status status = test::driver_availability("opencl");
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status;
  auto device = drivers::builtin_registry().create_device("opencl");
  EXPECT_FALSE(device.ok());
  std::printf("child: %s\n", status.to_string().c_str());
}

TEST(OpenCLDriverTest, NoPlatformIsUnavailable) {
  TempDir empty;
  ASSERT_FALSE(empty.path().empty());
  const std::string output = test::run_test_child(
      {"OCL_ICD_VENDORS=" + empty.path(), "OCL_ICD_FILENAMES=", "KILN_OPENCL_TEST_CHILD=1"},
      "OpenCLChildTest.ReportsNoPlatform", 60000);
  // Without the library at all the reason names the library instead; either way it is a reason.
  EXPECT_TRUE(output.find("no OpenCL platform") != std::string::npos ||
              output.find("library was not found") != std::string::npos)
      << output;
}

TEST(OpenCLDriverTest, BuildFailureCarriesTheLog) {
  REQUIRE_OPENCL();
  TempDir cache;
  hal::DeviceRef device = open_device(cache.path());
  ASSERT_TRUE(device);
  auto exe = device->compile_executable(
      {"opencl-c", "__kernel void bad(KILN_STATUS_PARAMS) { KILN_ENTRY(); int x = kiln_no_such_name; }",
       {{"bad", 0, 0}}, "bad.cl"});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument) << exe.status();
  EXPECT_NE(exe.status().message().find("kiln_no_such_name"), std::string::npos) << exe.status();
  EXPECT_NE(exe.status().message().find("bad.cl"), std::string::npos) << exe.status();
  // A missing export is NOT_FOUND.
  auto missing = device->compile_executable(
      {"opencl-c", "__kernel void present(KILN_STATUS_PARAMS) { KILN_ENTRY(); }", {{"absent", 0, 0}}, "m.cl"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status();
}

TEST(OpenCLDriverTest, AllocationAboveTheDeviceLimit) {
  REQUIRE_OPENCL();
  hal::DeviceRef device = open_device("");
  ASSERT_TRUE(device);
  const uint64_t max = device->info().capabilities.max_allocation_size;
  auto buffer = device->allocator().allocate({}, max + 1);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted) << buffer.status();
  EXPECT_NE(buffer.status().message().find("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), std::string::npos);
}

// Writes word i of binding 0 (from its offset on) as i + constant 0, from workgroup 0.
const char* const kIotaKernel =
    "__kernel void iota(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_CONSTANT_PARAM(0)) { KILN_ENTRY();\n"
    "  __global uint* out = KILN_BINDING(uint, 0);\n"
    "  for (ulong i = 0; i < KILN_BINDING_LENGTH(0) / 4; ++i) out[i] = (uint)i + KILN_CONSTANT(0);\n"
    "}\n";

TEST(OpenCLDriverTest, LargeBuffersHoldTheirBytes) {
  // Above 4 MiB a CPU device's buffers are host memory in huge pages (cl_allocator.cc); a kernel
  // at an offset, a copy, a read and a map must all see the same bytes, buffer after buffer.
  REQUIRE_OPENCL();
  hal::DeviceRef device = open_device("");
  ASSERT_TRUE(device);
  auto exe = device->compile_executable({"opencl-c", kIotaKernel, {{"iota", 1, 1}}, "iota.cl"});
  ASSERT_TRUE(exe.ok()) << exe.status();
  hal::QueueRef queue = *device->create_queue();
  auto s = device->create_semaphore(0);
  const size_t size = (size_t{6} << 20) + 12, words = size / 4;  // not a whole number of huge pages
  uint64_t step = 0;
  for (uint32_t round = 0; round < 3; ++round) {
    hal::BufferRef a = *device->allocator().allocate({}, size), b = *device->allocator().allocate({}, size);
    const uint32_t zero = 0;
    ASSERT_TRUE(queue->fill({{s, step}}, {{s, step + 1}}, a, 0, size, &zero, 4).ok());
    // Words 4.. of a get i + round * 7 (i counted from word 4); words 0..3 stay 0.
    hal::DispatchCommand iota{*exe, 0, {1, 1, 1}, {round * 7}, {{a, 16, size - 16}}};
    ASSERT_TRUE(queue->dispatch({{s, step + 1}}, {{s, step + 2}}, iota).ok());
    ASSERT_TRUE(queue->copy({{s, step + 2}}, {{s, step + 3}}, a, 0, b, 0, size).ok());
    std::vector<uint32_t> read(words, 1);
    ASSERT_TRUE(queue->read({{s, step + 3}}, {{s, step + 4}}, b, 0, read.data(), size).ok());
    step += 4;
    ASSERT_TRUE(s->wait(step, Timeout::after_ms(kWaitMs)).ok());
    auto expect = [&](const uint32_t* w, const char* what) {
      for (size_t i = 0; i < words; ++i) {
        ASSERT_EQ(w[i], i < 4 ? 0u : uint32_t(i - 4) + round * 7) << what << " word " << i << ", round " << round;
      }
    };
    expect(read.data(), "read of the copy");
    hal::Mapping mapping = *a->map(hal::MapAccess::kRead);
    expect(static_cast<const uint32_t*>(mapping.data()), "map");
  }
}

TEST(OpenCLDriverTest, BinaryCacheWarmAndRefused) {
  REQUIRE_OPENCL();
  TempDir cache;
  const hal::ExecutableSource source{
      "opencl-c", "/* cache test */ __kernel void k(KILN_STATUS_PARAMS) { KILN_ENTRY(); }", {{"k", 0, 0}}, "c.cl"};
  {
    hal::DeviceRef cold = open_device(cache.path());
    ASSERT_TRUE(cold);
    ASSERT_TRUE(cold->compile_executable(source).ok());
    auto stats = static_cast<opencl::ClDevice&>(*cold).compiler().stats();
    EXPECT_EQ(stats.source_builds, 1u);
  }
  std::string entry;
  for (const auto& file : fs::directory_iterator(cache.path())) {
    if (file.path().extension() == ".clbin") entry = file.path().stem().string();
  }
  ASSERT_FALSE(entry.empty()) << "no .clbin entry in " << cache.path();
  {
    hal::DeviceRef warm = open_device(cache.path());
    ASSERT_TRUE(warm->compile_executable(source).ok());
    auto stats = static_cast<opencl::ClDevice&>(*warm).compiler().stats();
    EXPECT_EQ(stats.binary_loads, 1u);
    EXPECT_EQ(stats.source_builds, 0u);
  }
  // A well-formed cache entry whose binary the driver refuses: rebuilt from source.
  ASSERT_TRUE(DiskCache(cache.path()).store(entry, "clbin", "not an OpenCL binary").ok());
  hal::DeviceRef refused = open_device(cache.path());
  ASSERT_TRUE(refused->compile_executable(source).ok());
  auto stats = static_cast<opencl::ClDevice&>(*refused).compiler().stats();
  EXPECT_EQ(stats.refused_binaries, 1u);
  EXPECT_EQ(stats.source_builds, 1u);
}

// A binary planted under a valid trailer in a cache directory another user owns (or, without
// root, one others may write) is never loaded: the program is built from its own source.
TEST(OpenCLDriverTest, BinaryPlantedInACacheOfAnotherUserIsNotLoaded) {
  REQUIRE_OPENCL();
  TempDir root;
  const std::string ours = root.file("ours"), theirs = root.file("theirs");
  auto source = [](const std::string& body) {
    return hal::ExecutableSource{"opencl-c", "/* trust test */ __kernel void k(KILN_STATUS_PARAMS) { KILN_ENTRY(); " + body + " }",
                                 {{"k", 0, 0}}, "trust.cl"};
  };
  const hal::ExecutableSource our_source = source(""), their_source = source("int unused = 3; (void)unused;");
  ASSERT_TRUE(open_device(ours)->compile_executable(our_source).ok());
  ASSERT_TRUE(open_device(theirs)->compile_executable(their_source).ok());
  auto entry_name = [](const std::string& dir) {
    std::string name;
    for (const auto& file : fs::directory_iterator(dir)) {
      if (file.path().extension() == ".clbin") name = file.path().filename().string();
    }
    EXPECT_FALSE(name.empty()) << "no .clbin entry in " << dir;
    return name;
  };
  const std::string our_name = entry_name(ours), their_name = entry_name(theirs);
  const std::string their_bytes = read_file(theirs + "/" + their_name).value();
  const std::optional<std::string_view> binary = DiskCache::parse_entry(their_bytes, their_name);
  ASSERT_TRUE(binary.has_value());
  ASSERT_TRUE(write_file_atomic(ours + "/" + our_name, DiskCache::make_entry(our_name, std::string(*binary))).ok());
  if (::geteuid() == 0) {
    ASSERT_TRUE(test::give_to_other_user(ours));
  } else {
    ASSERT_EQ(::chmod(ours.c_str(), 0777), 0);
  }
  hal::DeviceRef device = open_device(ours);
  ASSERT_TRUE(device->compile_executable(our_source).ok());
  auto stats = static_cast<opencl::ClDevice&>(*device).compiler().stats();
  EXPECT_EQ(stats.binary_loads, 0u);
  EXPECT_EQ(stats.source_builds, 1u);
}

TEST(OpenCLDriverTest, TransfersWithTheCpuDevice) {
  REQUIRE_OPENCL();
  hal::DeviceRef ocl = open_device("");
  auto cpu = drivers::builtin_registry().create_device("cpu");
  ASSERT_TRUE(ocl && cpu.ok());
  hal::QueueRef ocl_queue = *ocl->create_queue(), cpu_queue = *(*cpu)->create_queue();
  const size_t size = 4096;
  hal::BufferRef host_side = *(*cpu)->allocator().allocate({}, size);
  hal::BufferRef device_side = *ocl->allocator().allocate({}, size);
  // Queue::copy takes buffers of its own device only.
  EXPECT_EQ(ocl_queue->copy({}, {}, host_side, 0, device_side, 0, size).code(),
            StatusCode::kInvalidArgument);
  // CPU fills its buffer; OpenCL writes it to the device from the CPU buffer's memory once the
  // fill signals, doubles nothing, reads it back into the CPU buffer; CPU copies the result.
  auto s = ocl->create_semaphore(0);
  hal::Mapping mapping = *host_side->map(hal::MapAccess::kReadWrite);
  uint8_t pattern = 0x5A;
  ASSERT_TRUE(cpu_queue->fill({}, {{s, 1}}, host_side, 0, size, &pattern, 1).ok());
  ASSERT_TRUE(ocl_queue->write({{s, 1}}, {{s, 2}}, mapping.data(), device_side, 0, size).ok());
  uint8_t zero = 0;
  ASSERT_TRUE(cpu_queue->fill({{s, 2}}, {{s, 3}}, host_side, 0, size, &zero, 1).ok());
  ASSERT_TRUE(ocl_queue->read({{s, 3}}, {{s, 4}}, device_side, 0, mapping.data(), size).ok());
  ASSERT_TRUE(s->wait(4, Timeout::after_ms(kWaitMs)).ok());
  const auto* bytes = static_cast<const uint8_t*>(mapping.data());
  for (size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0x5A) << i;
}

// Runs `sizes` (below) in 3 workgroups and returns what each work item wrote: slot g * 256 + i
// holds the local size if work item i of workgroup g ran, else 0.
const char* const kSizesKernel =
    "__kernel void sizes(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) { KILN_ENTRY();\n"
    "  __global uint* out = KILN_BINDING(uint, 0);\n"
    "  out[get_group_id(0) * 256 + get_local_id(0)] = (uint)get_local_size(0);\n"
    "}\n";

Result<hal::ExecutableRef> compile_sizes(const hal::DeviceRef& device, bool any_local_size) {
  return device->compile_executable({"opencl-c", kSizesKernel, {{"sizes", 1, 0, any_local_size}}, "sizes.cl"});
}

Result<std::vector<uint32_t>> run_sizes(const hal::DeviceRef& device, const hal::ExecutableRef& exe) {
  std::vector<uint32_t> words(3 * 256, 0);
  KILN_ASSIGN_OR_RETURN(hal::BufferRef out, device->allocator().allocate({}, words.size() * 4));
  KILN_RETURN_IF_ERROR(out->write_data(0, words.data(), words.size() * 4));
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, device->create_queue());
  auto s = device->create_semaphore(0);
  hal::DispatchCommand dispatch;
  dispatch.executable = exe;
  dispatch.workgroups = {3, 1, 1};
  dispatch.bindings.push_back({out});
  KILN_RETURN_IF_ERROR(queue->dispatch({}, {{s, 1}}, std::move(dispatch)));
  KILN_RETURN_IF_ERROR(s->wait(1, Timeout::after_ms(kWaitMs)));
  KILN_RETURN_IF_ERROR(out->read_data(0, words.data(), words.size() * 4));
  return words;
}

Result<std::vector<uint32_t>> run_sizes(const hal::DeviceRef& device, bool any_local_size) {
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef exe, compile_sizes(device, any_local_size));
  return run_sizes(device, exe);
}

// Every work item of every workgroup ran once, with `local` items per workgroup.
void expect_workgroups_of(const std::vector<uint32_t>& words, uint32_t local) {
  for (size_t g = 0; g < 3; ++g) {
    for (size_t i = 0; i < 256; ++i) {
      ASSERT_EQ(words[g * 256 + i], i < local ? local : 0u) << "workgroup " << g << ", item " << i;
    }
  }
}

TEST(OpenCLDriverTest, AnyLocalSizeExportsRunSeveralWorkItemsPerWorkgroup) {
  REQUIRE_OPENCL();
  hal::DeviceRef device = open_device("");
  ASSERT_TRUE(device);
  {
    test::ScopedEnv items("KILN_OPENCL_WORK_ITEMS", "64");
    Result<std::vector<uint32_t>> any = run_sizes(device, true);
    ASSERT_TRUE(any.ok()) << any.status();
    EXPECT_GT((*any)[0], 1u) << "KILN_OPENCL_WORK_ITEMS=64 ran one work item per workgroup";
    EXPECT_LE((*any)[0], 64u);
    expect_workgroups_of(*any, (*any)[0]);
    // An export that does not say any_local_size runs one work item, whatever the variable says.
    Result<std::vector<uint32_t>> one = run_sizes(device, false);
    ASSERT_TRUE(one.ok()) << one.status();
    expect_workgroups_of(*one, 1);
  }
  // The driver's own choice (one work item on a CPU device, about 64 on a GPU) is some size the
  // kernel runs correctly with.
  Result<std::vector<uint32_t>> chosen = run_sizes(device, true);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_GE((*chosen)[0], 1u);
  expect_workgroups_of(*chosen, (*chosen)[0]);
  // A bad value fails the build, naming the variable.
  test::ScopedEnv bad("KILN_OPENCL_WORK_ITEMS", "0");
  Result<std::vector<uint32_t>> refused = run_sizes(device, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("KILN_OPENCL_WORK_ITEMS"), std::string::npos) << refused.status();
}

// In a fresh process with PoCL's own kernel cache in a directory of its own: kiln's compile
// leaves PoCL nothing to compile at the first dispatch (which would show as new files there).
TEST(OpenCLChildTest, DispatchCompilesNothing) {
  if (!std::getenv("KILN_OPENCL_TEST_CHILD")) GTEST_SKIP() << "runs only as a child process";
  REQUIRE_OPENCL();
  hal::DeviceRef device = open_device("");  // no kiln cache: compile() still builds everything
  ASSERT_TRUE(device);
  const std::string platform = dynamic_cast<opencl::ClDevice&>(*device).record().platform_name;
  if (platform.find("Portable Computing Language") == std::string::npos) {
    GTEST_SKIP() << "the platform is " << platform << ", not PoCL";
  }
  const char* set = std::getenv("POCL_WORK_GROUP_SPECIALIZATION");
  EXPECT_STREQ(set ? set : "(unset)", "0") << "kiln sets it when it is loaded";
  const std::string kcache = std::string(std::getenv("XDG_CACHE_HOME")) + "/pocl/kcache";
  Result<hal::ExecutableRef> exe = compile_sizes(device, true);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const size_t compiled = test::files_under(kcache);
  EXPECT_GT(compiled, 0u) << "PoCL's kernel cache is not where this test looks: " << kcache;
  Result<std::vector<uint32_t>> words = run_sizes(device, *exe);
  ASSERT_TRUE(words.ok()) << words.status();
  expect_workgroups_of(*words, (*words)[0]);
  EXPECT_EQ(test::files_under(kcache), compiled) << "PoCL compiled at the dispatch";
  std::printf("child: %zu files in PoCL's cache after compile, none added by the dispatch\n", compiled);
}

TEST(OpenCLDriverTest, CompileLeavesNothingToCompileAtTheFirstDispatch) {
  REQUIRE_OPENCL();
  TempDir home;
  ASSERT_FALSE(home.path().empty());
  const std::string output = test::run_test_child(
      {"-u", "POCL_WORK_GROUP_SPECIALIZATION", "XDG_CACHE_HOME=" + home.path(), "POCL_KERNEL_CACHE=1",
       "KILN_OPENCL_TEST_CHILD=1"},
      "OpenCLChildTest.DispatchCompilesNothing");
  EXPECT_TRUE(output.find("child: ") != std::string::npos || output.find("not PoCL") != std::string::npos)
      << output;
}

}  // namespace
}  // namespace kiln
