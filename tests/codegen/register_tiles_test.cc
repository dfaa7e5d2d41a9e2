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

#include "codegen/run_kernels.h"
#include "drivers/interp/interpreter.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/loop/optimize.h"

namespace kiln::codegen_test {
namespace {

using ir::Kernel;

template <typename T, typename Distribution>
Bytes random_bytes(int64_t count, Distribution d, std::mt19937* rng) {
  std::vector<T> v(static_cast<size_t>(count));
  for (T& x : v) x = d(*rng);
  return bytes_of(v);
}

// One buffer per node of `kernel`, random: floats (f32, f64) in [-1, 1], integers (i32, i64) in
// [-50, 50].
NodeData random_data(const ir::Program& program, const Kernel& kernel, uint32_t seed) {
  std::mt19937 rng(seed);
  NodeData data;
  for (int node : kernel.nodes) {
    const ir::TensorNode& n = program.nodes.at(static_cast<size_t>(node));
    const int64_t count = n.element_count();
    data[node] = n.dtype == ir::DType::kF32   ? random_bytes<float>(count, std::uniform_real_distribution<float>(-1, 1), &rng)
                 : n.dtype == ir::DType::kF64 ? random_bytes<double>(count, std::uniform_real_distribution<double>(-1, 1), &rng)
                 : n.dtype == ir::DType::kI64 ? random_bytes<int64_t>(count, std::uniform_int_distribution<int64_t>(-50, 50), &rng)
                                              : random_bytes<int32_t>(count, std::uniform_int_distribution<int32_t>(-50, 50), &rng);
  }
  return data;
}

// Runs `kernel` on the reference interpreter over `data` with `workgroups` workgroups in x.
void interpret(const Kernel& kernel, NodeData* data, uint32_t workgroups) {
  interp::Interpreter interpreter(kernel);
  std::vector<void*> bindings;
  std::vector<size_t> lengths;
  for (int node : kernel.nodes) {
    bindings.push_back(data->at(node).data());
    lengths.push_back(data->at(node).size());
  }
  kiln_dispatch_state_t state{};
  state.abi_version = KILN_KERNEL_ABI_VERSION;
  state.workgroup_count[0] = workgroups;
  state.workgroup_count[1] = state.workgroup_count[2] = 1;
  state.binding_count = static_cast<uint32_t>(bindings.size());
  state.bindings = bindings.data();
  state.binding_lengths = lengths.data();
  for (uint32_t x = 0; x < workgroups; ++x) {
    const kiln_workgroup_id_t id{x, 0, 0};
    ASSERT_EQ(interpreter.run_workgroup(&state, &id), interp::kInterpOk)
        << interp::interp_code_name(interpreter.run_workgroup(&state, &id));
  }
}

template <typename T>
bool close_values(const Bytes& a, const Bytes& b) {
  const std::vector<T> x = values_of<T>(a), y = values_of<T>(b);
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i], v = y[i];
    if (!(std::abs(u - v) <= 1e-5 + 1e-5 * std::abs(u))) return false;
  }
  return true;
}

// Whether two buffers of `type` agree within a relative and absolute 1e-5 (integers exactly).
bool close(ir::DType type, const Bytes& a, const Bytes& b) {
  if (a.size() != b.size()) return false;
  if (type == ir::DType::kF32) return close_values<float>(a, b);
  if (type == ir::DType::kF64) return close_values<double>(a, b);
  return a == b;
}

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
    SCOPED_TRACE(ir::print_kernel(tiled));
    const NodeData inputs = random_data(lowered->program, original, 7);
    NodeData expected = inputs, got = inputs;
    interpret(original, &expected, 3);
    interpret(tiled, &got, 2);
    EXPECT_TRUE(got == expected) << "the tiled kernel stores other bits than the original";
    NodeData cpu = inputs;
    const std::vector<Kernel> kernels = {tiled};
    ASSERT_TRUE(compile_and_run(kernels, &lowered->program, &cpu, 2).ok());
    for (const auto& [node, bytes] : expected) {
      EXPECT_TRUE(close(lowered->program.nodes.at(static_cast<size_t>(node)).dtype, bytes, cpu.at(node)))
          << "node " << node << " differs on the cpu device";
    }
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
