// Sizes, depths and system limits that used to crash `kiln`: byte sizes that overflow, tensors
// the host cannot allocate under an address-space limit, and deep expressions under a small
// stack. Each must end in a message naming what was too big, never a signal or an
// "internal error".
#include <gtest/gtest.h>

#include <string>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

// Sanitizers reserve terabytes of shadow address space and need a normal stack of their own, so
// the ulimit cases run only in the plain build (the size checks run everywhere).
using test::kSanitized;

class CliResourceLimitsTest : public CliTest {
 protected:
  ProcessResult run_limited(const std::vector<std::string>& args, const std::string& ulimits) {
    return kiln(args, env(), Captured::kBoth, "", ulimits);
  }
  std::string program(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_bytes(path, text).ok());
    return path;
  }
  // `y[i] = ((...(x[i])...))` with `depth` parentheses.
  std::string nested(int depth) {
    return "input x : f32[4]\noutput y : f32[4]\ny[i] = " + std::string(depth, '(') + "x[i]" +
           std::string(depth, ')') + "\n";
  }
  static void expect_clean_failure(const ProcessResult& r, int exit_code, const std::string& words,
                                   const std::string& what) {
    EXPECT_EQ(r.exit_code, exit_code) << what << "\n" << r.output;
    EXPECT_NE(r.output.find(words), std::string::npos) << what << "\n" << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << what << "\n" << r.output;
  }
};

TEST_F(CliResourceLimitsTest, ByteSizesThatOverflowArePositionedErrors) {
  std::string dims = "2";
  for (int i = 1; i < 62; ++i) dims += ",2";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"input x : f32[4611686018427387904]\noutput y : f32\ny = sum(x[i])\n", "x.kiln:1:"},
      {"input x : f32[" + dims + "]\noutput y : f32\ny = 1\n", "x.kiln:1:"},
  };
  for (const auto& [text, where] : cases) {
    const std::string path = program("x.kiln", text);
    for (const char* device : {"interp", "cpu"}) {
      ProcessResult r = run({"run", path, "--device", device});
      expect_clean_failure(r, 2, where, text.substr(0, 40) + " on " + device);
    }
  }
}

TEST_F(CliResourceLimitsTest, HostAllocationFailureNamesTheTensorAndItsSize) {
  if (kSanitized) GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory clash";
  // 2^31 f32 elements: 8 GiB of host memory, refused under an 8 GB address-space limit.
  const std::string path =
      program("big.kiln", "input x : f32[2147483648]\noutput y : f32[2147483648]\ny[i] = x[i] * 2\n");
  for (const char* device : {"interp", "cpu"}) {
    ProcessResult r = run_limited({"run", path, "--device", device}, "-v 8000000");
    expect_clean_failure(r, 1, "RESOURCE_EXHAUSTED", device);
    EXPECT_NE(r.output.find("8589934592 bytes"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("'x'"), std::string::npos) << r.output;
  }
}

// Under a small address-space limit no command hangs: OpenBLAS, whose threads once retried a
// 128 MB mmap forever and kept `exit` waiting, is loaded only by a gemm (here: the automatic
// gemm of matmul_bias_relu), and every command ends, well or with a message.
TEST_F(CliResourceLimitsTest, NoCommandHangsUnderASmallAddressSpace) {
  if (kSanitized) GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory clash";
  for (const char* limit : {"-v 200000", "-v 100000"}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--version"}, {"devices"}, {"compile", example("softmax")},
          {"run", example("softmax"), "--device", "interp"}, {"run", example("matmul_bias_relu")}}) {
      ProcessResult r = kiln(args, env(), Captured::kBoth, "", limit, 60000);
      EXPECT_FALSE(r.signalled) << limit << "\n" << describe_run(args, r);
      EXPECT_EQ(r.output.find("internal error"), std::string::npos) << limit << "\n" << describe_run(args, r);
    }
  }
  EXPECT_EQ(kiln({"--version"}, env(), Captured::kBoth, "", "-v 100000", 60000).exit_code, 0);
}

// A stream is a thread: under an address-space limit too small for 100 of them, the thread the
// system refuses is RESOURCE_EXHAUSTED naming the queue, not an "internal error" (an exception).
TEST_F(CliResourceLimitsTest, RunningOutOfThreadsIsResourceExhausted) {
  if (kSanitized) GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory clash";
  std::vector<std::string> args = {"run", example("softmax"), "--streams", "100"};
  ProcessResult r = kiln(args, env(), Captured::kBoth, "", "-v 600000", 60000);
  if (r.exit_code == 0) GTEST_SKIP() << "100 threads fit in 600 MB of address space here";
  expect_clean_failure(r, 1, "RESOURCE_EXHAUSTED", describe_run(args, r));
  EXPECT_NE(r.output.find("thread"), std::string::npos) << r.output;
}

TEST_F(CliResourceLimitsTest, DeepExpressionsDoNotDependOnTheStackLimit) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's runtime needs more than a 64 KiB stack to start";
  // 64 KiB of stack: kiln runs its work on threads with a stack of its own, so a program within
  // the 256-level limit runs, and one past it is a positioned error.
  const std::string ok = program("ok.kiln", nested(200));
  ProcessResult r = run_limited({"run", ok, "--device", "interp"}, "-s 64");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_limited({"compile", ok, "--emit", "lowered"}, "-s 64");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  const std::string deep = program("deep.kiln", nested(300));
  r = run_limited({"run", deep, "--device", "interp"}, "-s 64");
  expect_clean_failure(r, 2, "deep.kiln:3:", "300 levels");
  EXPECT_NE(r.output.find("nested too deeply"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::tools
