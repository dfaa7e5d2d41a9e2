// Programs with sizes (language version 2) through `kiln run`: sizes bound from --input files and
// --size, outputs in the bound shapes and right at sizes 1, 7 and 1000 on every device; binding
// errors are usage errors that name the tensor, the size and the values.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/fifo_writer.h"
#include "cli_test_util.h"

namespace kiln::tools {
namespace {

constexpr const char* kSoftmax =
    "size N\n"
    "input  x : f32[N, 10]\n"
    "output y : f32[N, 10]\n"
    "output n : f32[2*N + 1]\n"
    "tensor m : f32[N]\n"
    "tensor e : f32[N, 10]\n"
    "tensor s : f32[N]\n"
    "m[i] = max(x[i, j])\n"
    "e[i, j] = exp(x[i, j] - m[i])\n"
    "s[i] = sum(e[i, j])\n"
    "y[i, j] = e[i, j] / s[i]\n"
    "n[i] = f32(N) + f32(i) where i < 2*N + 1\n";

class CliSizesTest : public CliTest {
 protected:
  std::string program() {
    const std::string path = dir_.file("softmax.kiln");
    EXPECT_TRUE(write_bytes(path, kSoftmax).ok());
    return path;
  }
};

TEST_F(CliSizesTest, OneProgramRunsAtEverySizeItsInputsGive) {
  const std::string prog = program();
  std::vector<std::string> devices = {"cpu", "interp"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (int64_t rows : {1, 7, 1000}) {
    std::vector<float> x(static_cast<size_t>(rows) * 10);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) * 3);
    const std::string input = dir_.file("x" + std::to_string(rows) + ".npy");
    ASSERT_TRUE(write_npy(input, f32_array({rows, 10}, x)).ok());
    for (const std::string& device : devices) {
      const std::string what = device + " at N = " + std::to_string(rows);
      const std::string y = dir_.file("y.npy"), n = dir_.file("n.npy");
      ProcessResult r = run({"run", prog, "--device", device, "--input", "x=" + input, "--output", "y=" + y,
                             "--output", "n=" + n});
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
      Result<NpyArray> ya = read_npy(y), na = read_npy(n);
      ASSERT_TRUE(ya.ok() && na.ok()) << what;
      EXPECT_EQ(ya->shape, (std::vector<int64_t>{rows, 10})) << what;
      EXPECT_EQ(na->shape, (std::vector<int64_t>{2 * rows + 1})) << what;
      const std::vector<float> yv = f32_values(*ya), nv = f32_values(*na);
      for (int64_t i = 0; i < rows; ++i) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < 10; ++j) m = std::max<double>(m, x[i * 10 + j]);
        for (int j = 0; j < 10; ++j) s += std::exp(x[i * 10 + j] - m);
        for (int j = 0; j < 10; ++j) {
          ASSERT_NEAR(yv[i * 10 + j], std::exp(x[i * 10 + j] - m) / s, 1e-6) << what << " at " << i << ", " << j;
        }
      }
      for (int64_t i = 0; i < 2 * rows + 1; ++i) ASSERT_EQ(nv[i], static_cast<float>(rows + i)) << what;
    }
  }
}

TEST_F(CliSizesTest, SizeGivesRandomInputsTheirShapeAndBindingErrorsAreUsageErrors) {
  const std::string prog = program();
  ProcessResult r = run({"run", prog, "--size", "N=3", "--print"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("y : f32 [3, 10]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("n : f32 [7]\n  3 4 5 6 7 8 9"), std::string::npos) << r.output;
  const std::string x = dir_.file("x.npy");
  ASSERT_TRUE(write_npy(x, f32_array({2, 10}, std::vector<float>(20, 1))).ok());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", prog}, "size N is not bound: no input given names it; give it with --size NAME=VALUE"},
      {{"run", prog, "--input", "x=" + x, "--size", "N=4"}, "size N is given as 4, but dimension 0 of input 'x' binds it to 2"},
      {{"run", prog, "--size", "M=4"}, "size M: the program declares no such size"},
      {{"run", prog, "--size", "N=-1"}, "--size N=-1: expected NAME=VALUE"},
  };
  for (const auto& [args, message] : cases) {
    ProcessResult e = run(args);
    EXPECT_EQ(e.exit_code, 2) << e.output;
    EXPECT_NE(e.output.find(message), std::string::npos) << e.output;
  }
  ASSERT_TRUE(write_npy(x, f32_array({2, 11}, std::vector<float>(22, 1))).ok());
  ProcessResult wrong = run({"run", prog, "--input", "x=" + x});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.output.find("dimension 1 of input 'x' is 10, but its value has 11 ([2, 11])"), std::string::npos)
      << wrong.output;
}

}  // namespace
}  // namespace kiln::tools

namespace kiln::tools {
namespace {

// Size 0: empty inputs and outputs, and reductions over nothing giving their neutral elements
// (sum 0, prod 1, max -inf, min +inf, mean NaN, as NumPy gives), on every device.
TEST_F(CliSizesTest, SizeZeroGivesEmptyTensorsAndNeutralElements) {
  const std::string prog = dir_.file("zero.kiln");
  ASSERT_TRUE(write_bytes(prog, "size N\ninput x : f32[N]\noutput s : f32\noutput mx : f32\noutput mn : f32\n"
                                "output me : f32\noutput pr : f32\noutput rows : f32[N, 3]\n"
                                "s = sum(x[i])\nmx = max(x[i])\nmn = min(x[i])\nme = mean(x[i])\npr = prod(x[i])\n"
                                "rows[i, j] = x[i] * f32(j)\n").ok());
  const std::string x = dir_.file("x0.npy");
  ASSERT_TRUE(write_npy(x, f32_array({0}, {})).ok());
  std::vector<std::string> devices = {"cpu", "interp"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (const std::string& device : devices) {
    const std::string rows = dir_.file("rows_" + device + ".npy");
    ProcessResult r = run({"run", prog, "--device", device, "--input", "x=" + x, "--output", "rows=" + rows, "--print"});
    ASSERT_EQ(r.exit_code, 0) << device << "\n" << r.output;
    for (const char* line : {"s : f32 []\n  0\n", "mx : f32 []\n  -inf\n", "mn : f32 []\n  inf\n", "me : f32 []\n  nan\n",
                             "pr : f32 []\n  1\n", "rows : f32 [0, 3]\n"}) {
      EXPECT_NE(r.output.find(line), std::string::npos) << device << ": " << line << "\n" << r.output;
    }
    Result<NpyArray> written = read_npy(rows);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(written->shape, (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE(written->data.empty());
  }
}

// A program with sizes is compiled once for every size: its kernels read the sizes from each
// dispatch. After one run has built them, runs at sizes never seen before find the kernels in the
// cache while the C compiler is gone (KILN_CC names a compiler no longer on PATH), where a program
// specialized per size would need it.
TEST_F(CliSizesTest, CompiledOnceRunsAtNewSizesWithoutTheCompiler) {
  const std::string prog = program();
  const std::string bin = dir_.file("bin");
  ASSERT_TRUE(std::filesystem::create_directory(bin));
  Result<std::string> cc = find_program("cc");
  ASSERT_TRUE(cc.ok()) << cc.status();
  std::filesystem::create_symlink(*cc, bin + "/kiln-test-cc");
  Env with_cc = env();
  with_cc["KILN_CC"] = "kiln-test-cc";
  with_cc["PATH"] = bin + ":" + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
  ProcessResult first = kiln({"run", prog, "--size", "N=5"}, with_cc);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Env without_cc = env();
  without_cc["KILN_CC"] = "kiln-test-cc";
  for (int64_t rows : {1, 7, 1000, 0}) {
    ProcessResult r = kiln({"run", prog, "--size", "N=" + std::to_string(rows), "--print"}, without_cc);
    ASSERT_EQ(r.exit_code, 0) << "N = " << rows << "\n" << r.output;
    EXPECT_NE(r.output.find("y : f32 [" + std::to_string(rows) + ", 10]"), std::string::npos) << r.output;
  }
  // The kernels read the sizes, so --emit source needs none.
  ProcessResult source = run({"compile", prog, "--emit", "source", "--target", "cpu"});
  ASSERT_EQ(source.exit_code, 0) << source.output;
  EXPECT_NE(source.output.find("kiln_size0 = "), std::string::npos) << source.output;
  // The C compiler is really gone: a program it has not built fails for want of it.
  const std::string other_prog = dir_.file("double.kiln");
  ASSERT_TRUE(write_bytes(other_prog, "size N\ninput x : f32[N]\noutput y : f32[N]\ny[i] = 2 * x[i]\n").ok());
  ProcessResult other = kiln({"run", other_prog, "--size", "N=3"}, without_cc);
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("kiln-test-cc"), std::string::npos) << other.output;
}

// A FIFO binds a size and delivers its data in one opening: the file whose header binds the size
// is the one the run reads (a second open would wait for a writer that is gone).
TEST_F(CliSizesTest, AFifoInputBindsItsSizeAndIsReadOnce) {
  const std::string prog = program();
  const std::string fifo = dir_.file("x.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::FifoWriter writer(fifo, format_npy(f32_array({3, 10}, std::vector<float>(30, 1.0f))));
  ProcessResult r = run({"run", prog, "--input", "x=" + fifo, "--print"});
  writer.finish();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("y : f32 [3, 10]\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("n : f32 [7]\n  3 4 5 6 7 8 9"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::tools
