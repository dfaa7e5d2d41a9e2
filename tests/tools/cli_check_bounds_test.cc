// `kiln run --check-bounds`: a gathered subscript outside its dimension fails the run (exit 1)
// with the statement's PROGRAM:LINE, the tensor and the index, on every device; without the flag
// the run reads 0 there and succeeds. `kiln run --help` and `kiln compile --help` document it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

class CliCheckBoundsTest : public CliTest {
 protected:
  // An embedding lookup, its table and the rows it looks up (one of them out of range).
  void SetUp() override {
    CliTest::SetUp();
    program_ = dir_.file("embed.kiln");
    ASSERT_TRUE(write_bytes(program_, "input  e : f32[5, 3]\ninput  t : i32[4]\noutput y : f32[4, 3]\n"
                                      "y[i, j] = e[t[i], j]\n").ok());
    std::vector<float> table(15);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i + 1);
    table_ = dir_.file("e.npy");
    ASSERT_TRUE(write_npy(table_, f32_array({5, 3}, table)).ok());
    const int32_t rows[] = {0, 4, 7, 1};
    NpyArray t{ir::DType::kI32, {4}, std::string(sizeof rows, '\0')};
    std::memcpy(t.data.data(), rows, sizeof rows);
    rows_ = dir_.file("t.npy");
    ASSERT_TRUE(write_npy(rows_, t).ok());
  }

  std::string program_, table_, rows_;
};

TEST_F(CliCheckBoundsTest, AnOutOfRangeGatherFailsTheRunNamingIt) {
  std::vector<std::string> devices = {"interp", "cpu"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (const std::string& device : devices) {
    const std::string out = dir_.file("y_" + device + ".npy");
    const std::vector<std::string> args = {"run", program_, "--device", device, "--input", "e=" + table_,
                                           "--input", "t=" + rows_, "--output", "y=" + out};
    // Unchecked: row 2 reads 0.
    ProcessResult plain = run(args);
    ASSERT_EQ(plain.exit_code, 0) << describe_run(args, plain);
    Result<NpyArray> y = read_npy(out);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(f32_values(*y), (std::vector<float>{1, 2, 3, 13, 14, 15, 0, 0, 0, 4, 5, 6})) << device;

    std::vector<std::string> checked = args;
    checked.push_back("--check-bounds");
    ProcessResult r = run(checked);
    EXPECT_EQ(r.exit_code, 1) << describe_run(checked, r);
    EXPECT_NE(r.output.find(program_ + ":4: index out of range: dimension 0 of 'e' has size 5, but e[t[i], j] in "
                            "routine 'main' (y[i, j] = e[t[i], j]) reads index 7"),
              std::string::npos)
        << describe_run(checked, r);
  }
}

TEST_F(CliCheckBoundsTest, TheHelpOfRunAndCompileDocumentsIt) {
  for (const char* command : {"run", "compile"}) {
    ProcessResult r = run({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("--check-bounds"), std::string::npos) << command << "\n" << r.output;
  }
  // The lowered kernels show the check.
  ProcessResult lowered = run({"compile", program_, "--emit", "lowered", "--check-bounds"});
  EXPECT_EQ(lowered.exit_code, 0) << lowered.output;
  EXPECT_NE(lowered.output.find("(fail 0 \""), std::string::npos) << lowered.output;
}

}  // namespace
}  // namespace kiln::tools
