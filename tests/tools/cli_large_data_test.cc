// Large inputs and outputs through `kiln run`: on devices whose memory is host memory (cpu,
// interp) an --input file is read straight into the device's array and an --output written from
// it, so that a run holds each array once; on the others the values go through the host copy.
// The values must arrive whole either way, with several streams as with one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

using test::kSanitized;  // shadow memory and quarantines change what a process holds

class CliLargeDataTest : public CliTest {
 protected:
  // `y[i] = 2 * x[i] + 1` over n f32, and x.npy holding x[i] = i % 1000.
  std::string program(int64_t n) {
    const std::string path = dir_.file("y2x" + std::to_string(n) + ".kiln");
    const std::string text = "input x : f32[" + std::to_string(n) + "]\noutput y : f32[" + std::to_string(n) +
                             "]\ny[i] = 2 * x[i] + 1\n";
    EXPECT_TRUE(write_bytes(path, text).ok());
    return path;
  }
  std::string input(int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 1000);
    const std::string path = dir_.file("x" + std::to_string(n) + ".npy");
    EXPECT_TRUE(write_npy(path, f32_array({n}, x)).ok());
    return path;
  }
  void expect_doubled(const std::string& path, int64_t n, const std::string& what) {
    Result<NpyArray> y = read_npy(path);
    ASSERT_TRUE(y.ok()) << what << ": " << y.status().to_string();
    ASSERT_EQ(y->shape, std::vector<int64_t>{n}) << what;
    const std::vector<float> v = f32_values(*y);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += v[static_cast<size_t>(i)] != 2.0f * static_cast<float>(i % 1000) + 1;
    EXPECT_EQ(wrong, 0) << what;
  }
};

TEST_F(CliLargeDataTest, InputsAndOutputsArriveWholeOnEveryDeviceAndStreamCount) {
  const int64_t n = (int64_t{1} << 20) + 3;  // past the huge-page size, and not a multiple of it
  const std::string prog = program(n);
  const std::string x = input(n);
  std::vector<std::string> devices = {"cpu", "interp"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (const std::string& device : devices) {
    for (const char* streams : {"1", "3"}) {
      const std::string what = device + " with " + streams + " streams";
      const std::string y = dir_.file("y_" + device + "_" + streams + ".npy");
      ProcessResult r = run({"run", prog, "--device", device, "--streams", streams, "--input", "x=" + x,
                             "--output", "y=" + y});
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
      expect_doubled(y, n, what);
    }
  }
}

// Before, a run held each array four times over (the file's bytes, the host copy, the device's
// array, the bytes written out): 3.5 times NumPy's memory for y = 2x over 1 GiB.
TEST_F(CliLargeDataTest, ARunOnTheCpuDeviceHoldsEachArrayOnce) {
  if (kSanitized) GTEST_SKIP() << "sanitizers' shadow memory and quarantines change a process's size";
  const int64_t n = int64_t{1} << 24;  // 64 MiB in, 64 MiB out
  const double data_bytes = 2.0 * n * sizeof(float);
  const std::string small = program(16), large = program(n);
  const std::string x = input(n), y = dir_.file("y.npy");
  const std::vector<std::string> small_run = {"run", small, "--device", "cpu"};
  const std::vector<std::string> large_run = {"run", large, "--device", "cpu", "--input", "x=" + x, "--output", "y=" + y};
  // The first runs compile (the C compiler's memory counts toward a process's peak); the
  // measured ones load the code from the cache.
  ASSERT_EQ(run(small_run).exit_code, 0);
  ASSERT_EQ(run(large_run).exit_code, 0);
  ProcessResult base = run(small_run);
  ProcessResult r = run(large_run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_doubled(y, n, "cpu");
  const double added = static_cast<double>(r.peak_memory_bytes - base.peak_memory_bytes);
  EXPECT_LT(added, 1.25 * data_bytes) << "a run over " << data_bytes / (1 << 20) << " MiB of data took "
                                      << added / (1 << 20) << " MiB more than a run over 64 bytes";
}

}  // namespace
}  // namespace kiln::tools
