// Generated C in translation units (kiln/kernel_abi.h, KILN_UNIT_BOUNDARY): the split and its
// grouping (drivers/cpu/c_units.h), and the CPU compiler building a large source in parts side
// by side and linking them, with the real C compiler: every function of every part is in the
// object, a static helper of the common text is in each part, one thread-local variable is shared
// by all, and a part that does not compile is named and kept.
#include <gtest/gtest.h>

#include <string>

#include "base/disk_cache.h"
#include "common/temp_dir.h"
#include "drivers/cpu/c_units.h"
#include "drivers/cpu/cpu_compiler.h"
#include "kiln/base/env.h"
#include "kiln/kernel_abi.h"

namespace kiln::cpu {
namespace {

const std::string kBoundary = KILN_UNIT_BOUNDARY;

TEST(CUnitsTest, SplitsAtWholeBoundaryLinesOnly) {
  const std::string source = "common\n" + kBoundary + "\nunit a\n  " + kBoundary + "\n" + kBoundary + "\nunit b\n";
  const CUnits split = split_units(source);
  EXPECT_EQ(split.common, "common\n");
  ASSERT_EQ(split.units.size(), 2u);
  EXPECT_EQ(split.units[0], kBoundary + "\nunit a\n  " + kBoundary + "\n");  // indented: not a boundary
  EXPECT_EQ(split.units[1], kBoundary + "\nunit b\n");

  const CUnits none = split_units("int f(void);\n");
  EXPECT_EQ(none.common, "int f(void);\n");
  EXPECT_TRUE(none.units.empty());
}

TEST(CUnitsTest, GroupsLargestFirstIntoAtMostJobsSourcesOfAtLeastMinBytes) {
  const std::string big(300, 'b'), mid(200, 'm'), small(100, 's');
  const std::string source = "H\n" + kBoundary + "\n" + small + "\n" + kBoundary + "\n" + big + "\n" + kBoundary +
                             "\n" + mid + "\n" + kBoundary + "\n" + small + "\n";
  // Two jobs: big to the first, mid to the second, the first small to the second (then 300 each),
  // the last small to the first; each source is the common text and its units in their order.
  std::vector<std::string> two = group_units(source, 2, 1);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], "H\n" + kBoundary + "\n" + big + "\n" + kBoundary + "\n" + small + "\n");
  EXPECT_EQ(two[1], "H\n" + kBoundary + "\n" + small + "\n" + kBoundary + "\n" + mid + "\n");
  // More jobs than units: one source a unit.
  EXPECT_EQ(group_units(source, 16, 1).size(), 4u);
  // Too little code to split for the minimum: the whole text, unchanged.
  EXPECT_EQ(group_units(source, 2, 1 << 20), std::vector<std::string>{source});
  EXPECT_EQ(group_units(source, 1, 1), std::vector<std::string>{source});
  EXPECT_EQ(group_units("int f(void);\n", 8, 1), std::vector<std::string>{"int f(void);\n"});
}

// A source of `parts` units of about 40 KiB each (above the compiler's minimum part size), each
// with a function part_I() that returns I + helper(); the common text has the static helper and
// the thread-local variable that unit 0 defines and the others write.
std::string large_source(int parts, const std::string& broken_unit = "") {
  std::string s = "static int helper(void) { return 1000; }\n"
                  "extern __attribute__((visibility(\"hidden\"))) _Thread_local int shared_value;\n";
  for (int i = 0; i < parts; ++i) {
    s += kBoundary + "\n";
    if (i == 0) s += "__attribute__((visibility(\"hidden\"))) _Thread_local int shared_value;\n";
    s += "int part_" + std::to_string(i) + "(void) { shared_value += " + std::to_string(i) +
         "; return " + std::to_string(i) + " + helper(); }\n";
    // Padding that the compiler parses but that costs it nothing.
    for (int line = 0; line < 1000; ++line) s += "/* padding padding padding padding */\n";
  }
  if (!broken_unit.empty()) s += kBoundary + "\n" + broken_unit + "\n";
  s += "int shared_total(void) { return shared_value; }\n";
  return s;
}

CpuCompiler compiler(const std::string& cache_dir, size_t jobs) {
  return CpuCompiler(env_string("KILN_CC").value_or("cc"), "", DiskCache(cache_dir), 120000, jobs);
}

TEST(CpuUnitsTest, PartsCompiledSideBySideLinkIntoOneObject) {
  test::TempDir cache;
  ASSERT_FALSE(cache.path().empty());
  CpuCompiler cc = compiler(cache.path(), 3);
  const std::string source = large_source(4);
  ASSERT_EQ(group_units(source, 3, 32 * 1024).size(), 3u) << "the source must be split to test the split";
  std::vector<hal::BuildStep> steps;
  Result<std::shared_ptr<LoadedLibrary>> library = cc.build(source, "units", &steps);
  ASSERT_TRUE(library.ok()) << library.status();
  // Three compiles and a link, as the build reports them.
  ASSERT_EQ(steps.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(steps[i].what.find("part " + std::to_string(i + 1) + " of 3"), std::string::npos) << steps[i].what;
  }
  EXPECT_EQ(steps[3].what.rfind("link", 0), 0u) << steps[3].what;
  for (int i = 0; i < 4; ++i) {
    Result<void*> part = (*library)->symbol("part_" + std::to_string(i));
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(reinterpret_cast<int (*)()>(*part)(), 1000 + i);
  }
  Result<void*> total = (*library)->symbol("shared_total");
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(reinterpret_cast<int (*)()>(*total)(), 0 + 1 + 2 + 3);  // one variable, written by every part
  EXPECT_EQ(cc.stats().compiles, 1u);

  // The same source again: the object built before, nothing compiled.
  steps.clear();
  ASSERT_TRUE(cc.build(source, "units", &steps).ok());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_NE(steps[0].what.find("in memory"), std::string::npos) << steps[0].what;
}

TEST(CpuUnitsTest, APartThatDoesNotCompileIsNamedAndKept) {
  test::TempDir cache;
  ASSERT_FALSE(cache.path().empty());
  CpuCompiler cc = compiler(cache.path(), 2);
  Result<std::shared_ptr<LoadedLibrary>> library = cc.build(large_source(2, "int broken(void) { return x_undeclared; }"), "units");
  ASSERT_FALSE(library.ok());
  const std::string message = library.status().message();
  EXPECT_NE(message.find("compiling part "), std::string::npos) << message;
  EXPECT_NE(message.find("x_undeclared"), std::string::npos) << message;
  EXPECT_NE(message.find("source kept at "), std::string::npos) << message;
}

}  // namespace
}  // namespace kiln::cpu
