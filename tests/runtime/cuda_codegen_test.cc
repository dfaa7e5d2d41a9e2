// The CUDA C that kiln generates builds, without a GPU: every example (plain and with value
// tracing), the fuzzer's corpus of programs and a batch of the differential test's generated
// programs are lowered, emitted in the CUDA dialect, built by NVRTC (loaded as the CUDA driver
// loads it) to PTX for sm_90 (every fourth program for sm_80 too), and assembled by ptxas with
// warnings as errors (cuda_build.h, which also says what sanitizer builds sample). The language
// semantics test builds its programs the same way. Skipped, with the reason, where NVRTC or
// ptxas is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "ral/library/cuda_kernels.h"
#include "runtime/cuda_build.h"
#include "runtime/program_generator.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::e2e {
namespace {

std::vector<std::filesystem::path> kiln_files(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/" + dir, ec)) {
    if (entry.path().extension() == ".kiln") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class CudaCodegenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = cuda_toolchain_available();
    if (!available.ok()) GTEST_SKIP() << "no CUDA toolkit to build with: " << available;
  }

  // Lowers `text` with `options` and builds its CUDA C; a program that does not parse or lower
  // is counted in *refused when given, else fails the test.
  void expect_builds(const std::string& text, const std::string& label, const ir::LowerOptions& options,
                     int* refused = nullptr) {
    Result<ir::Program> program = lang::parse_program(text, label);
    Result<ir::LoweredProgram> lowered =
        program.ok() ? ir::lower_program(*program, options) : Result<ir::LoweredProgram>(program.status());
    if (!lowered.ok()) {
      if (refused) {
        ++*refused;
      } else {
        ADD_FAILURE() << label << ": " << lowered.status();
      }
      return;
    }
    const int n = programs_++;
    if (n % kCudaBuildEvery != 0) {
      Result<std::string> source = cuda_source_of(*lowered);
      EXPECT_TRUE(source.ok()) << label << ": " << source.status();
      return;
    }
    Status built = check_cuda_builds(*lowered, label, n / kCudaBuildEvery % kCudaEveryArchEvery == 0);
    EXPECT_TRUE(built.ok()) << label << ": " << built;
  }

 private:
  int programs_ = 0;  // lowered so far, for kCudaBuildEvery
};

TEST_F(CudaCodegenTest, EveryExampleBuildsPlainAndTraced) {
  const auto files = kiln_files("examples/kiln");
  ASSERT_GE(files.size(), 5u);
  for (const auto& file : files) {
    Result<std::string> text = read_file(file.string());
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string label = "examples/kiln/" + file.filename().string();
    expect_builds(*text, label, {});
    ir::LowerOptions traced;
    traced.trace_values = true;
    expect_builds(*text, label + " (traced)", traced);
  }
}

// The corpus holds programs that lower and some that are refused (which is the fuzzer's
// business); every one that lowers must build.
TEST_F(CudaCodegenTest, EveryCorpusProgramThatLowersBuilds) {
  const auto files = kiln_files("tests/fuzz/corpus/kiln");
  ASSERT_GE(files.size(), 10u);
  int refused = 0;
  for (const auto& file : files) {
    Result<std::string> text = read_file(file.string());
    ASSERT_TRUE(text.ok()) << text.status();
    expect_builds(*text, "corpus/" + file.filename().string(), {}, &refused);
  }
  EXPECT_LT(refused, static_cast<int>(files.size()) / 2) << "most of the corpus no longer lowers";
}

// Generated programs, concatenated into one file as the differential test batches them, with
// default lowering and with the reference's plain one.
TEST_F(CudaCodegenTest, GeneratedProgramsBuild) {
  constexpr int kPrograms = 16;
  std::string text;
  for (int n = 0; n < kPrograms; ++n) {
    text += ProgramGenerator(1000 + n, "p" + std::to_string(n) + "_", false).generate() + "\n";
  }
  expect_builds(text, "generated.kiln", {});
  ir::LowerOptions plain;
  plain.inline_virtual = plain.fuse = plain.collapse = plain.local_arrays = plain.optimize = false;
  expect_builds(text, "generated.kiln (plain lowering)", plain);
}

// The library kernels the cuda device runs for sort, argsort, topk, the random numbers, the i8
// products cuBLAS does not take and qgemm's scales (tests/ral/cuda_kernels_test.cc runs the same
// text on the host).
TEST_F(CudaCodegenTest, LibraryKernelsBuild) {
  const std::string source(ral::library::cuda_library_source());
  for (const char* kernel : {"kiln_gemm_i8(", "kiln_qgemm_scale("}) {
    EXPECT_NE(source.find(std::string("extern \"C\" __global__ void ") + kernel), std::string::npos) << kernel;
  }
  Status built = check_cuda_source_builds(source, "kiln library kernels");
  EXPECT_TRUE(built.ok()) << built;
}

}  // namespace
}  // namespace kiln::e2e
