// Printing and parsing agree: parse(print(p)) is p (structurally, types included) and
// print(parse(print(p))) == print(p), for the worked examples of docs/language.md, the example
// files, programs built with ProgramBuilder, and random programs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "ir/program_equal.h"
#include "kiln/ir/builder.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"
#include "lang/round_trip.h"

namespace kiln::lang {
namespace {

using ir::testing::programs_equal;
using testing::check_round_trip;

// The first four worked examples of docs/language.md, verbatim.
const char* const kSpecExamples[] = {
    R"(# matrix product with bias and ReLU
input  a : f32[64, 128]
input  b : f32[128, 32]
param  bias : f32[32] = 0
output y : f32[64, 32]
tensor c : f32[64, 32]

c[i, j] = sum(a[i, k] * b[k, j])
y[i, j] = relu(c[i, j] + bias[j])
)",
    R"(# row softmax
input  x : f32[4, 10]
output y : f32[4, 10]
tensor m : f32[4]
tensor e : f32[4, 10]
tensor s : f32[4]

m[i] = max(x[i, j])
e[i, j] = exp(x[i, j] - m[i])
s[i] = sum(e[i, j])
y[i, j] = e[i, j] / s[i]
)",
    R"(# 3x3 convolution, zero padding 1, and a stride-2 1-D filter
input  img : f32[1, 3, 16, 16]
input  w : f32[8, 3, 3, 3]
output o : f32[1, 8, 16, 16]
input  s : f32[20]
input  f : f32[4]
output d : f32[9]

o[n, co, y, x] = sum(img[n, ci, y + ky - 1, x + kx - 1] * w[co, ci, ky, kx])
d[t] = sum(s[2*t + k] * f[k])
)",
    R"(# two routines sharing a parameter
input  x : f32[8]
param  w : f32[8] = 1
output out : f32[]

routine step {
  w[i] = w[i] * 0.5 + x[i]
}
routine total {
  out = sum(w[i])
}
)",
};

// Sizes (language version 2): declarations, sized dimensions, sized bounds and size values
// parse into the IR's size expressions and print back as written.
TEST(RoundTrip, Sizes) {
  const std::string text =
      "size N\n"
      "size T\n"
      "input  x : f32[N, 10]\n"
      "input  t : i32[T]\n"
      "output y : f32[N, 10]\n"
      "output p : f32[2*N + 1]\n"
      "output c : f32\n"
      "tensor m : f32[N]\n"
      "\n"
      "m[i] = max(x[i, j])\n"
      "y[i, j] = exp(x[i, j] - m[i])\n"
      "p[i] = f32(N) + f32(i)\n"
      "c = sum(f32(k)) where k < N + T - 1\n";
  ParseResult r = parse(text, "sizes.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("sizes.kiln", text, r.diagnostics);
  const ir::Program& p = *r.program;
  ASSERT_EQ(p.sizes.size(), 2u);
  EXPECT_EQ(p.nodes[0].sized_dims, (std::vector<ir::SizeExpr>{ir::SizeExpr::size(0), ir::SizeExpr::constant(10)}));
  EXPECT_EQ(p.nodes[3].sized_dims, (std::vector<ir::SizeExpr>{ir::SizeExpr{{{0, 2}}, 1}}));
  EXPECT_FALSE(p.nodes[4].is_sized());
  const ir::Assignment& sum = p.routines[0].statements[3];
  ASSERT_TRUE(sum.indices[0].sized_extent.has_value());
  EXPECT_EQ(*sum.indices[0].sized_extent, (ir::SizeExpr{{{0, 1}, {1, 1}}, -1}));
  EXPECT_EQ(check_round_trip(p, "sizes"), text);
  // `size` is a keyword only where a line starts with `size NAME`: a version 1 tensor named size
  // keeps its meaning.
  ParseResult v1 = parse("output size : f32[3]\nsize[i] = 1\n", "v1.kiln");
  ASSERT_TRUE(v1.program.has_value()) << format_diagnostics("v1.kiln", "", v1.diagnostics);
  EXPECT_TRUE(v1.program->sizes.empty());
}

// Reductions inside expressions (language version 2) become declared temporaries and their
// statements, which print as an ordinary program and parse back into the same one.
TEST(RoundTrip, ReductionsInsideExpressions) {
  const std::string text =
      "size B\n"
      "input  h : f32[B, 4]\n"
      "input  w : f32[4, 3]\n"
      "output z : f32[B, 3]\n"
      "output z__sum1 : f32\n"  // taken: the temporary becomes z__sum2
      "\n"
      "z[n, k] = sum(h[n, j] * w[j, k]) + max(w[j, k]) * sum(h[n, j] - min(h[n, c]))\n"
      "routine other {\n"
      "  z__sum1 = sum(z[n, k] / sum(z[n, c]))\n"
      "}\n";
  ParseResult r = parse(text, "inner.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("inner.kiln", text, r.diagnostics);
  const std::string printed = check_round_trip(*r.program, "inner reductions");
  EXPECT_EQ(printed,
            "size B\n"
            "input  h : f32[B, 4]\n"
            "input  w : f32[4, 3]\n"
            "output z : f32[B, 3]\n"
            "output z__sum1 : f32\n"
            "tensor z__sum2 : f32[B, 3]\n"
            "tensor z__max1 : f32[3]\n"
            "tensor z__min1 : f32[B]\n"
            "tensor z__sum3 : f32[B]\n"
            "tensor z__sum1__sum1 : f32[B]\n"
            "\n"
            "z__sum2[n, k] = sum(h[n, j] * w[j, k])\n"
            "z__max1[k] = max(w[j, k])\n"
            "z__min1[n] = min(h[n, c])\n"
            "z__sum3[n] = sum(h[n, j] - z__min1[n])\n"
            "z[n, k] = z__sum2[n, k] + z__max1[k] * z__sum3[n]\n"
            "\n"
            "routine other {\n"
            "  z__sum1__sum1[n] = sum(z[n, c])\n"
            "  z__sum1 = sum(z[n, k] / z__sum1__sum1[n])\n"
            "}\n");
}

// Softmax in one statement: the sum's argument, which the quotient computes again with j in k's
// place, becomes a temporary of its own that both read (each exponential computed once). Not for
// an argument without a transcendental function (a read alone), nor one of f16 (its store would
// round it).
TEST(RoundTrip, AReductionsArgumentComputedOutsideItTooIsATemporary) {
  const std::string text =
      "input  x : f32[4, 6]\n"
      "input  h : f16[4, 6]\n"
      "output y : f32[4, 6]\n"
      "output p : f32[4, 6]\n"
      "output q : f16[4, 6]\n"
      "\n"
      "y[i, j] = exp(x[i, j] - max(x[i, m])) / sum(exp(x[i, k] - max(x[i, m])))\n"
      "p[i, j] = x[i, j] / sum(x[i, k])\n"
      "q[i, j] = exp(h[i, j]) / sum(exp(h[i, k]))\n";
  ParseResult r = parse(text, "softmax.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("softmax.kiln", text, r.diagnostics);
  const std::string printed = check_round_trip(*r.program, "shared argument");
  EXPECT_EQ(printed,
            "input  x : f32[4, 6]\n"
            "input  h : f16[4, 6]\n"
            "output y : f32[4, 6]\n"
            "output p : f32[4, 6]\n"
            "output q : f16[4, 6]\n"
            "tensor y__max1 : f32[4]\n"
            "tensor y__sum1 : f32[4]\n"
            "tensor y__arg1 : f32[4, 6]\n"
            "tensor p__sum1 : f32[4]\n"
            "tensor q__sum1 : f32[4]\n"
            "\n"
            "y__max1[i] = max(x[i, m])\n"
            "y__arg1[i, k] = exp(x[i, k] - y__max1[i])\n"
            "y__sum1[i] = sum(y__arg1[i, k])\n"
            "y[i, j] = y__arg1[i, j] / y__sum1[i]\n"
            "p__sum1[i] = sum(x[i, k])\n"
            "p[i, j] = x[i, j] / p__sum1[i]\n"
            "q__sum1[i] = sum(exp(h[i, k]))\n"
            "q[i, j] = exp(h[i, j]) / q__sum1[i]\n");
}

// Gathers (language version 2) print back as written (the read first, then the affine rest) and
// the builder's gathered() makes the same program.
TEST(RoundTrip, Gathers) {
  const std::string text =
      "input  z : f32[4, 5]\n"
      "input  lab : i32[4]\n"
      "input  t : i32[5]\n"
      "output y : f32[4]\n"
      "output w : f32[4, 5]\n"
      "\n"
      "y[n] = z[n, lab[n]] + z[n, -lab[n] + 4] + z[lab[n] - t[lab[n]] + n - 1, 2 * lab[n]]\n"
      "w[n, k] = z[t[t[k]], k] * z.merge[n, lab[n]]\n";
  ParseResult r = parse(text, "gathers.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("gathers.kiln", text, r.diagnostics);
  EXPECT_EQ(check_round_trip(*r.program, "gathers"), text);

  ir::ProgramBuilder b;
  ir::Tensor z = b.input("z", ir::DType::kF32, {4, 5});
  ir::Tensor lab = b.input("lab", ir::DType::kI32, {4});
  ir::Tensor y = b.output("y", ir::DType::kF32, {4});
  ir::Index n("n");
  b.main().assign(y(n), z(n, ir::gathered(lab(n))) + z(n, 4 - ir::gathered(lab(n))));
  Result<ir::Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  ParseResult same = parse("input  z : f32[4, 5]\ninput  lab : i32[4]\noutput y : f32[4]\n\n"
                           "y[n] = z[n, lab[n]] + z[n, -lab[n] + 4]\n", "gathers.kiln");
  ASSERT_TRUE(same.program.has_value());
  EXPECT_TRUE(programs_equal(*built, *same.program));
}

// The C++ builder declares sizes and uses them in dimensions, bounds and values, making the
// same program as the text; its misuses are reported by build() like the parser's.
TEST(RoundTrip, BuilderSizesEqualParsedOnes) {
  ir::ProgramBuilder b;
  ir::Size n = b.size("N");
  ir::Size t = b.size("T");
  ir::Tensor x = b.input("x", ir::DType::kF32, {n, 10});
  ir::Tensor p = b.output("p", ir::DType::kF32, {2 * n + 1});
  ir::Tensor c = b.output("c", ir::DType::kF32);
  ir::Tensor m = b.tensor("m", ir::DType::kF32, {n});
  ir::Index i("i"), j("j"), k("k");
  b.main()
      .assign(m(i), max(x(i, j)))
      .assign(p(i), f32(n) + f32(i))
      .assign(c, sum(f32(k)), {k < n + t - 1});
  Result<ir::Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string text =
      "size N\nsize T\ninput  x : f32[N, 10]\noutput p : f32[2*N + 1]\noutput c : f32\ntensor m : f32[N]\n\n"
      "m[i] = max(x[i, j])\np[i] = f32(N) + f32(i)\nc = sum(f32(k)) where k < N + T - 1\n";
  ParseResult parsed = parse(text, "sizes.kiln");
  ASSERT_TRUE(parsed.program.has_value()) << format_diagnostics("sizes.kiln", text, parsed.diagnostics);
  EXPECT_TRUE(programs_equal(*built, *parsed.program));
  EXPECT_EQ(ir::print_program(*built), text);

  ir::ProgramBuilder bad;
  ir::Size s = bad.size("S");
  bad.param("w", ir::DType::kF32, {s});
  bad.input("u", ir::DType::kF32, {s + 1});
  Result<ir::Program> refused = bad.build();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a param keeps one shape across runs"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("'S + 1' is an expression"), std::string::npos) << refused.status();
}

// Language version 2: a fixed tensor read at an index that ranges over a size (the sized
// dimension gives the range; the read is range-checked), and triangular bounds (`where u < t +
// 1`, a limit on a reduced index) parse into the IR, print back as written, and the builder
// makes the same program.
TEST(RoundTrip, TriangularBoundsAndFixedTensorsAtSizedIndices) {
  const std::string text =
      "size B\n"
      "size T\n"
      "input  tok : f32[B, T, 16]\n"
      "param  pos : f32[16, 16]\n"
      "input  a : f32[B, T, T]\n"
      "output x : f32[B, T, 16]\n"
      "output s : f32[B, T]\n"
      "output m : f32[T]\n"
      "output q : f32[16]\n"
      "\n"
      "x[b, t, d] = tok[b, t, d] + pos[t, d]\n"
      "s[b, t] = sum(a[b, t, u]) where u < t + 1\n"
      "m[t] = max(a[0, t, t - u]) where u < -t + 2*T - 1\n"
      "q[d] = sum(pos[u, d]) where u < T\n";
  ParseResult r = parse(text, "block.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("block.kiln", text, r.diagnostics);
  const ir::Program& p = *r.program;
  const std::vector<ir::Assignment>& st = p.routines[0].statements;
  ASSERT_EQ(st.size(), 4u);
  // x: t ranges over T, the target's dimension (pos's 16 is checked when it is read).
  EXPECT_EQ(st[0].indices[1].sized_extent, ir::SizeExpr::size(1));
  // s: u stands alone in a's dimension T, and stays below t + 1.
  ASSERT_TRUE(st[1].indices[2].limit.has_value());
  EXPECT_EQ(*st[1].indices[2].limit, (ir::IndexLimit{{{1, 1}}, ir::SizeExpr::constant(1)}));
  EXPECT_EQ(st[1].indices[2].sized_extent, ir::SizeExpr::size(1));
  // m: u stands alone nowhere: it ranges as far as its limit reaches, 2*T - 1 at t = 0.
  ASSERT_TRUE(st[2].indices[1].limit.has_value());
  EXPECT_EQ(*st[2].indices[1].limit, (ir::IndexLimit{{{0, -1}}, ir::SizeExpr{{{1, 2}}, -1}}));
  EXPECT_EQ(st[2].indices[1].sized_extent, (ir::SizeExpr{{{1, 2}}, -1}));
  // q: the bound, a size, gives u's range; pos's 16 rows are checked.
  EXPECT_EQ(st[3].indices[1].sized_extent, ir::SizeExpr::size(1));
  EXPECT_FALSE(st[3].indices[1].limit.has_value());
  EXPECT_TRUE(ir::validate_program(p).ok()) << ir::validate_program(p);
  EXPECT_EQ(check_round_trip(p, "block"), text);

  ir::ProgramBuilder b;
  ir::Size nb = b.size("B"), nt = b.size("T");
  ir::Tensor tok = b.input("tok", ir::DType::kF32, {nb, nt, 16});
  ir::Tensor pos = b.param("pos", ir::DType::kF32, {16, 16});
  ir::Tensor a = b.input("a", ir::DType::kF32, {nb, nt, nt});
  ir::Tensor x = b.output("x", ir::DType::kF32, {nb, nt, 16});
  ir::Tensor sum_s = b.output("s", ir::DType::kF32, {nb, nt});
  ir::Tensor m = b.output("m", ir::DType::kF32, {nt});
  ir::Tensor q = b.output("q", ir::DType::kF32, {16});
  ir::Index bi("b"), t("t"), d("d"), u("u");
  b.main()
      .assign(x(bi, t, d), tok(bi, t, d) + pos(t, d))
      .assign(sum_s(bi, t), sum(a(bi, t, u)), {u < t + 1})
      .assign(m(t), max(a(0, t, t - u)), {u < -t - 1 + 2 * nt})
      .assign(q(d), sum(pos(u, d)), {u < nt});
  Result<ir::Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(programs_equal(*built, p));
}

// Memory modes in text (language version 2): parsed into the node's request, printed back.
TEST(RoundTrip, MemoryModes) {
  const std::string text =
      "input  x : f32[4, 8] @device\n"
      "output y : f32[4] @hosted\n"
      "param  w : f32[8] = uniform(-1, 1) @device\n"
      "const  c : f32 = 2 @virtual\n"
      "tensor h : f32[4, 8] @local\n"
      "tensor t : f32[4, 8] @virtual\n"
      "tensor s : f32[4]\n"
      "\n"
      "h[i, j] = x[i, j] * w[j]\n"
      "t[i, j] = h[i, j] * c\n"
      "s[i] = sum(t[i, j])\n"
      "y[i] = s[i] + 1.0\n";
  ParseResult r = parse(text, "modes.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("modes.kiln", text, r.diagnostics);
  const std::vector<ir::MemoryMode> expected = {ir::MemoryMode::kOnDevice, ir::MemoryMode::kHosted,
                                                ir::MemoryMode::kOnDevice, ir::MemoryMode::kVirtual,
                                                ir::MemoryMode::kLocal,    ir::MemoryMode::kVirtual,
                                                ir::MemoryMode::kUnset};
  ASSERT_EQ(r.program->nodes.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(r.program->nodes[i].memory, expected[i]) << i;
  EXPECT_EQ(check_round_trip(*r.program, "modes"), text);
}

TEST(RoundTrip, SpecExamples) {
  for (const char* text : kSpecExamples) {
    ParseResult r = parse(text, "spec.kiln");
    ASSERT_TRUE(r.program.has_value()) << format_diagnostics("spec.kiln", text, r.diagnostics);
    EXPECT_TRUE(ir::validate_program(*r.program).ok());
    check_round_trip(*r.program, text);
  }
}

TEST(RoundTrip, SpecExamplesInDetail) {
  ParseResult conv = parse(kSpecExamples[2], "conv.kiln");
  ASSERT_TRUE(conv.program);
  const ir::Assignment& o = conv.program->routines[0].statements[0];
  ASSERT_EQ(o.indices.size(), 7u);  // n co y x, then ci ky kx
  const char* names[] = {"n", "co", "y", "x", "ci", "ky", "kx"};
  const int64_t extents[] = {1, 8, 16, 16, 3, 3, 3};
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(o.indices[i].name, names[i]);
    EXPECT_EQ(o.indices[i].extent, extents[i]) << names[i];
  }
  const ir::Assignment& d = conv.program->routines[0].statements[1];
  EXPECT_EQ(d.indices[1].name, "k");
  EXPECT_EQ(d.indices[1].extent, 4);  // from f[k]

  ParseResult two = parse(kSpecExamples[3], "two.kiln");
  ASSERT_TRUE(two.program);
  ASSERT_EQ(two.program->routines.size(), 2u);
  EXPECT_EQ(two.program->routines[0].name, "step");
  EXPECT_EQ(two.program->routines[1].name, "total");
  EXPECT_TRUE(two.program->nodes[2].is_scalar());
  EXPECT_EQ(ir::print_program(*two.program),
            "input  x : f32[8]\n"
            "param  w : f32[8] = 1\n"
            "output out : f32\n"
            "\n"
            "routine step {\n"
            "  w[i] = w[i] * 0.5 + x[i]\n"
            "}\n"
            "\n"
            "routine total {\n"
            "  out = sum(w[i])\n"
            "}\n");
}

TEST(RoundTrip, ExampleFiles) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(__FILE__).parent_path().parent_path().parent_path() / "examples" / "kiln";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir;
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".kiln") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    ParseResult r = parse(text.str(), entry.path().filename().string());
    ASSERT_TRUE(r.program.has_value()) << format_diagnostics(entry.path().string(), text.str(), r.diagnostics);
    check_round_trip(*r.program, entry.path().string());
    ++count;
  }
  EXPECT_GT(count, 0);
}

TEST(RoundTrip, BuilderProgramsEqualParsedOnes) {
  using namespace ir;
  ProgramBuilder b;
  Tensor img = b.input("img", DType::kF32, {1, 3, 16, 16});
  Tensor w = b.input("w", DType::kF32, {8, 3, 3, 3});
  Tensor o = b.output("o", DType::kF32, {1, 8, 16, 16});
  Tensor s = b.input("s", DType::kF32, {20});
  Tensor f = b.input("f", DType::kF32, {4});
  Tensor d = b.output("d", DType::kF32, {9});
  Index n("n"), co("co"), y("y"), x("x"), ci("ci"), ky("ky"), kx("kx"), t("t"), k("k");
  b.main()
      .assign(o(n, co, y, x), sum(img(n, ci, y + ky - 1, x + kx - 1) * w(co, ci, ky, kx)))
      .assign(d(t), sum(s(2 * t + k) * f(k)));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  ParseResult parsed = parse(kSpecExamples[2], "conv.kiln");
  ASSERT_TRUE(parsed.program);
  EXPECT_TRUE(programs_equal(*built, *parsed.program));
  check_round_trip(*built, "builder conv");
}

// inf, nan and erf print as written and parse back to the same literals and op; consts in
// dimensions print as their values.
TEST(RoundTrip, InfNanErfAndConstDimensions) {
  const std::string text =
      "const D : i32 = 4\n"
      "const neg : f32 = -inf\n"
      "param p : f64[D] = nan\n"
      "input x : f32[2, D + 1]\n"
      "output y : f32[2, D + 1]\n"
      "output z : f64[D]\n"
      "y[i, j] = select(x[i, j] > 0, 0.5 * x[i, j] * (1 + erf(x[i, j] / sqrt(2.0))), -inf)\n"
      "z[j] = max(p[j], inf) + nan + neg\n";
  ParseResult parsed = parse(text, "t.kiln");
  ASSERT_TRUE(parsed.program) << format_diagnostics("t.kiln", text, parsed.diagnostics);
  const std::string printed = check_round_trip(*parsed.program, "inf, nan, erf, const dims");
  EXPECT_NE(printed.find("param  p : f64[4] = nan"), std::string::npos) << printed;
  EXPECT_NE(printed.find("input  x : f32[2, 5]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("(1.0 + erf(x[i, j] / sqrt(2.0))), -inf)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("z[j] = max(p[j], inf) + nan + neg"), std::string::npos) << printed;

  // The builder's non-finite literals print the same way...
  using namespace ir;
  ProgramBuilder b;
  Tensor bx = b.input("x", DType::kF32, {3});
  Tensor by = b.output("y", DType::kF32, {3});
  b.constant("lo", DType::kF32, -std::numeric_limits<double>::infinity());
  Index i("i");
  b.main().assign(by(i), select(bx(i), erf(bx(i)), Value(std::numeric_limits<double>::quiet_NaN())));
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_NE(check_round_trip(*built, "builder inf, nan, erf").find("y[i] = select(x[i], erf(x[i]), nan)"),
            std::string::npos);

  // ...except where the name means something else, which the text would read instead.
  ProgramBuilder shadowed;
  Tensor inf = shadowed.input("inf", DType::kF32, {3});
  Tensor out = shadowed.output("out", DType::kF32, {3});
  shadowed.main().assign(out(i), inf(i) + Value(std::numeric_limits<double>::infinity()));
  Result<Program> refused = shadowed.build();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("the literal inf cannot be used where 'inf' names a tensor"), std::string::npos)
      << refused.status();
  ProgramBuilder shadowed_init;
  shadowed_init.constant("nan", DType::kF32, 1);
  shadowed_init.constant("c", DType::kF32, std::numeric_limits<double>::quiet_NaN());
  Result<Program> refused_init = shadowed_init.build();
  ASSERT_FALSE(refused_init.ok());
  EXPECT_NE(refused_init.status().message().find("its value is nan, but 'nan' is declared before it"), std::string::npos)
      << refused_init.status();
}

TEST(RoundTrip, TrickyStatements) {
  const char* text =
      "input  a : f32[4, 5]\n"
      "input  d : f64[5]\n"
      "input  n : i32[4]\n"
      "param  s : f32 = -0.0\n"
      "param  g : f64[5] = normal(-1.5, 1e-300)\n"
      "const  k : i32 = 2\n"
      "const  h : f64 = 0.1\n"
      "output yf : f32[4]\n"
      "output yd : f64[5]\n"
      "output yi : i32[4]\n"
      "yf[i] = -a[i, 0] * -2 - -0.5 + (1 / 2) * a[i, k]\n"
      "yd[j] = d[j] * 0.1 + 3 + exp(2) + f64(0.1) + h + g.merge[j]\n"
      "yi[i] = n[i] / 2 + i * 3 - i32(2.7) + (n[i] < 3) * select(n[i], 1, 2.5)\n"
      "yi[i] = 2.5\n"
      "yd[j] = 7\n"
      "yf[i] += mean(a[i, j] * (j < 2)) where j < 5\n"
      "yf[i] -= max(a[i, 2*j + 1]) where j < 2\n"
      "yd[j] *= min(d[j - q] + q) where q < 3\n"
      "s = prod(a[i, j] / -(a[i, j] + 1e20))\n"
      "yi[i] = -(-n[i]) + - -3 + abs(-2147483648) + 2147483647\n"
      "yf[i] = 1e-45 + 3.4028234663852886e38 * 0\n"
      "yd[j] = 1.7976931348623157e308 + 4.9406564584124654e-324 + sqrt(2)\n"
      "yf[i] = pow(i, 2) + floor(0.5) + exp(i) + relu(-i) + sigmoid(yf[i]) + k * i\n";
  ParseResult r = parse(text, "tricky.kiln");
  ASSERT_TRUE(r.program.has_value()) << format_diagnostics("tricky.kiln", text, r.diagnostics);
  std::string printed = check_round_trip(*r.program, "tricky");
  // Types: literals typed by their context, printed so they keep it.
  const auto& st = r.program->routines[0].statements;
  EXPECT_EQ(st[1].rhs->type, ir::DType::kF64);
  EXPECT_EQ(st[2].rhs->type, ir::DType::kF32);  // select(n, 1, 2.5) is f32
  EXPECT_EQ(st[3].rhs->type, ir::DType::kF32);  // 2.5 into an i32 target
  EXPECT_EQ(st[4].rhs->type, ir::DType::kF64);
  EXPECT_NE(printed.find("yd[j] = 7.0\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("yi[i] = 2.5\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("param  s : f32 = -0\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("yi[i] = -(-n[i]) + 3 + abs(-2147483648) + 2147483647\n"), std::string::npos) << printed;
}

// Random programs from the builder: expressions over mixed types, literals of both kinds,
// indices as values, affine subscripts, casts, comparisons, selects, reductions.
class RandomPrograms {
 public:
  explicit RandomPrograms(uint64_t seed) : rng_(seed) {}

  Result<ir::Program> make() {
    using namespace ir;
    ProgramBuilder b;
    a_ = b.input("a", DType::kF32, {4, 5});
    d_ = b.input("d", DType::kF64, {5});
    n_ = b.input("n", DType::kI32, {4});
    s_ = b.param("s", DType::kF32);
    k_ = b.constant("k", DType::kI32, 2);
    Tensor targets[] = {b.output("yf", DType::kF32, {4}), b.output("yd", DType::kF64, {4}),
                        b.output("yi", DType::kI32, {4})};
    Tensor total = b.output("total", DType::kF64);
    for (int r = 0; r < 3; ++r) {
      RoutineBuilder& routine = r == 0 ? b.main() : b.routine("r" + std::to_string(r));
      for (int st = 0; st < 4; ++st) {
        reduced_ = false;
        bounded_j_ = false;
        uses_i_ = false;
        Value rhs = expr(4);
        Accum accum = static_cast<Accum>(pick(4));
        if (reduced_ || pick(5) == 0) {
          Reduce reductions[] = {Reduce::kSum, Reduce::kProd, Reduce::kMax, Reduce::kMin, Reduce::kMean};
          Reduce reduce = reductions[pick(5)];
          Value v = reduce == Reduce::kSum ? sum(rhs) : reduce == Reduce::kProd ? prod(rhs)
                  : reduce == Reduce::kMax ? max(rhs) : reduce == Reduce::kMin ? min(rhs) : mean(rhs);
          std::vector<Bound> where;
          if (reduced_ && !bounded_j_) where.push_back(Index("j") < 5);
          if (pick(4) == 0) {
            if (uses_i_) where.push_back(Index("i") < 4);
            routine.statement(total, accum, v, where);  // a scalar target reduces everything
          } else {
            routine.statement(targets[pick(3)](Index("i")), accum, v, where);
          }
        } else {
          routine.statement(targets[pick(3)](Index("i")), accum, rhs);
        }
      }
    }
    return b.build();
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  ir::Value literal() {
    switch (pick(6)) {
      case 0: return ir::Value(pick(10));
      case 1: return ir::Value(-pick(1000));
      case 2: return ir::Value(pick(100) / 8.0);
      case 3: return ir::Value(-std::ldexp(static_cast<double>(rng_() >> 11), -pick(80)));
      case 4: return ir::Value(0.1);
      default: return ir::Value(static_cast<double>(pick(3)));
    }
  }

  ir::Index sub_i() {
    uses_i_ = true;
    ir::Index i("i");
    switch (pick(4)) {
      case 0: return i + 1;
      case 1: return 3 - i;
      case 2: return 2 * i - 1;
      default: return i;
    }
  }

  ir::Value leaf() {
    using ir::Index;
    switch (pick(9)) {
      case 0: return literal();
      case 1: uses_i_ = true; return Index("i");
      case 2:
        reduced_ = true;
        bounded_j_ = true;
        return a_(sub_i(), Index("j"));
      case 3:
        reduced_ = true;
        return d_(2 * Index("j") - 3);
      case 4: return n_(sub_i());
      case 5: return s_;
      case 6: return k_;
      case 7: uses_i_ = true; return a_.merge(Index("i"), 1);
      default: return literal();
    }
  }

  ir::Value expr(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf();
    ir::Value x = expr(depth - 1);
    switch (pick(12)) {
      case 0: return x + expr(depth - 1);
      case 1: return x - expr(depth - 1);
      case 2: return x * expr(depth - 1);
      case 3: return x / expr(depth - 1);
      case 4: return -x;
      case 5: return ir::lt(x, expr(depth - 1));
      case 6: return ir::eq(x, expr(depth - 1));
      case 7: return ir::select(x, expr(depth - 1), expr(depth - 1));
      case 8: return ir::cast(x, static_cast<ir::DType>(pick(3)));
      case 9: return ir::exp(x);
      case 10: return ir::max(x, expr(depth - 1));
      default: return ir::pow(x, literal());
    }
  }

  std::mt19937_64 rng_;
  ir::Tensor a_, d_, n_, s_, k_;
  bool reduced_ = false;
  bool bounded_j_ = false;
  bool uses_i_ = false;
};

TEST(RoundTrip, RandomBuilderPrograms) {
  int built = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Result<ir::Program> p = RandomPrograms(seed).make();
    if (!p.ok()) {
      // Only literal-range problems may occur (e.g. a huge integer literal in i32 context).
      EXPECT_NE(p.status().message().find("does not fit in i32"), std::string::npos) << p.status();
      continue;
    }
    ++built;
    check_round_trip(*p, "seed " + std::to_string(seed));
  }
  EXPECT_GT(built, 250);
}

}  // namespace
}  // namespace kiln::lang
