// The CPU driver's kernel flags against the C compiler bugs we know of: each reduced reproducer
// in tests/drivers/gcc_repro/ is built with exactly the flags the driver builds kernels with
// (CpuCompiler::base_flags) and run; it checks itself against a scalar reference and exits 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/process.h"
#include "drivers/cpu/cpu_compiler.h"
#include "runtime/e2e_util.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::cpu {
namespace {

std::vector<std::string> reproducers() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::string dir = std::string(KILN_SOURCE_DIR) + "/tests/drivers/gcc_repro";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".c") out.push_back(entry.path().string());
  }
  return out;
}

TEST(CompilerFlagsTest, KnownMiscompilesAreAvoidedAtTheDriversFlags) {
  Result<std::string> cc = find_program("cc");
  if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
  const std::vector<std::string> files = reproducers();
  ASSERT_FALSE(files.empty()) << "tests/drivers/gcc_repro/ holds no reproducer";
  e2e::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    std::vector<std::string> argv = {*cc};
    for (const std::string& flag : CpuCompiler::base_flags()) {
      if (flag != "-shared") argv.push_back(flag);  // an executable, with every code flag kept
    }
    const std::string exe = dir.file("repro");
    argv.insert(argv.end(), {file, "-o", exe});
    Result<ProcessResult> built = run_process(argv, 120000);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_EQ(built->exit_code, 0) << built->output;
    Result<ProcessResult> ran = run_process({exe}, 60000);
    ASSERT_TRUE(ran.ok()) << ran.status();
    EXPECT_FALSE(ran->signalled);
    EXPECT_EQ(ran->exit_code, 0) << "wrong code at the driver's flags: " << ran->output;
  }
}

}  // namespace
}  // namespace kiln::cpu
