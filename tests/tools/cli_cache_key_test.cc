// The compile cache keys on what is compiled, not on where the program's file is: a copied or
// renamed program, or the same text at another path, finds the entries the first run made
// (docs/cli.md, "The compile cache"). And an intermediate asked for with --output says how to see it.
#include <filesystem>

#include "common/files_under.h"
#include "tools/cli_test_util.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCliCacheKeyProgram =
    "input  x : f32[4, 8]\n"
    "output y : f32[4, 8]\n"
    "tensor m : f32[4]\n"
    "m[i] = max(x[i, j])\n"
    "y[i, j] = exp(x[i, j] - m[i])\n";

// Every file under the cache directory is one compiled executable (test::files_under).

class CliCacheKeyTest : public CliTest {};

TEST_F(CliCacheKeyTest, ACopiedOrRenamedProgramCompilesNothingAgain) {
  for (const std::string device : {"cpu", "opencl"}) {
    if (!device_present(device)) continue;
    SCOPED_TRACE(device);
    Env e = env();
    e["KILN_CACHE_DIR"] = dir_.file("cache-" + device);
    const std::string first = dir_.file("first.kiln");
    ASSERT_TRUE(write_bytes(first, kCliCacheKeyProgram).ok());
    ProcessResult r = kiln({"run", first, "--device", device}, e);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const size_t entries = test::files_under(e["KILN_CACHE_DIR"]);
    ASSERT_GT(entries, 0u);

    // The same text under another name, in another directory, and through a path with `..` in it.
    fs::create_directories(dir_.file("elsewhere/deeper"));
    const std::string renamed = dir_.file("elsewhere/renamed.kiln");
    ASSERT_TRUE(write_bytes(renamed, kCliCacheKeyProgram).ok());
    for (const std::string& path : {renamed, dir_.file("elsewhere/deeper/../renamed.kiln")}) {
      r = kiln({"run", path, "--device", device}, e);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_EQ(test::files_under(e["KILN_CACHE_DIR"]), entries) << "compiled again for " << path;
    }
  }
}

TEST_F(CliCacheKeyTest, TheGeneratedSourceDoesNotNameTheFile) {
  const std::string a = dir_.file("a.kiln");
  const std::string b = dir_.file("b_with_another_name.kiln");
  ASSERT_TRUE(write_bytes(a, kCliCacheKeyProgram).ok());
  ASSERT_TRUE(write_bytes(b, kCliCacheKeyProgram).ok());
  for (const std::string target : {"cpu", "opencl", "cuda:sm_80"}) {
    ProcessResult ra = kiln({"compile", a, "--target", target, "--emit", "source"}, env(), Captured::kStdout,
                            dir_.file("stderr"));
    ProcessResult rb = kiln({"compile", b, "--target", target, "--emit", "source"}, env(), Captured::kStdout,
                            dir_.file("stderr"));
    ASSERT_EQ(ra.exit_code, 0) << ra.output;
    ASSERT_EQ(rb.exit_code, 0) << rb.output;
    EXPECT_EQ(ra.output, rb.output) << target;
    EXPECT_EQ(ra.output.find("a.kiln"), std::string::npos) << target;
  }
}

TEST_F(CliCacheKeyTest, AnIntermediateAskedForAsAnOutputSaysHowToSeeIt) {
  const std::string program = dir_.file("p.kiln");
  ASSERT_TRUE(write_bytes(program, kCliCacheKeyProgram).ok());
  ProcessResult r = run({"run", program, "--output", "m=" + dir_.file("m.npy")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'m' is an intermediate (`tensor`)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("declare it `output`"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_.file("m.npy")));
}

}  // namespace
}  // namespace kiln::tools
