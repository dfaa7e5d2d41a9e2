// `kiln run --routine`: which routines run, in which order, and a routine named more than once
// (compiled and linked once, run as often as it is named).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

// `step` halves w and adds x; `total` sums w. With x given, every value after N steps is known.
constexpr const char* kStepProgram =
    "input  x : f32[8]\n"
    "param  w : f32[8] = 1\n"
    "output out : f32[]\n"
    "routine step {\n"
    "  w[i] = w[i] * 0.5 + x[i]\n"
    "}\n"
    "routine total {\n"
    "  out = sum(w[i])\n"
    "}\n";

class CliRoutinesTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    program_ = dir_.file("prog.kiln");
    ASSERT_TRUE(write_bytes(program_, kStepProgram).ok());
    std::vector<float> x(8);
    for (int i = 0; i < 8; ++i) x[i] = float(i);
    x_ = x;
    ASSERT_TRUE(write_bytes(dir_.file("x.npy"), format_npy(f32_array({8}, x))).ok());
  }
  std::vector<std::string> devices() const {
    std::vector<std::string> d = {"cpu", "interp"};
    if (device_present("opencl")) d.push_back("opencl");
    return d;
  }
  // w after `steps` steps from w = 1.
  std::vector<float> w_after(int steps) const {
    std::vector<float> w(8, 1.0f);
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < 8; ++i) w[i] = w[i] * 0.5f + x_[i];
    }
    return w;
  }

  std::string program_;
  std::vector<float> x_;
};

TEST_F(CliRoutinesTest, ARoutineNamedTwiceRunsTwice) {
  for (const std::string& device : devices()) {
    const std::string out = dir_.file("out_" + device + ".npy"), w = dir_.file("w_" + device + ".npy");
    std::vector<std::string> args = {"run", program_, "--device", device, "--input", "x=" + dir_.file("x.npy"),
                                     "--routine", "step", "--routine", "step", "--routine", "total",
                                     "--output", "out=" + out, "--output", "w=" + w};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    Result<NpyArray> w_file = read_npy(w);
    ASSERT_TRUE(w_file.ok()) << w_file.status();
    const std::vector<float> expected = w_after(2);
    EXPECT_EQ(f32_values(*w_file), expected) << device;
    Result<NpyArray> out_file = read_npy(out);
    ASSERT_TRUE(out_file.ok()) << out_file.status();
    float sum = 0;
    for (float v : expected) sum += v;
    ASSERT_EQ(f32_values(*out_file).size(), 1u);
    EXPECT_NEAR(f32_values(*out_file)[0], sum, 1e-4) << device;
  }
}

TEST_F(CliRoutinesTest, RepeatedRoutinesRunInTheOrderGiven) {
  // total, step, step, step, total: out is the sum after three steps (the last total), and
  // interleaving the names the other way gives the sum after one step.
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"total", "step", "step", "step", "total"}, 3},
      {{"step", "total", "step", "step"}, 1},
  };
  for (const auto& [sequence, steps] : cases) {
    for (const std::string& device : devices()) {
      const std::string out = dir_.file("out.npy");
      std::vector<std::string> args = {"run", program_, "--device", device, "--input", "x=" + dir_.file("x.npy"),
                                       "--output", "out=" + out};
      for (const std::string& s : sequence) args.insert(args.end(), {"--routine", s});
      // Repeating the sequence on two streams links each routine once per stream, too.
      args.insert(args.end(), {"--streams", "2"});
      ProcessResult r = run(args);
      ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
      Result<NpyArray> out_file = read_npy(out);
      ASSERT_TRUE(out_file.ok()) << out_file.status();
      float sum = 0;
      for (float v : w_after(steps)) sum += v;
      EXPECT_NEAR(f32_values(*out_file)[0], sum, 1e-4) << describe_run(args, r);
    }
  }
}

// --warmup N runs the sequence N more times before the timed --repeat runs: real runs (w takes
// every step), left out of the timing line's count.
TEST_F(CliRoutinesTest, WarmupRunsAreRealRunsLeftOutOfTheTiming) {
  for (const std::string& device : devices()) {
    const std::string w = dir_.file("w_" + device + ".npy");
    std::vector<std::string> args = {"run", program_, "--device", device, "--input", "x=" + dir_.file("x.npy"),
                                     "--routine", "step", "--warmup", "2", "--repeat", "3", "--output", "w=" + w};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    EXPECT_NE(r.output.find("3 runs: min"), std::string::npos) << describe_run(args, r);
    Result<NpyArray> w_file = read_npy(w);
    ASSERT_TRUE(w_file.ok()) << w_file.status();
    EXPECT_EQ(f32_values(*w_file), w_after(5)) << device;
  }
  // --warmup 0 is no warm-up; a count that is not one is a usage error naming the option.
  ProcessResult none = run({"run", program_, "--routine", "step", "--warmup", "0"});
  EXPECT_EQ(none.exit_code, 0) << none.output;
  for (const char* bad : {"-1", "abc", "1000001"}) {
    ProcessResult r = run({"run", program_, "--warmup", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--warmup needs an integer from 0 to 1000000"), std::string::npos) << r.output;
  }
}

// --params DIR starts each param from DIR/NAME.npy; an --input of the same name wins; a file that
// names no param and a DIR that is no folder are errors that name them.
TEST_F(CliRoutinesTest, ParamsStartFromTheFilesOfAFolder) {
  const std::string dir = dir_.file("params");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::vector<float> w(8, 3.0f), other(8, 5.0f);
  ASSERT_TRUE(write_npy(dir + "/w.npy", f32_array({8}, w)).ok());
  ASSERT_TRUE(write_npy(dir_.file("other.npy"), f32_array({8}, other)).ok());
  const std::string x = "x=" + dir_.file("x.npy"), out = dir_.file("w_out.npy");
  auto w_after_one_step_from = [&](float start) {
    std::vector<float> want(8);
    for (int i = 0; i < 8; ++i) want[i] = start * 0.5f + x_[i];
    return want;
  };
  std::vector<std::string> args = {"run", program_, "--input", x, "--routine", "step", "--params", dir, "--output",
                                    "w=" + out};
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  Result<NpyArray> got = read_npy(out);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(f32_values(*got), w_after_one_step_from(3.0f));
  // An --input of the param wins over the folder's file.
  args = {"run", program_, "--input", x, "--routine", "step", "--params", dir, "--input", "w=" + dir_.file("other.npy"),
          "--output", "w=" + out};
  r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  got = read_npy(out);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(f32_values(*got), w_after_one_step_from(5.0f));
  // A file that names no param, and a folder that is not there.
  ASSERT_TRUE(write_npy(dir + "/wx.npy", f32_array({8}, w)).ok());
  r = run({"run", program_, "--params", dir});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("wx.npy names no param"), std::string::npos) << r.output;
  r = run({"run", program_, "--params", dir_.file("missing")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not a folder"), std::string::npos) << r.output;
}

// An input that no routine being run reads has no device array: its --input file (or its random
// values) only sets its host copy, on every device and with several streams.
TEST_F(CliRoutinesTest, InputsOfRoutinesNotRunAreSetWithoutAnArray) {
  const std::string prog = dir_.file("two.kiln");
  ASSERT_TRUE(write_bytes(prog, "input x : f32[4]\ninput u : f32[4]\noutput y : f32[4]\noutput z : f32[4]\n"
                                "routine a {\n  y[i] = x[i] * 2\n}\nroutine b {\n  z[i] = u[i] + 1\n}\n").ok());
  const std::string x = dir_.file("x.npy"), u = dir_.file("u.npy");
  ASSERT_TRUE(write_npy(x, f32_array({4}, {1, 2, 3, 4})).ok());
  ASSERT_TRUE(write_npy(u, f32_array({4}, {5, 6, 7, 8})).ok());
  std::vector<std::string> devices = {"cpu", "interp"};
  if (device_present("opencl")) devices.push_back("opencl");
  for (const std::string& device : devices) {
    for (const char* streams : {"1", "2"}) {
      ProcessResult r = run({"run", prog, "--routine", "b", "--device", device, "--streams", streams, "--input",
                             "x=" + x, "--input", "u=" + u, "--print"});
      ASSERT_EQ(r.exit_code, 0) << device << "\n" << r.output;
      EXPECT_NE(r.output.find("z : f32 [4]\n  6 7 8 9"), std::string::npos) << device << "\n" << r.output;
    }
  }
}

}  // namespace
}  // namespace kiln::tools
