// `where` bounds far beyond what a statement's subscripts reach: the loops stop at the tensors'
// edges (the same results as the tight bound, on every device), and a statement whose loops no
// device can count is refused at the bound's FILE:LINE:COL before anything is compiled.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

class CliWhereBoundsTest : public CliTest {
 protected:
  std::string program(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_bytes(path, text).ok());
    return path;
  }
};

std::string pooling(const std::string& dx_bound) {
  return "input img : f32[2, 3, 16, 16]\noutput p : f32[2, 3, 8, 4]\n"
         "p[n, c, y, x] = max(img[n, c, 2*y + dy, 2*x + dx]) where dy < 2, dx < " + dx_bound + "\n";
}

TEST_F(CliWhereBoundsTest, ABoundFarBeyondTheImageGivesTheTightBoundsResultsOnEveryDevice) {
  const std::string far = program("far.kiln", pooling("4294967296"));
  const std::string tight = program("tight.kiln", pooling("16"));
  std::vector<std::string> devices = {"interp", "cpu"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (const std::string& device : devices) {
    const std::string a = dir_.file("far_" + device + ".npy"), b = dir_.file("tight_" + device + ".npy");
    // Before, 2^32 steps of dx per output point: hours; the run's time limit fails the test.
    ProcessResult r = run({"run", far, "--device", device, "--output", "p=" + a});
    ASSERT_EQ(r.exit_code, 0) << device << "\n" << r.output;
    ASSERT_EQ(run({"run", tight, "--device", device, "--output", "p=" + b}).exit_code, 0) << device;
    Result<NpyArray> far_p = read_npy(a), tight_p = read_npy(b);
    ASSERT_TRUE(far_p.ok() && tight_p.ok()) << device;
    EXPECT_EQ(far_p->data, tight_p->data) << device;
  }
}

TEST_F(CliWhereBoundsTest, LoopsNoDeviceCanCountAreRefusedAtTheBound) {
  const std::string path = program("huge.kiln",
                                   "output s : f64\n"
                                   "s = sum(f64(k) * f64(j)) where j < 4096, k < 4503599627370496\n");
  for (const char* command : {"run", "compile"}) {
    ProcessResult r = run({command, path});
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("huge.kiln:2:42: error:"), std::string::npos) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("no device's loop counters can count"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace kiln::tools
