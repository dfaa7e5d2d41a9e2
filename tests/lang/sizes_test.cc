// Sizes (language version 2): binding from input shapes and from the host, every error class
// with the tensor, dimension, size and values named, and specialization to static programs.
#include "kiln/ir/sizes.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>, std::less<>>;
using Host = std::map<std::string, int64_t, std::less<>>;

constexpr const char* kProgram =
    "size N\n"
    "size T\n"
    "size H\n"
    "input  x : f32[N, 10]\n"
    "input  u : f32[N]\n"
    "input  t : i32[T]\n"
    "output y : f32[N, 10]\n"
    "output p : f32[2*N + 1]\n"
    "output q : f32[H - 3]\n"
    "output c : f32\n"
    "\n"
    "y[i, j] = x[i, j] * u[i]\n"
    "p[i] = f32(N) + f32(i)\n"
    "q[i] = f32(H)\n"
    "c = sum(f32(t[k])) where k < T\n";

ir::Program program() {
  ParseResult r = parse(kProgram, "sizes.kiln");
  EXPECT_TRUE(r.program.has_value()) << format_diagnostics("sizes.kiln", kProgram, r.diagnostics);
  return r.program ? *r.program : ir::Program{};
}

std::string bind_error(const Shapes& shapes, const Host& host) {
  Result<std::vector<int64_t>> values = ir::bind_sizes(program(), shapes, host, "; give it from the host");
  EXPECT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), StatusCode::kInvalidArgument);
  return values.ok() ? "" : values.status().message();
}

TEST(SizesTest, InputsAndTheHostBindEverySize) {
  Result<std::vector<int64_t>> values =
      ir::bind_sizes(program(), {{"x", {37, 10}}, {"u", {37}}, {"t", {5}}}, {{"H", 4}});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<int64_t>{37, 5, 4}));
  Result<ir::Program> specialized = ir::specialize_sizes(program(), *values);
  ASSERT_TRUE(specialized.ok()) << specialized.status();
  EXPECT_FALSE(specialized->has_sizes());
  EXPECT_EQ(specialized->find_node("p")->dims, std::vector<int64_t>{75});
  EXPECT_EQ(specialized->find_node("q")->dims, std::vector<int64_t>{1});
  EXPECT_EQ(specialized->routines[0].statements[3].indices[0].extent, 5);
  // Size values are i32 literals now; the text is that of a version 1 program.
  const std::string text = ir::print_program(*specialized);
  EXPECT_NE(text.find("p[i] = f32(37) + f32(i)"), std::string::npos) << text;
  EXPECT_NE(text.find("c = sum(f32(t[k]))\n"), std::string::npos) << text;
  ParseResult again = parse(text, "specialized.kiln");
  EXPECT_TRUE(again.program.has_value()) << text;
}

TEST(SizesTest, EveryBindingErrorNamesWhatDisagrees) {
  EXPECT_EQ(bind_error({{"x", {37, 10}}, {"u", {36}}, {"t", {5}}}, {{"H", 4}}),
            "size N is 37 from dimension 0 of input 'x', but 36 from dimension 0 of input 'u'");
  EXPECT_EQ(bind_error({{"x", {37, 11}}, {"t", {5}}}, {{"H", 4}}),
            "dimension 1 of input 'x' is 10, but its value has 11 ([37, 11])");
  EXPECT_EQ(bind_error({{"x", {37}}, {"t", {5}}}, {{"H", 4}}),
            "input 'x' is f32[N, 10] (2 dimensions), but its value has 1: [37]");
  EXPECT_EQ(bind_error({{"x", {37, 10}}, {"t", {5}}}, {{"H", 4}, {"N", 36}}),
            "size N is given as 36, but dimension 0 of input 'x' binds it to 37");
  EXPECT_EQ(bind_error({{"x", {37, 10}}, {"t", {5}}}, {{"H", 4}, {"Tt", 5}}),
            "size Tt: the program declares no such size");
  EXPECT_EQ(bind_error({{"x", {37, 10}}}, {}), "sizes T, H are not bound: no input given names them; give it from the host");
  EXPECT_EQ(bind_error({{"x", {37, 10}}, {"t", {5}}}, {{"H", -1}}), "size H cannot be -1: sizes are 0 or more");
  EXPECT_EQ(bind_error({{"x", {37, 10}}, {"t", {5}}}, {{"H", 2}}),
            "dimension 0 of output 'q' is H - 3 = -1 at these sizes; a dimension is 0 or more");
}

TEST(SizesTest, SizesUsedAsValuesMustFitAnI32AndZeroIsASize) {
  Result<ir::Program> big = ir::specialize_sizes(program(), {int64_t{1} << 31, 5, 4});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("size N = 2147483648 is used as a value, an i32"), std::string::npos) << big.status();
  // Size 0: empty tensors and empty ranges, a valid program.
  Result<ir::Program> zero = ir::specialize_sizes(program(), {0, 0, 3});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->find_node("x")->dims, (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(zero->find_node("q")->dims, std::vector<int64_t>{0});
  EXPECT_EQ(zero->routines[0].statements[3].indices[0].extent, 0);
  // Loops no 64-bit counter can count, at the bound sizes.
  ParseResult r = parse("size N\noutput s : f64\ns = sum(f64(k) * f64(j)) where k < N, j < N\n", "huge.kiln");
  ASSERT_TRUE(r.program.has_value());
  Result<ir::Program> huge = ir::specialize_sizes(*r.program, {int64_t{1} << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("more than 2^63 - 1 points at these sizes"), std::string::npos) << huge.status();
}

}  // namespace
}  // namespace kiln::lang
