// `kiln compile --timings` (docs/cli.md): it builds the program for the device through the kernel
// cache, as a run does, and reports each phase, the compiler's steps and every kernel; the
// second time the build is a cache hit, and it does not combine with --emit or --target.
#include <string>

#include "tools/cli_test_util.h"

namespace kiln::tools {
namespace {

constexpr const char* kCliCompileTimingsProgram =
    "size N\n"
    "input  x : f32[N, 8]\n"
    "output y : f32[N, 8]\n"
    "tensor m : f32[N]\n"
    "m[i] = max(x[i, j])\n"
    "y[i, j] = exp(x[i, j] - m[i])\n";

class CliCompileTimingsTest : public CliTest {};

TEST_F(CliCompileTimingsTest, ReportsEveryPhaseAndKernelThenACacheHit) {
  Env e = env();
  e["KILN_CACHE_DIR"] = dir_.file("cache");
  const std::string program = dir_.file("softmax.kiln");
  ASSERT_TRUE(write_bytes(program, kCliCompileTimingsProgram).ok());
  ProcessResult r = kiln({"compile", program, "--timings"}, e);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* phase : {"compile timings on cpu:0 (c, ", "parsing", "lowering", "passes", "emitting",
                            "building, of which:", "lines)", "total", "per kernel", "main_0"}) {
    EXPECT_NE(r.output.find(phase), std::string::npos) << phase << " missing from:\n" << r.output;
  }
  EXPECT_EQ(r.output.find("disk cache"), std::string::npos) << r.output;

  r = kiln({"compile", program, "--timings"}, e);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loaded from the disk cache"), std::string::npos) << r.output;
}

TEST_F(CliCompileTimingsTest, NotWithEmitOrTarget) {
  const std::string program = dir_.file("softmax.kiln");
  ASSERT_TRUE(write_bytes(program, kCliCompileTimingsProgram).ok());
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--emit", "source"}, std::vector<std::string>{"--target", "cpu"}}) {
    std::vector<std::string> args = {"compile", program, "--timings"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult r = kiln(args, env());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--timings"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace kiln::tools
