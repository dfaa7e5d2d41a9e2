// What `kiln` checks before it runs anything, and how it says so (docs/cli.md): malformed
// settings, device ordinals and CUDA architectures are usage errors (exit 2); outputs that cannot
// be written are found before compiling; empty programs, unknown routines and directories are
// named; `kiln` alone prints the usage; `--help` lists every setting.
#include <sys/stat.h>

#include "tools/cli_test_util.h"

namespace kiln::tools {
namespace {

class CliChecksTest : public CliTest {
 protected:
  ProcessResult run_with(const std::vector<std::string>& args, const Env& extra) {
    Env e = env();
    for (const auto& [k, v] : extra) e[k] = v;
    return kiln(args, e);
  }
  std::string program_file(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_bytes(path, text).ok());
    return path;
  }
};

TEST_F(CliChecksTest, MalformedSettingsAreUsageErrorsForEveryCommand) {
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"KILN_CPU_THREADS", "abc"},       {"KILN_OPENCL_WORK_ITEMS", "abc"}, {"KILN_CUDA_BLOCK_SIZE", "0"},
      {"KILN_TRACE_LINES", "-1"},        {"KILN_CC_TIMEOUT", "9999999"},     {"KILN_LOG", "loud"},
      {"KILN_OPENCL_GEMM", "gpu"},        {"KILN_CUDA_GEMM", "yes"},          {"KILN_OPENCL_DEVICE_WAITS", "2"},
      {"KILN_CUDA_GRAPHS", "maybe"},
  };
  for (const auto& [name, value] : settings) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"devices"}, {"run", example("softmax")}, {"compile", example("softmax")}}) {
      ProcessResult r = run_with(args, {{name, value}});
      EXPECT_EQ(r.exit_code, 2) << name << "=" << value << "\n" << describe_run(args, r);
      EXPECT_NE(r.output.find(name + "='" + value + "'"), std::string::npos) << describe_run(args, r);
    }
  }
}

TEST_F(CliChecksTest, DeviceOrdinalsAndArchitecturesAreUsageErrors) {
  for (const char* device : {"cpu:1", "interp:7", "opencl:3"}) {
    std::vector<std::string> args = {"run", example("softmax"), "--device", device};
    ProcessResult r = run(args);
    if (std::string(device) == "opencl:3" && !device_present("opencl")) continue;
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
  }
  std::vector<std::string> args = {"compile", example("softmax"), "--target", "cuda:sm_10", "--emit", "source"};
  ProcessResult r = run(args);
  EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
  EXPECT_NE(r.output.find("sm_10"), std::string::npos) << r.output;
  args = {"compile", example("softmax"), "--target", "cuda:sm_90", "--emit", "source"};
  EXPECT_EQ(run(args).exit_code, 0);
}

TEST_F(CliChecksTest, OutputsThatCannotBeWrittenAreFoundBeforeRunning) {
  const std::string missing_dir = dir_.file("no/such/dir") + "/y.npy";
  std::vector<std::string> args = {"run", example("softmax"), "--output", "y=" + missing_dir};
  ProcessResult r = run(args);
  EXPECT_EQ(r.exit_code, 1) << describe_run(args, r);
  EXPECT_NE(r.output.find(missing_dir), std::string::npos) << r.output;
  // /proc/version: a file whose directory takes no new file; the message names the user's path,
  // not a temporary.
  args = {"run", example("softmax"), "--output", "y=/proc/version"};
  r = run(args);
  EXPECT_EQ(r.exit_code, 1) << describe_run(args, r);
  EXPECT_NE(r.output.find("/proc/version"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(".tmp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cannot create a file in /proc"), std::string::npos) << r.output;
}

TEST_F(CliChecksTest, NothingToRunAndUnknownRoutinesAreNamed) {
  const std::string empty = program_file("empty.kiln", "");
  ProcessResult r = run({"run", empty});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing to run"), std::string::npos) << r.output;
  const std::string two = program_file("two.kiln",
                                       "input x : f32[4]\noutput y : f32[4]\noutput z : f32[4]\n"
                                       "routine first {\n  y[i] = x[i] + 1\n}\nroutine second {\n  z[i] = x[i] * 2\n}\n");
  r = run({"run", two, "--routine", "nosuch"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("(its routines: first, second)"), std::string::npos) << r.output;
  // A directory given as the program: an I/O failure that says what it is, not UNKNOWN.
  r = run({"run", dir_.path()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("UNKNOWN"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Is a directory"), std::string::npos) << r.output;
}

TEST_F(CliChecksTest, NumbersOutOfRangeSaySo) {
  ProcessResult r = run({"run", example("softmax"), "--seed", "18446744073709551616"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("2^64 - 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("too large"), std::string::npos) << r.output;
  r = run({"run", example("softmax"), "--streams", "1000000"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("from 1 to 256"), std::string::npos) << r.output;
}

TEST_F(CliChecksTest, UsageAndHelpSayEverything) {
  ProcessResult r = run({});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("Commands:"), std::string::npos) << r.output;
  r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"KILN_CACHE_DIR", "KILN_CC", "KILN_CFLAGS", "KILN_CC_TIMEOUT", "KILN_CPU_THREADS",
                           "KILN_LOG", "KILN_TRACE_LINES", "KILN_OPENCL_WORK_ITEMS", "KILN_OPENCL_DEVICE_WAITS",
                           "KILN_OPENCL_GEMM", "KILN_CUDA_LIBRARY", "KILN_CUDA_BLOCK_SIZE", "KILN_CUDA_GEMM",
                           "KILN_CUDA_GRAPHS"}) {
    EXPECT_NE(r.output.find(std::string("  ") + name + " "), std::string::npos) << name << "\n" << r.output;
  }
}

TEST_F(CliChecksTest, PrintWritesNanAsNanAndNoTrailingSpaces) {
  const std::string path = program_file("nan.kiln", "input x : f32[3]\noutput y : f32[3]\ny[i] = sqrt(x[i] - 2)\n");
  const std::string x = dir_.file("x.npy");
  ASSERT_TRUE(write_bytes(x, format_npy(f32_array({3}, {1.0f, 6.0f, 2.0f}))).ok());
  ProcessResult r = run({"run", path, "--input", "x=" + x, "--print"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\n  nan 2 0\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("-nan"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(" \n"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::tools

namespace kiln::tools {
namespace {

// A memory mode written in the program that the compiler cannot honour is an error in the
// program: at the declaration's FILE:LINE:COL with the line quoted, before anything runs, for
// `run` and `compile --emit lowered` alike; modes it can honour run.
TEST_F(CliChecksTest, MemoryModesTheCompilerCannotHonourAreErrorsAtTheDeclaration) {
  const std::string bad = dir_.file("modes.kiln");
  ASSERT_TRUE(write_bytes(bad, "input x : f32[4, 8]\noutput y : f32[4]\ntensor t : f32[4] @virtual\n"
                               "t[i] = sum(x[i, j])\ny[i] = t[i] + t[3 - i]\n").ok());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", bad}, std::vector<std::string>{"compile", bad, "--emit", "lowered"}}) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("modes.kiln:3:8: error: tensor 't' cannot be virtual"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("tensor t : f32[4] @virtual\n       ^"), std::string::npos) << r.output;
  }
  const std::string good = dir_.file("good.kiln");
  ASSERT_TRUE(write_bytes(good, "input x : f32[4, 8] @device\noutput y : f32[4] @hosted\ntensor h : f32[4, 8] @local\n"
                                "h[i, j] = x[i, j] * 2\ny[i] = sum(h[i, j])\n").ok());
  for (const char* device : {"cpu", "interp"}) {
    ProcessResult r = run({"run", good, "--device", device, "--print"});
    EXPECT_EQ(r.exit_code, 0) << device << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::tools
