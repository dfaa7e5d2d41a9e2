// The unroll hint of the OpenCL dialect (DialectSyntax::unroll_hint): the loops that fill a split
// reduction's private lanes are marked `#pragma unroll`, so that PoCL keeps the lanes in
// registers; the shared lanes of a work-group reduction, every other loop, and the C dialect
// get none. What the kernels compute is checked on PoCL by the differential tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/codegen/c_emitter.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"

namespace kiln::codegen {
namespace {

std::string source_of(const std::string& text, Dialect dialect) {
  Result<ir::Program> program = lang::parse_program(text, "lanes.kiln");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return "";
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, {});
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (!lowered.ok()) return "";
  std::vector<ir::Kernel> kernels;
  for (const ir::LoweredRoutine& r : lowered->routines) kernels.insert(kernels.end(), r.kernels.begin(), r.kernels.end());
  Result<std::string> source = emit_kernels(kernels, &lowered->program, {dialect});
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *source : "";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The line after each `#pragma unroll`.
std::vector<std::string> unrolled_loops(const std::string& source) {
  std::vector<std::string> loops;
  const std::string hint = "#pragma unroll\n";
  for (size_t at = source.find(hint); at != std::string::npos; at = source.find(hint, at + 1)) {
    const size_t begin = source.find_first_not_of(' ', at + hint.size());
    loops.push_back(source.substr(begin, source.find('\n', begin) - begin));
  }
  return loops;
}

constexpr const char* kRowSum = "input x : f32[64, 1024]\noutput y : f32[64]\ny[i] = sum(x[i, j])\n";

TEST(UnrolledLanes, RowSumLaneLoopsAreUnrolledInOpenCl) {
  const std::string source = source_of(kRowSum, Dialect::kOpenCL);
  // The first 32 lanes, then each block of 32 added to them; the group form (for several work
  // items per group) strides over the shared lanes and is left as it is.
  EXPECT_EQ(unrolled_loops(source),
            (std::vector<std::string>{"for (long v3 = 0; v3 < 32; ++v3) {", "for (long v3 = 0; v3 < 32; ++v3) {"}))
      << source;
  EXPECT_EQ(count(source, "v3 < 32; v3 += (long)get_local_size(0)"), 2) << source;
}

TEST(UnrolledLanes, EveryReductionOfASoftmaxIsUnrolled) {
  const std::string source = source_of(
      "input x : f32[8, 512]\noutput y : f32[8, 512]\ntensor m : f32[8]\ntensor s : f32[8]\n"
      "m[i] = max(x[i, j])\ns[i] = sum(exp(x[i, j] - m[i]))\ny[i, j] = exp(x[i, j] - m[i]) / s[i]\n",
      Dialect::kOpenCL);
  // Two lane loops (the first lanes, the rest) per reduction; the elementwise loop is not one.
  const std::vector<std::string> loops = unrolled_loops(source);
  EXPECT_EQ(loops.size(), 4u) << source;
  for (const std::string& loop : loops) EXPECT_NE(loop.find("< 32; ++"), std::string::npos) << loop;
}

TEST(UnrolledLanes, NoHintInC) {
  EXPECT_EQ(count(source_of(kRowSum, Dialect::kC), "#pragma"), 0);
}

TEST(UnrolledLanes, NoHintWithoutASplitReduction) {
  // Eight elements per row: too short to split into lanes.
  EXPECT_EQ(count(source_of("input x : f32[64, 8]\noutput y : f32[64]\ny[i] = sum(x[i, j])\n", Dialect::kOpenCL),
                  "#pragma unroll"),
            0);
}

}  // namespace
}  // namespace kiln::codegen
