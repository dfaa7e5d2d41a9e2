// Golden files of the compiler's output for some examples: the lowered loop IR (`kiln compile
// --emit lowered`) and the generated C source (`kiln compile --emit source`, device cpu), kept in
// tests/codegen/golden_programs/ so that every change of generated code shows in review.
//
// After an intended change, rewrite them and review the diff:
//   KILN_UPDATE_GOLDEN=1 ./kiln_runtime_test --gtest_filter='GoldenTest.*'
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/base/env.h"
#include "kiln/loop/loop.h"
#include "kiln/loop/lower.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/code.h"
#include "runtime/e2e_util.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::e2e {
namespace {

const std::vector<std::string>& golden_examples() {
  static const std::vector<std::string> names = {"matmul_bias_relu", "softmax", "maxpool", "conv2d",
                                                 "layernorm"};
  return names;
}

std::string golden_dir() { return std::string(KILN_SOURCE_DIR) + "/tests/codegen/golden_programs"; }

bool updating() {
  std::optional<std::string> v = env_string("KILN_UPDATE_GOLDEN");
  return v && *v != "0";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Where two texts first differ, with a few lines of context from each.
std::string first_difference_of(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a = lines_of(expected), b = lines_of(actual);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::ostringstream os;
  os << "first difference at line " << i + 1 << " (golden has " << a.size() << " lines, the compiler gave "
     << b.size() << ")\n";
  for (size_t k = i; k < std::min(a.size(), i + 4); ++k) os << "  golden:   " << a[k] << "\n";
  for (size_t k = i; k < std::min(b.size(), i + 4); ++k) os << "  compiled: " << b[k] << "\n";
  return os.str();
}

void check_golden(const std::string& file, const std::string& actual) {
  const std::string path = golden_dir() + "/" + file;
  if (updating()) {
    Status st = make_directories(golden_dir());
    if (st.ok()) st = write_file_atomic(path, actual);
    ASSERT_TRUE(st.ok()) << st;
    std::printf("rewrote %s\n", path.c_str());
    return;
  }
  Result<std::string> expected = read_file(path);
  ASSERT_TRUE(expected.ok()) << expected.status()
                             << "\n(no golden file: create it with KILN_UPDATE_GOLDEN=1)";
  if (*expected != actual) {
    ADD_FAILURE() << file << " differs from what the compiler generates now: "
                  << first_difference_of(*expected, actual)
                  << "If the change is intended, rewrite the golden files with KILN_UPDATE_GOLDEN=1 "
                     "and review their diff.";
  }
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, LoweredAndSourceMatchTheGoldenFiles) {
  const std::string name = GetParam();
  Result<std::string> text = read_file(std::string(KILN_SOURCE_DIR) + "/examples/kiln/" + name + ".kiln");
  ASSERT_TRUE(text.ok()) << text.status();
  Result<ir::Program> program = lang::parse_program(*text, "examples/kiln/" + name + ".kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program);
  ASSERT_TRUE(lowered.ok()) << lowered.status();

  // What `kiln compile --emit lowered` prints; it reads back as the same kernels.
  const std::string lowered_text = ir::print_lowered(*lowered);
  Result<std::vector<ir::Kernel>> kernels = ir::parse_kernels(lowered_text);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  size_t kernel_count = 0;
  for (const ir::LoweredRoutine& r : lowered->routines) kernel_count += r.kernels.size();
  EXPECT_EQ(kernels->size(), kernel_count);
  check_golden(name + ".lowered", lowered_text);

  // What `kiln compile --emit source` prints for the CPU.
  TempDir cache;
  auto cpu = open_device("cpu", cache.path());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::string format;
  Result<std::string> source =
      runtime::generate_source(*lowered, (*cpu)->info(), &format);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(format, "c");
  check_golden(name + ".c", *source);
}

INSTANTIATE_TEST_SUITE_P(Examples, GoldenTest, ::testing::ValuesIn(golden_examples()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Generating the same program twice gives the same text (no addresses, hash orders or times).
TEST(GoldenDeterminismTest, GeneratedTextIsDeterministic) {
  for (const std::string& name : golden_examples()) {
    Result<std::string> text = read_file(std::string(KILN_SOURCE_DIR) + "/examples/kiln/" + name + ".kiln");
    ASSERT_TRUE(text.ok()) << text.status();
    std::string first, second;
    for (std::string* out : {&first, &second}) {
      Result<ir::Program> program = lang::parse_program(*text, "x.kiln");
      ASSERT_TRUE(program.ok()) << program.status();
      Result<ir::LoweredProgram> lowered = ir::lower_program(*program);
      ASSERT_TRUE(lowered.ok()) << lowered.status();
      *out = ir::print_lowered(*lowered);
    }
    EXPECT_EQ(first, second) << name;
  }
}

}  // namespace
}  // namespace kiln::e2e
