// The automatic gemm calls (kiln/ir/library_calls.h) on programs as written: which products
// become `call gemm(...)`, with which attributes, as `kiln compile --emit ir` prints them, and
// which statements are left to the loop nests.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/library_calls.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

// Declarations shared by the cases.
constexpr const char* kDeclarations =
    "input  h : f32[64, 32, 4, 4]\n"
    "input  wd : f32[32, 4, 4, 10]\n"
    "output z : f32[64, 10]\n"
    "input  a : f32[8, 4, 16]\n"
    "input  b : f32[8, 4, 20]\n"
    "output c : f32[16, 20]\n"
    "input  p : f32[4, 8, 32]\n"
    "input  q : f32[32, 4, 8]\n"
    "output o : f32[4, 8, 4, 8]\n"
    "input  s : f32[16, 32]\n"
    "input  t : f32[4, 8, 32]\n"
    "output st : f32[16, 4, 8]\n"
    "input  x : f64[4, 16, 24]\n"
    "input  y : f64[4, 24, 16]\n"
    "output xy : f64[4, 16, 16]\n"
    "input  u : f32[2, 3, 16, 20]\n"
    "input  v : f32[2, 3, 20, 16]\n"
    "output uv : f32[2, 3, 16, 16]\n"
    "input  e : f32[8, 8, 8]\n"
    "output ee : f32[8, 8, 8]\n"
    "input  f : f32[8, 8, 8, 8]\n"
    "output ff : f32[8, 8]\n";

// The program's statement (after the declarations) with the automatic calls put in, printed; the
// number of statements replaced in *replaced.
std::string with_calls(const std::string& statement, int* replaced) {
  Result<ir::Program> program = parse_program(std::string(kDeclarations) + statement, "auto.kiln");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return "";
  const std::string printed = ir::print_program(ir::with_library_calls(*program, {}, replaced));
  // What --emit ir prints parses again: the call's checks accept what the matcher made.
  Result<ir::Program> again = parse_program(printed, "printed.kiln");
  EXPECT_TRUE(again.ok()) << again.status() << "\n" << printed;
  // The statements and calls: every line that is not a declaration.
  std::string out;
  for (size_t at = 0, end; at < printed.size(); at = end + 1) {
    end = printed.find('\n', at);
    if (end == std::string::npos) end = printed.size();
    const std::string line = printed.substr(at, end - at);
    if (!line.empty() && !line.starts_with("input") && !line.starts_with("output")) out += line + "\n";
  }
  return out;
}

TEST(AutomaticGemm, ContractionsOverContiguousDimensionsBecomeCalls) {
  const struct {
    const char* statement;
    const char* call;
  } cases[] = {
      // The dense layer of issue 33: a 64 x 512 x 10 product, in either order of the factors.
      {"z[n, k] = sum(h[n, ch, row, col] * wd[ch, row, col, k])\n", "call gemm(h, wd) -> z\n"},
      {"z[n, k] = sum(wd[ch, row, col, k] * h[n, ch, row, col])\n", "call gemm(h, wd) -> z\n"},
      // One tensor as both operands.
      {"ff[i, j] = sum(f[i, k, l, m] * f[k, l, m, j])\n", "call gemm(f, f) -> ff\n"},
      // The summed block first in a (a transposed as a whole block).
      {"c[i, j] = sum(a[k, l, i] * b[k, l, j])\n", "call gemm(a, b, transpose_a=1) -> c\n"},
      // Several rows and several columns: 32 x 32 x 32.
      {"o[i, m, j, l] = sum(p[i, m, k] * q[k, j, l])\n", "call gemm(p, q) -> o\n"},
      // Columns of two dimensions with b transposed, and +=.
      {"st[i, j, l] += sum(s[i, k] * t[j, l, k])\n", "call gemm(s, t, transpose_b=1, beta=1) -> st\n"},
      // A batch index leading all three, f64, both operands transposed, factors swapped.
      {"xy[n, i, j] = sum(y[n, k, i] * x[n, j, k])\n", "call gemm(y, x, transpose_a=1, transpose_b=1, batch=1) -> xy\n"},
      {"xy[n, i, j] = sum(x[n, i, k] * y[n, k, j])\n", "call gemm(x, y, batch=1) -> xy\n"},
      // Two batch dimensions.
      {"uv[m, n, i, j] += sum(u[m, n, i, k] * v[m, n, k, j])\n", "call gemm(u, v, beta=1, batch=2) -> uv\n"},
  };
  for (const auto& c : cases) {
    int replaced = 0;
    const std::string printed = with_calls(c.statement, &replaced);
    EXPECT_EQ(replaced, 1) << c.statement << printed;
    EXPECT_EQ(printed, c.call) << c.statement;
  }
}

TEST(AutomaticGemm, OtherStatementsStayInTheLoopNests) {
  const char* const cases[] = {
      // The summed dimensions in another order in each operand: not one flattened K.
      "ff[i, j] = sum(f[i, k, l, m] * f[l, k, m, j])\n",
      // The target's rows and columns interleaved.
      "o[i, l, j, m] = sum(p[i, m, k] * q[k, j, l])\n",
      // An index in all three that does not lead.
      "ee[i, j, l] = sum(e[j, i, k] * e[i, k, l])\n",
      // An index of the target read by only one operand twice over (a diagonal), a summed
      // index in one operand only, a third factor, an offset subscript.
      "ee[i, j, l] = sum(e[i, i, k] * e[k, j, l])\n",
      "c[i, j] = sum(a[k, l, i] * b[k, m, j])\n",
      "c[i, j] = sum(a[k, l, i] * b[k, l, j] * 2)\n",
      "ee[i, j, l] = sum(e[i, j, k] * e[k, l, 7 - l])\n",
      // Max instead of a sum; -= (no gemm attribute says subtract).
      "c[i, j] = max(a[k, l, i] * b[k, l, j])\n",
      "c[i, j] -= sum(a[k, l, i] * b[k, l, j])\n",
      // The target read by the product.
      "ee[i, j, l] = sum(ee[i, j, k] * e[k, l, j])\n",
  };
  for (const char* statement : cases) {
    int replaced = -1;
    const std::string printed = with_calls(statement, &replaced);
    EXPECT_EQ(replaced, 0) << statement << printed;
    EXPECT_EQ(printed.find("call"), std::string::npos) << statement << printed;
  }
}

// Below 16³ multiply-adds per product the statement stays, however large the batch.
TEST(AutomaticGemm, SmallProductsStayWhateverTheBatch) {
  Result<ir::Program> program = parse_program(
      "input a : f32[512, 8, 8]\ninput b : f32[512, 8, 8]\noutput c : f32[512, 8, 8]\n"
      "c[n, i, j] = sum(a[n, i, k] * b[n, k, j])\n",
      "small.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  int replaced = -1;
  ir::with_library_calls(*program, {}, &replaced);
  EXPECT_EQ(replaced, 0);
  ir::with_library_calls(*program, {.min_gemm_volume = 512}, &replaced);
  EXPECT_EQ(replaced, 1);
}

}  // namespace
}  // namespace kiln::lang
