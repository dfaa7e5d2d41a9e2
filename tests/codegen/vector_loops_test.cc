// Small inner loops written with vector extensions in the C dialect (src/codegen/kernel_vectors.cc):
// which loops qualify (printed source), and that the vector form computes what the loop IR says
// (run on the cpu device, with inputs whose results are exact in any rounding).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/kernels.h"
#include "codegen/run_kernels.h"
#include "kiln/codegen/c_emitter.h"

namespace kiln::codegen_test {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kF64 = DType::kF64;

LExprRef load(int node, DType t, LExprRef at) { return ir::lload(node, t, std::move(at)); }
LExprRef op(Op o, DType t, std::vector<LExprRef> args) { return ir::lop(o, t, std::move(args)); }

// x f32[4, 16], b f32[16], y f32[4, 16], xd f64[4, 8], yd f64[4, 8].
ir::Program program() {
  ir::Program p;
  p.file = "<vector loops test>";
  p.nodes = {make_node(0, "x", ir::Role::kInput, kF32, {4, 16}), make_node(1, "b", ir::Role::kInput, kF32, {16}),
             make_node(2, "y", ir::Role::kOutput, kF32, {4, 16}), make_node(3, "xd", ir::Role::kInput, kF64, {4, 8}),
             make_node(4, "yd", ir::Role::kOutput, kF64, {4, 8})};
  return p;
}

// for v0 in [0, 4) parallel:
//   for v1 in [0, 16): y[v0 * 16 + v1] = x[v0 * 16 + v1] * (b[0] + 1) + b[v1] - y[v0 * 16 + v1]
//   for v2 in [0, 8): yd[v0 * 8 + v2] = fma(xd[v0 * 8 + v2], xd[v0 * 8 + v2], 0.5)
Kernel kernel() {
  Kernel k;
  k.name = "main_0";
  k.nodes = {0, 1, 2, 3, 4};
  k.var_count = 3;
  const LExprRef at = add64(mul64(v(0), i64(16)), v(1));
  const LExprRef scale = op(Op::kAdd, kF32, {load(1, kF32, i64(0)), ir::lconst(kF32, 1)});
  const LExprRef y = op(Op::kSub, kF32, {op(Op::kAdd, kF32, {op(Op::kMul, kF32, {load(0, kF32, at), scale}),
                                                              load(1, kF32, v(1))}),
                                          load(2, kF32, at)});
  const LExprRef atd = add64(mul64(v(0), i64(8)), v(2));
  const LExprRef yd = op(Op::kFma, kF64, {load(3, kF64, atd), load(3, kF64, atd), ir::lconst(kF64, 0.5)});
  k.body = ploop(0, 4, {loop(1, 16, {store(2, at, y)}), loop(2, 8, {store(4, atd, yd)})});
  return k;
}

std::string source_of(const Kernel& k) {
  const ir::Program p = program();
  Result<std::string> source = codegen::emit_kernels(std::vector<Kernel>{k}, &p, {});
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *source : "";
}

TEST(VectorLoops, SmallInnerLoopsOfArithmeticAreVectors) {
  const std::string source = source_of(kernel());
  EXPECT_NE(source.find("for (int64_t v1 = 0; v1 < 16; v1 += 8) {"), std::string::npos) << source;
  EXPECT_NE(source.find("kiln_vst_f32(&n2[v0 * 16 + v1], (((kiln_vld_f32(&n0[v0 * 16 + v1]) * (n1[0] + 1.0f)) + "
                        "kiln_vld_f32(&n1[v1])) - kiln_vld_f32(&n2[v0 * 16 + v1])));"),
            std::string::npos) << source;
  EXPECT_NE(source.find("for (int64_t v2 = 0; v2 < 8; v2 += 4) {"), std::string::npos) << source;
  EXPECT_NE(source.find("kiln_vst_f64(&n4["), std::string::npos) << source;
}

TEST(VectorLoops, OtherLoopsStayScalar) {
  // One loop of 16 f32 `y[v0 * 16 + v1] = value` per case, `at` its offset.
  auto with = [](int64_t extent, LExprRef at, LExprRef value) {
    Kernel k = kernel();
    k.body = ploop(0, 4, {loop(1, extent, {store(2, at, value)})});
    return k;
  };
  const LExprRef at = add64(mul64(v(0), i64(16)), v(1));
  const LExprRef x = load(0, kF32, at);
  const LExprRef twice = op(Op::kAdd, kF32, {x, x});
  const std::vector<Kernel> scalar = {
      with(12, at, twice),                                       // not a multiple of 8 lanes
      with(16, add64(mul64(v(0), i64(16)), mul64(v(1), i64(1))), twice),  // (coefficient 1: vectors)
      with(8, mul64(v(1), i64(2)), op(Op::kAdd, kF32, {load(0, kF32, mul64(v(1), i64(2))), x})),  // stride 2
      with(16, at, x),                                           // a plain copy
      with(16, at, op(Op::kRelu, kF32, {x})),                    // an op vectors do not cover
      with(16, at, op(Op::kAdd, kF32, {load(2, kF32, add64(at, i64(1))), x})),  // reads y elsewhere
  };
  for (size_t i = 0; i < scalar.size(); ++i) {
    const std::string source = source_of(scalar[i]);
    EXPECT_EQ(source.find("kiln_vst_") != std::string::npos, i == 1) << "case " << i << "\n" << source;
  }
  // Longer loops are the C compiler's.
  Kernel long_loop = kernel();
  long_loop.body = ploop(0, 1, {loop(1, 128, {store(2, v(1), op(Op::kAdd, kF32, {load(0, kF32, v(1)), load(0, kF32, v(1))}))})});
  EXPECT_EQ(source_of(long_loop).find("kiln_vst_"), std::string::npos);
}

TEST(VectorLoops, VectorFormComputesTheLoop) {
  std::vector<float> x(64), b(16), y(64);
  std::vector<double> xd(32);
  for (int i = 0; i < 64; ++i) {
    x[i] = static_cast<float>(i % 13) - 6.0f;
    y[i] = static_cast<float>(i % 5);
  }
  for (int i = 0; i < 16; ++i) b[i] = static_cast<float>(i) * 0.5f;
  for (int i = 0; i < 32; ++i) xd[i] = static_cast<double>(i) - 10.5;
  std::vector<float> want_y(64);
  std::vector<double> want_yd(32);
  for (int i = 0; i < 64; ++i) want_y[i] = x[i] * (b[0] + 1) + b[i % 16] - y[i];
  for (int i = 0; i < 32; ++i) want_yd[i] = xd[i] * xd[i] + 0.5;
  const ir::Program p = program();
  const std::vector<Kernel> kernels = {kernel()};
  for (uint32_t w : {1u, 3u}) {
    NodeData data = {{0, bytes_of(x)}, {1, bytes_of(b)}, {2, bytes_of(y)}, {3, bytes_of(xd)},
                     {4, bytes_of(std::vector<double>(32))}};
    Status status = compile_and_run(kernels, &p, &data, w);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(values_of<float>(data[2]), want_y) << "W = " << w;
    EXPECT_EQ(values_of<double>(data[4]), want_yd) << "W = " << w;
  }
}

}  // namespace
}  // namespace kiln::codegen_test
