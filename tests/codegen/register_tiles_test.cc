// tile_contractions (kiln/loop/optimize.h) on the kernels lowering makes of real products, on
// random data: the tiled kernel stores the very same bits as the original on the reference
// interpreter (each element sees the same operations in the same order), whatever the shape's
// remainders (a partial block of rows, columns past the last tile, batches), and the generated
// C of the tiled kernel, run by the cpu device, agrees with the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "codegen/reference_runs.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/loop/optimize.h"

namespace kiln::codegen_test {
namespace {

using ir::Kernel;

struct ProductCase {
  const char* what;
  std::string program;
};

// Lowers `text` unoptimized, tiles each kernel, and checks the tiled kernels against the
// originals (interpreter, same bits) and the cpu device (close); at least one must tile.
void expect_tiles_keep_results(const std::string& text) {
  Result<ir::Program> program = lang::parse_program(text, "tiles.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  ir::LowerOptions options;
  options.optimize = false;  // the passes under test run below, one at a time
  options.auto_calls = false;
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  int tiled_count = 0;
  for (const Kernel& original : lowered->routines.at(0).kernels) {
    Kernel tiled = original;
    if (!ir::tile_contractions(tiled)) continue;
    ++tiled_count;
    expect_same_bits_and_cpu_agrees(*lowered, original, tiled, 7);
  }
  EXPECT_GE(tiled_count, 1) << ir::print_lowered(*lowered);
}

class RegisterTilesTest : public ::testing::TestWithParam<ProductCase> {};

TEST_P(RegisterTilesTest, TiledKernelsStoreTheSameBitsAndTheCpuAgrees) {
  expect_tiles_keep_results(GetParam().program);
}

// Shapes around the edges: rows a multiple of the 6-row tile or not, of a step or not, in one
// step, two or four (over 264 rows); columns exactly one tile, one more, several; a reduction
// of 1, and ones over a block of 256 ks (two blocks of 150; 129 and 128; 260 and 260).
TEST(RegisterTilesShapes, EdgesOfTilesStepsAndBlocks) {
  const int64_t shapes[][3] = {{64, 1, 16}, {96, 2, 17}, {97, 9, 48}, {101, 5, 33}, {144, 3, 16}, {65, 520, 16},
                               {133, 300, 47}, {269, 257, 35}, {531, 3, 21}};
  for (size_t s = 0; s < std::size(shapes); ++s) {
#ifdef KILN_SANITIZED
    // The sanitizers check the pass's code and the interpreter, which every shape runs through;
    // the interpreter under them takes most of the time: the small shapes and one over two blocks.
    if (s != 0 && s != 1 && s != 3 && s != 5) continue;
#endif
    const auto& [rows, k, cols] = shapes[s];
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(k) + " x " + std::to_string(cols));
    const std::string m = std::to_string(rows), n = std::to_string(cols), r = std::to_string(k);
    expect_tiles_keep_results("input a : f32[" + m + ", " + r + "]\ninput b : f32[" + r + ", " + n + "]\n" +
                              "output c : f32[" + m + ", " + n + "]\nc[i, j] = sum(a[i, k] * b[k, j])\n");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Products, RegisterTilesTest,
    ::testing::Values(
        // 67 rows: eleven whole blocks and one row; 37 columns: two tiles and 5 more. (Lowering
        // keeps rows apart from columns from 64 rows on.)
        ProductCase{"f32", "input a : f32[67, 7]\ninput b : f32[7, 37]\noutput c : f32[67, 37]\n"
                           "c[i, j] = sum(a[i, k] * b[k, j])\n"},
        // Batches collapse into the rows, and the second operand's row depends on the batch.
        ProductCase{"batched", "input a : f32[3, 64, 5]\ninput b : f32[3, 5, 20]\noutput c : f32[3, 64, 20]\n"
                               "c[n, i, j] = sum(a[n, i, k] * b[n, k, j])\n"},
        // A reduction longer than one block of ks (512 f32): a whole block and one of 18.
        ProductCase{"kblocks", "input a : f32[67, 530]\ninput b : f32[530, 16]\noutput c : f32[67, 16]\n"
                               "c[i, j] = sum(a[i, k] * b[k, j])\n"},
        ProductCase{"f64", "input a : f64[66, 4]\ninput b : f64[4, 9]\noutput c : f64[66, 9]\n"
                           "c[i, j] = sum(a[i, k] * b[k, j])\n"},
        // Integers: an i32 sum accumulates in i32 in place, which wraps as its i64 accumulation
        // type would (language version 3), so it tiles; and i64.
        ProductCase{"i32", "input a : i32[64, 3]\ninput b : i32[3, 16]\noutput c : i32[64, 16]\n"
                           "c[i, j] = sum(a[i, k] * b[k, j])\n"},
        ProductCase{"i64", "input a : i64[64, 3]\ninput b : i64[3, 16]\noutput c : i64[64, 16]\n"
                           "c[i, j] = sum(a[i, k] * b[k, j])\n"},
        // A product fused with a statement that reads it (run for the block's rows after its
        // tiles), and one that adds to its target.
        ProductCase{"fused", "input a : f32[65, 4]\ninput b : f32[4, 17]\noutput t : f32[65, 17]\n"
                             "output c : f32[65, 17]\nt[i, j] = sum(a[i, k] * b[k, j])\nc[i, j] = relu(t[i, j])\n"},
        // A value that is not safe on padding (a division): whole tiles, and the original loops
        // for the last rows and columns.
        ProductCase{"divided", "input a : f32[67, 7]\ninput b : f32[7, 37]\noutput c : f32[67, 37]\n"
                               "c[i, j] = sum(a[i, k] / (b[k, j] + 3))\n"},
        ProductCase{"accumulate", "input a : f32[70, 5]\ninput b : f32[5, 16]\noutput c : f32[70, 16]\n"
                                  "c[i, j] = a[i, 0]\nc[i, j] += sum(a[i, k] * b[k, j])\n"}),
    [](const ::testing::TestParamInfo<ProductCase>& info) { return std::string(info.param.what); });

}  // namespace
}  // namespace kiln::codegen_test
