// split_borders (kiln/loop/optimize.h) on the kernels lowering makes of windows read at offsets
// (padded depthwise convolutions, shifted reads, pools): the split kernel stores the very same
// bits as the original on the reference interpreter, at interiors long and too short to split,
// and the generated C of the split kernel, run by the cpu device, agrees with it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/reference_runs.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/loop/optimize.h"

namespace kiln::codegen_test {
namespace {

using ir::Kernel;

// A 3x3 depthwise window over [C, H, W] written tap by tap, as kiln.onnx writes it. (With 64
// channels lowering keeps the loops over rows and columns apart from the parallel loop over
// channels; a small tensor's loops are merged into one parallel loop, which is never split.)
std::string depthwise(int channels, int height, int width, int stride) {
  const int out_h = (height + 2 - 3) / stride + 1, out_w = (width + 2 - 3) / stride + 1;
  std::string text = "input x : f32[" + std::to_string(channels) + ", " + std::to_string(height) + ", " +
                     std::to_string(width) + "]\ninput w : f32[" + std::to_string(channels) +
                     ", 3, 3]\noutput y : f32[" + std::to_string(channels) + ", " + std::to_string(out_h) +
                     ", " + std::to_string(out_w) + "]\ny[c, i, j] = ";
  const std::string s = std::to_string(stride);
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) {
      if (kh || kw) text += " + ";
      text += "x[c, " + s + "*i + " + std::to_string(kh) + " - 1, " + s + "*j + " + std::to_string(kw) +
              " - 1] * w[c, " + std::to_string(kh) + ", " + std::to_string(kw) + "]";
    }
  }
  return text + "\n";
}

struct BorderCase {
  const char* what;
  std::string program;
  bool splits;  // whether some kernel must split
};

class BorderSplitTest : public ::testing::TestWithParam<BorderCase> {};

TEST_P(BorderSplitTest, SplitKernelsStoreTheSameBitsAndTheCpuAgrees) {
  Result<ir::Program> program = lang::parse_program(GetParam().program, "borders.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  ir::LowerOptions options;
  options.optimize = false;  // the pass under test runs below
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  int split_count = 0;
  for (const Kernel& original : lowered->routines.at(0).kernels) {
    Kernel split = original;
    if (!ir::split_borders(split)) continue;
    ++split_count;
    ir::fold_constants(split);
    expect_same_bits_and_cpu_agrees(*lowered, original, split, 11);
  }
  EXPECT_EQ(split_count > 0, GetParam().splits) << ir::print_lowered(*lowered);
}

INSTANTIATE_TEST_SUITE_P(
    Windows, BorderSplitTest,
    ::testing::Values(
        BorderCase{"depthwise_16x16", depthwise(64, 16, 16, 1), true},
        BorderCase{"depthwise_stride_2_odd", depthwise(64, 17, 13, 2), true},
        BorderCase{"depthwise_9x8", depthwise(64, 9, 8, 1), true},
        // 5 wide: an interior of 3, too short to split.
        BorderCase{"depthwise_5x5", depthwise(64, 5, 5, 1), false},
        BorderCase{"shifted_reads", "input x : i32[64, 40]\noutput y : i32[64, 40]\ny[c, i] = x[c, i - 2] * 3 + x[c, i + 3]\n", true},
        BorderCase{"padded_max_pool",
                   "input x : f64[64, 12, 12]\noutput y : f64[64, 6, 6]\n"
                   "y[c, i, j] = max(x[c, 2*i + r - 1, 2*j + s - 1]) where r < 3, s < 3\n",
                   false},
        BorderCase{"where_bound_in_a_select",
                   "input x : f32[64, 64]\noutput y : f32[64, 64]\n"
                   "y[c, i] = select(i < 60, x[c, i + 2], -x[c, i])\n",
                   true},
        BorderCase{"inner_loop_of_two", "input x : f32[64, 8, 32]\noutput y : f32[64, 8, 32]\ny[c, i, j] = x[c, i, j + 1] - x[c, i, j]\n", true}),
    [](const ::testing::TestParamInfo<BorderCase>& info) { return std::string(info.param.what); });

}  // namespace
}  // namespace kiln::codegen_test
