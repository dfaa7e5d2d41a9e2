// Call statements in the language: parsed, resolved, checked against the built-in signatures
// with every error class at its FILE:LINE:COL, ordered among the assignments, and printed back
// (text → IR → text).
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/call.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

// Declarations shared by the cases (lines 1-10); a case's text starts on line 11.
constexpr const char* kCallPrelude =
    "input  a : f32[4, 8]\n"
    "input  b : f32[8, 3]\n"
    "output c : f32[4, 3]\n"
    "input  x : f32[5, 7]\n"
    "output y : f32[5, 7]\n"
    "output idx : i32[5, 7]\n"
    "output best : f32[5, 2]\n"
    "output at : i32[5, 2]\n"
    "const  k : f32 = 1\n"
    "param  r : f64[6, 2]\n";
constexpr int kCallFirstLine = 11;

// The diagnostics of `text` after `prelude`, each as "LINE:COL: message" with the lines of `text`
// counted from 1.
std::vector<std::string> call_errors(const std::string& text, const std::string& prelude = kCallPrelude) {
  ParseResult r = parse(prelude + text, "c.kiln");
  const int first_line = 1 + static_cast<int>(std::count(prelude.begin(), prelude.end(), '\n'));
  std::vector<std::string> out;
  for (const Diagnostic& d : r.diagnostics) {
    out.push_back(std::to_string(d.loc.line - first_line + 1) + ":" + std::to_string(d.loc.column) + ": " + d.message);
  }
  EXPECT_EQ(r.program.has_value(), out.empty());
  return out;
}

TEST(CallParse, ValidCallsRoundTripInOrder) {
  const std::string text =
      "y[i, j] = x[i, j] * 2\n"
      "call sort(x, descending=1) -> y\n"
      "call argsort(x) -> idx\n"
      "c[i, j] = 0\n"
      "call gemm(a, b, alpha=0.5, beta=1) -> c\n"
      "call topk(y) -> best, at\n"
      "call random_normal(mean=-1, std=0.25) -> r\n"
      "call my_kernel(x, a, scale=3) -> y, c\n";  // a host function: checked at link time
  ParseResult r = parse(std::string(kCallPrelude) + text, "c.kiln");
  ASSERT_TRUE(r.program.has_value()) << (r.diagnostics.empty() ? "" : r.diagnostics[0].message);
  const ir::Routine& main = r.program->routines[0];
  ASSERT_EQ(main.statements.size(), 2u);
  ASSERT_EQ(main.calls.size(), 6u);
  EXPECT_EQ(main.calls[0].position, 1);
  EXPECT_EQ(main.calls[1].position, 1);
  EXPECT_EQ(main.calls[2].position, 2);
  EXPECT_EQ(main.calls[5].position, 2);
  EXPECT_EQ(ir::call_attribute(main.calls[2], "alpha"), 0.5);
  EXPECT_EQ(ir::call_attribute(main.calls[2], "transpose_a"), 0);  // the default
  EXPECT_EQ(main.calls[0].loc.line, kCallFirstLine + 1);
  EXPECT_EQ(main.calls[0].loc.column, 1);

  const std::string printed = ir::print_program(*r.program);
  EXPECT_NE(printed.find("y[i, j] = x[i, j] * 2.0\ncall sort(x, descending=1) -> y\ncall argsort(x) -> idx\n"
                         "c[i, j] = 0.0\ncall gemm(a, b, alpha=0.5, beta=1) -> c\n"),
            std::string::npos)
      << printed;
  ParseResult again = parse(printed, "printed.kiln");
  ASSERT_TRUE(again.program.has_value()) << again.diagnostics[0].message;
  EXPECT_EQ(ir::print_program(*again.program), printed);

  // Calls inside a routine block, and spread over lines inside the parentheses.
  ParseResult block = parse(std::string(kCallPrelude) + "routine step {\n  call sort(x,\n    descending=0) -> y\n}\n", "b.kiln");
  ASSERT_TRUE(block.program.has_value()) << block.diagnostics[0].message;
  EXPECT_NE(ir::print_program(*block.program).find("routine step {\n  call sort(x, descending=0) -> y\n}"),
            std::string::npos);
}

struct CallCase {
  const char* text;
  const char* where;     // "LINE:COL" relative to the case
  const char* fragment;  // in the message
};

// Each case's first diagnostic is at its place and says its fragment.
void expect_first_errors(std::span<const CallCase> cases, const std::string& prelude = kCallPrelude) {
  for (const CallCase& c : cases) {
    std::vector<std::string> e = call_errors(c.text, prelude);
    ASSERT_FALSE(e.empty()) << c.text;
    EXPECT_EQ(e[0].rfind(std::string(c.where) + ": ", 0), 0u) << c.text << e[0];
    EXPECT_NE(e[0].find(c.fragment), std::string::npos) << c.text << e[0];
  }
}

TEST(CallParse, EveryErrorClassAtItsPosition) {
  const CallCase cases[] = {
      // syntax
      {"call (x) -> y\n", "1:6", "a function name after 'call'"},
      {"call sort x -> y\n", "1:11", "'(' after the function name"},
      {"call sort(x) y\n", "1:14", "'->'"},
      {"call sort(x) ->\n", "1:16", "an output tensor name"},
      {"call sort(x, descending=) -> y\n", "1:25", "a number after the attribute"},
      // names
      {"call sort(nope) -> y\n", "1:11", "unknown tensor 'nope'"},
      {"call sort(x) -> nope\n", "1:17", "unknown tensor 'nope'"},
      // arity
      {"call sort(x, a) -> y\n", "1:6", "takes 1 tensor argument(s) and 1 output(s), but the call has 2 and 1"},
      {"call topk(x) -> best\n", "1:6", "takes 1 tensor argument(s) and 2 output(s)"},
      {"call random_uniform(x) -> y\n", "1:6", "takes 0 tensor argument(s)"},
      // ranks and types
      {"call sort(k) -> y\n", "1:11", "'k' has rank 0; sort takes tensors of rank 1 to 4"},
      {"call argsort(x) -> y\n", "1:20", "'y' is f32; it must be i32"},
      {"call gemm(a, r) -> c\n", "1:14", "'r' is f64 and 'a' is f32"},
      {"call random_uniform() -> idx\n", "1:26", "'idx' is i32; it must be f32 or f64"},
      // shapes
      {"call sort(x) -> c\n", "1:17", "'c' is f32[4, 3]; it must be f32[5, 7]"},
      {"call gemm(b, a) -> c\n", "1:14", "inner dimensions differ"},
      {"call gemm(a, b, transpose_a=1) -> c\n", "1:14", "inner dimensions differ: op('a') is 8x4"},
      {"call gemm(a, a, transpose_b=1) -> c\n", "1:35", "'c' is f32[4, 3]; the product is 4x4"},
      {"call topk(x) -> best, y\n", "1:23", "'y' is f32; it must be i32"},
      {"call topk(best) -> y, idx\n", "1:20", "k = 7"},
      // attributes
      {"call sort(x, reverse=1) -> y\n", "1:14", "unknown attribute 'reverse'; it takes descending"},
      {"call sort(x, descending=2) -> y\n", "1:14", "attribute 'descending' is 0 or 1"},
      {"call sort(x, descending=1, descending=0) -> y\n", "1:28", "attribute 'descending' is given twice"},
      {"call random_normal(std=-1) -> r\n", "1:20", "attribute 'std' must not be negative"},
      {"call random_uniform(lo=2, hi=1) -> r\n", "1:1", "lo = 2.000000 is above hi = 1.000000"},
      {"call topk(x, k=2) -> best, at\n", "1:14", "unknown attribute 'k'; it takes none"},
      {"call sort(descending=1, x) -> y\n", "1:25", "tensor 'x' comes after an attribute"},
      // outputs
      {"call sort(y) -> x\n", "1:17", "'x' is an input; a call cannot write it"},
      {"call random_uniform() -> k\n", "1:26", "'k' is a const"},
      {"call sort(y) -> y\n", "1:17", "'y' is both an argument and an output"},
      {"call my_fn(x) -> y, y\n", "1:21", "'y' is named twice as an output"},
  };
  expect_first_errors(cases);
}

// gemm of tensors of rank 2 to 4: the dimensions grouped into blocks (kiln/ir/gemm_groups.h),
// each mismatch at the tensor or attribute concerned.
TEST(CallParse, GemmOfHigherRanksGroupsWholeDimensions) {
  const std::string prelude =
      "input  h : f32[6, 2, 3, 3]\n"
      "input  wd : f32[2, 3, 3, 10]\n"
      "input  wt : f32[3, 2, 3, 10]\n"
      "output z : f32[6, 10]\n"
      "output zt : f32[10, 6]\n"
      "input  p : f32[2, 3, 4]\n"
      "input  q : f32[2, 4, 5]\n"
      "input  q3 : f32[3, 4, 5]\n"
      "output r : f32[2, 3, 5]\n"
      "output r5 : f32[2, 3, 5, 1, 1]\n";
  for (const char* valid : {"call gemm(h, wd) -> z\n", "call gemm(p, q, batch=1, beta=1) -> r\n",
                            "call gemm(wd, h, transpose_a=1, transpose_b=1) -> zt\n"}) {
    std::vector<std::string> e = call_errors(valid, prelude);
    EXPECT_TRUE(e.empty()) << valid << e[0];
  }
  const CallCase cases[] = {
      {"call gemm(p, q) -> r\n", "1:6", "'p' (rank 3), 'q' (rank 3) and 'r' (rank 3) make no product with batch=0"},
      {"call gemm(h, wd, batch=1) -> z\n", "1:6", "make no product with batch=1"},
      {"call gemm(h, wt) -> z\n", "1:14", "inner dimensions differ: op('h') is 6x(2·3·3), op('wt') is (3·2·3)x10"},
      {"call gemm(p, q3, batch=1) -> r\n", "1:14", "'q3' is f32[3, 4, 5]; its first 1 dimension(s), the batch, must be those of 'r' f32[2, 3, 5]"},
      {"call gemm(q, p, batch=1, transpose_a=1, transpose_b=1) -> r\n", "1:59", "'r' is f32[2, 3, 5]; the product is 5x3, batched over 2"},
      {"call gemm(p, q, batch=0.5) -> r\n", "1:17", "attribute 'batch' is a whole number from 0 to 2^31 - 1"},
      {"call gemm(p, q, batch=1) -> r5\n", "1:29", "'r5' has rank 5; gemm takes tensors of rank 2 to 4"},
  };
  expect_first_errors(cases, prelude);
}

// conv2d over NCHW tensors: the valid forms, and each disagreement at the tensor or attribute
// concerned, with the shape the convolution gives.
TEST(CallParse, Conv2dChecksTheConvolutionsShape) {
  const std::string prelude =
      "size   N\n"
      "input  x : f32[N, 6, 9, 11]\n"
      "param  w : f32[8, 3, 3, 2]\n"
      "param  b : f32[8]\n"
      "output y : f32[N, 8, 5, 6]\n"
      "output y1 : f32[N, 8, 7, 10]\n"
      "param  w6 : f32[8, 6, 3, 2]\n"
      "param  wd : f64[8, 3, 3, 2]\n"
      "input  xi : i32[2, 6, 9, 11]\n"
      "param  b7 : f32[7]\n"
      "input  z : f32[N, 8, 7, 10]\n"
      "input  z2 : f32[2, 8, 7, 10]\n"
      "input  zd : f64[N, 8, 7, 10]\n"
      "param  wt : f32[6, 3, 2, 8]\n"
      "param  wt3 : f32[3, 3, 2, 8]\n"
      "param  wb : f32[1, 6, 3, 32]\n"
      "param  wb2 : f32[2, 6, 3, 32]\n"
      "param  wb3 : f32[1, 6, 3, 24]\n"
      "param  wbg : f32[1, 3, 3, 32]\n";
  for (const char* valid :
       {"call conv2d(x, w, b, stride_h=2, stride_w=2, pad_top=1, pad_left=1, pad_bottom=1, groups=2, relu=1) -> y\n",
        "call conv2d(x, w6, b) -> y1\n", "call conv2d(x, w6, b, z, relu=1) -> y1\n",
        "call conv2d(x, wt, b, transpose_w=1) -> y1\n", "call conv2d(x, wt3, b, z, groups=2, transpose_w=1) -> y1\n",
        "call conv2d(x, wb, b, transpose_w=16) -> y1\n", "call conv2d(x, wbg, b, z, groups=2, transpose_w=16) -> y1\n"}) {
    std::vector<std::string> e = call_errors(valid, prelude);
    EXPECT_TRUE(e.empty()) << valid << e[0];
  }
  const CallCase cases[] = {
      {"call conv2d(x, w6, b) -> y\n", "1:26", "'y' is f32[?, 8, 5, 6]; the convolution gives f32[?, 8, 7, 10]"},
      {"call conv2d(x, w, b) -> y1\n", "1:16", "its second dimension must be 6, the channels of 'x' per group"},
      {"call conv2d(x, w6, b, groups=4) -> y1\n", "1:13", "its 6 channels do not split into groups=4"},
      {"call conv2d(x, w6, b7) -> y1\n", "1:20", "'b7' is f32[7]; it must hold a bias per output channel, 8"},
      {"call conv2d(x, wd, b, groups=2) -> y1\n", "1:16", "'wd' is f64 and 'x' is f32"},
      {"call conv2d(xi, w, b) -> y\n", "1:13", "'xi' is i32; it must be f32 or f64"},
      {"call conv2d(x, w6, b, stride_h=0) -> y1\n", "1:1", "stride_h must be at least 1"},
      {"call conv2d(x, w6, b, relu=2) -> y1\n", "1:23", "attribute 'relu' is 0 or 1"},
      {"call conv2d(x, w6, b, dilation_h=5) -> y1\n", "1:16", "its window (dilated) is larger than 'x'"},
      {"call conv2d(x, w6) -> y1\n", "1:6", "takes 3 or 4 tensor argument(s) and 1 output(s)"},
      {"call conv2d(x, w6, b, z, z) -> y1\n", "1:6", "takes 3 or 4 tensor argument(s) and 1 output(s), but the call has 5"},
      {"call conv2d(x, w6, b, z2) -> y1\n", "1:23", "'z2' is f32[2, 8, 7, 10]; it must be f32[?, 8, 7, 10] like 'y1'"},
      {"call conv2d(x, w6, b, zd) -> y1\n", "1:23", "'zd' is f64[?, 8, 7, 10]; it must be f32[?, 8, 7, 10] like 'y1'"},
      // transpose_w=1: w is [C/groups, KH, KW, O]
      {"call conv2d(x, w6, b, transpose_w=1) -> y1\n", "1:16", "its first dimension (transpose_w=1) must be 6"},
      {"call conv2d(x, wt, b7, transpose_w=1) -> y1\n", "1:20", "it must hold a bias per output channel, 8 like the last dimension of 'wt' (transpose_w=1)"},
      {"call conv2d(x, wt, b, transpose_w=1) -> y\n", "1:41", "'y' is f32[?, 8, 5, 6]; the convolution gives f32[?, 8, 7, 10]"},
      {"call conv2d(x, wt, b, transpose_w=2) -> y1\n", "1:1",
       "transpose_w is 0 (w [O, C/groups, KH, KW]), 1 ([C/groups, KH, KW, O]) or 16 ([ceil(O/16), C/groups, KH, 16·KW]), not 2"},
      // transpose_w=16: w is [ceil(O/16), C/groups, KH, 16·KW], O being b's
      {"call conv2d(x, wb2, b, transpose_w=16) -> y1\n", "1:16",
       "'wb2' is f32[2, 6, 3, 32]; with transpose_w=16 it holds blocks of 16 output channels, [ceil(O/16), C/groups, KH, 16·KW] for the O = 8 output channels of 'b'"},
      {"call conv2d(x, wb3, b, transpose_w=16) -> y1\n", "1:16", "'wb3' is f32[1, 6, 3, 24]; with transpose_w=16"},
      {"call conv2d(x, wb, b7, transpose_w=16) -> y1\n", "1:43", "'y1' is f32[?, 8, 7, 10]; the convolution gives f32[?, 7, 7, 10]"},
      {"call conv2d(x, wb, b, transpose_w=16) -> y\n", "1:42", "'y' is f32[?, 8, 5, 6]; the convolution gives f32[?, 8, 7, 10]"},
      {"call conv2d(x, wbg, b, groups=4, transpose_w=16) -> y1\n", "1:13", "its 6 channels do not split into groups=4"},
  };
  expect_first_errors(cases, prelude);
}

// conv2d_blocked: x, z and y in blocks of 16 channels, w in blocks of output channels, C from
// w's second dimension times groups.
TEST(CallParse, Conv2dBlockedChecksTheBlocks) {
  const std::string prelude =
      "size   N\n"
      "input  x : f32[N, 1, 9, 11, 16]\n"
      "input  x2 : f32[N, 2, 9, 11, 16]\n"
      "input  x8 : f32[N, 1, 9, 11, 8]\n"
      "input  x4 : f32[N, 6, 9, 11]\n"
      "input  x3 : f32[6, 9, 11]\n"
      "param  wb : f32[1, 6, 3, 32]\n"
      "param  wb20 : f32[2, 20, 3, 32]\n"
      "param  wb2 : f32[2, 6, 3, 32]\n"
      "param  b : f32[8]\n"
      "param  b20 : f32[20]\n"
      "input  z : f32[N, 1, 7, 10, 16]\n"
      "input  z2 : f32[N, 2, 7, 10, 16]\n"
      "output y : f32[N, 1, 7, 10, 16]\n"
      "output y2 : f32[N, 2, 7, 10, 16]\n"
      "output y8 : f32[N, 1, 7, 10, 8]\n"
      "output y4 : f32[N, 8, 7, 10]\n";
  for (const char* valid : {"call conv2d_blocked(x, wb, b) -> y\n", "call conv2d_blocked(x, wb, b, z, relu=1) -> y\n",
                            "call conv2d_blocked(x2, wb20, b20, groups=1, clip_max=6) -> y2\n",
                            "call conv2d_blocked(x4, wb, b, z) -> y\n"}) {  // x in NCHW
    std::vector<std::string> e = call_errors(valid, prelude);
    EXPECT_TRUE(e.empty()) << valid << e[0];
  }
  const CallCase cases[] = {
      {"call conv2d_blocked(x2, wb, b) -> y\n", "1:21", "'x2' is f32[?, 2, 9, 11, 16]; it must hold 6 channels (the second dimension of 'wb' times groups) in blocks of 16, [N, 1, H, W, 16]"},
      {"call conv2d_blocked(x8, wb, b) -> y\n", "1:21", "'x8' is f32[?, 1, 9, 11, 8]; it must hold 6 channels"},
      {"call conv2d_blocked(x, wb, b) -> y2\n", "1:34", "'y2' is f32[?, 2, 7, 10, 16]; the convolution gives f32[?, 1, 7, 10, 16]"},
      {"call conv2d_blocked(x, wb, b) -> y8\n", "1:34", "the convolution gives f32[?, 1, 7, 10, 16]"},
      {"call conv2d_blocked(x4, wb, b) -> y4\n", "1:35", "'y4' has rank 4; conv2d_blocked takes tensors of rank 5"},
      {"call conv2d_blocked(x3, wb, b) -> y\n", "1:21", "'x3' has rank 3; conv2d_blocked takes tensors of rank 4 to 5"},
      {"call conv2d_blocked(x4, wb20, b20) -> y2\n", "1:25", "its second dimension must be 6, the channels of 'x4' per group"},
      {"call conv2d_blocked(x, wb, b, z2) -> y\n", "1:31", "'z2' is f32[?, 2, 7, 10, 16]; it must be f32[?, 1, 7, 10, 16] like 'y'"},
      {"call conv2d_blocked(x, wb20, b) -> y\n", "1:21", "'x' is f32[?, 1, 9, 11, 16]; it must hold 20 channels"},
      {"call conv2d_blocked(x, wb2, b) -> y\n", "1:24", "'wb2' is f32[2, 6, 3, 32]; conv2d_blocked's w holds blocks of 16 output channels"},
      {"call conv2d_blocked(x, wb, b, transpose_w=16) -> y\n", "1:31", "transpose_w"},
  };
  expect_first_errors(cases, prelude);
}

TEST(CallParse, CallIsAKeyword) {
  std::vector<std::string> e = call_errors("tensor call : f32\n");
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e[0].find("'call' is a keyword"), std::string::npos) << e[0];
}

}  // namespace
}  // namespace kiln::lang
