// The loop IR's text form: exact round trips of hand-built kernels (every expression and
// statement kind, every op, constants at the edges of their types, escaped comments), the
// printed layout, and errors (never crashes) for malformed and invalid texts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <tuple>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/loop/loop.h"
#include "loop/loop_builders.h"

namespace kiln::ir {
namespace {

using namespace loop_builders;

// ---------------------------------------------------------------------------------------------
// Field-by-field comparison; returns where the first difference is, or "".

bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof(a)) == 0;  // also tells -0 from +0
}

std::string diff(const LExpr* a, const LExpr* b, const std::string& at) {
  if (!a || !b) return a == b ? "" : at + ": one side is null";
  if (a->kind != b->kind) return at + ": kind";
  if (a->type != b->type) return at + ": type";
  if (!same_double(a->value, b->value)) return at + ": value";
  if (a->node != b->node) return at + ": node";
  if (a->local != b->local) return at + ": local";
  if (a->var != b->var) return at + ": var";
  if (a->op != b->op) return at + ": op";
  if (std::string d = diff(a->offset.get(), b->offset.get(), at + ".offset"); !d.empty()) return d;
  if (a->args.size() != b->args.size()) return at + ": arg count";
  for (size_t i = 0; i < a->args.size(); ++i) {
    std::string d = diff(a->args[i].get(), b->args[i].get(), at + ".args[" + std::to_string(i) + "]");
    if (!d.empty()) return d;
  }
  return "";
}

std::string diff(const LStmt* a, const LStmt* b, const std::string& at) {
  if (!a || !b) return a == b ? "" : at + ": one side is null";
  if (a->kind != b->kind) return at + ": kind";
  if (a->var != b->var) return at + ": var";
  if (a->extent != b->extent) return at + ": extent";
  if (a->parallel != b->parallel) return at + ": parallel";
  if (a->node != b->node) return at + ": node";
  if (a->local != b->local) return at + ": local";
  if (a->local_size != b->local_size) return at + ": local_size";
  if (a->type != b->type) return at + ": type";
  if (a->text != b->text) return at + ": text";
  if (a->site != b->site) return at + ": site";
  if (a->values.size() != b->values.size()) return at + ": values size";
  for (size_t i = 0; i < a->values.size(); ++i) {
    std::string d = diff(a->values[i].get(), b->values[i].get(), at + ".values[" + std::to_string(i) + "]");
    if (!d.empty()) return d;
  }
  for (auto [x, y, name] : {std::tuple{a->cond.get(), b->cond.get(), ".cond"},
                            std::tuple{a->offset.get(), b->offset.get(), ".offset"},
                            std::tuple{a->value.get(), b->value.get(), ".value"}}) {
    if (std::string d = diff(x, y, at + name); !d.empty()) return d;
  }
  if (a->body.size() != b->body.size()) return at + ": body size";
  for (size_t i = 0; i < a->body.size(); ++i) {
    std::string d = diff(a->body[i].get(), b->body[i].get(), at + ".body[" + std::to_string(i) + "]");
    if (!d.empty()) return d;
  }
  return "";
}

::testing::AssertionResult same_kernel(const Kernel& a, const Kernel& b) {
  if (a.name != b.name) return ::testing::AssertionFailure() << "name " << a.name << " vs " << b.name;
  if (a.nodes != b.nodes) return ::testing::AssertionFailure() << "nodes differ";
  if (a.var_count != b.var_count) return ::testing::AssertionFailure() << "var_count differs";
  if (a.local_count != b.local_count) return ::testing::AssertionFailure() << "local_count differs";
  std::string d = diff(a.body.get(), b.body.get(), "body");
  if (!d.empty()) return ::testing::AssertionFailure() << "differ at " << d;
  return ::testing::AssertionSuccess();
}

// print → parse → same kernel, and printing again gives the same text.
void expect_round_trip(const Kernel& kernel) {
  std::string text = print_kernel(kernel);
  SCOPED_TRACE(text);
  Result<Kernel> parsed = parse_kernel(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_TRUE(same_kernel(*parsed, kernel));
  EXPECT_EQ(print_kernel(*parsed), text);
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST(LoopTextTest, HeaderExampleParsesAndPrintsIdentically) {
  const std::string text =
      "(kernel main_0 (nodes 0 1) (vars 2) (locals 0)\n"
      "  (for v0 64 parallel\n"
      "    (for v1 32\n"
      "      (store 1 (+ (* v0 32) v1) (relu f32 (load f32 0 (+ (* v0 32) v1)))))))\n";
  Result<Kernel> kernel = parse_kernel(text);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  EXPECT_EQ(kernel->name, "main_0");
  EXPECT_EQ(kernel->nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(kernel->var_count, 2);
  ASSERT_EQ(kernel->body->kind, LStmt::Kind::kFor);
  EXPECT_TRUE(kernel->body->parallel);
  EXPECT_EQ(kernel->body->extent, 64);
  const LStmt& st = *kernel->body->body[0]->body[0];
  ASSERT_EQ(st.kind, LStmt::Kind::kStore);
  EXPECT_EQ(st.node, 1);
  EXPECT_EQ(st.type, DType::kF32);
  EXPECT_EQ(st.offset->type, DType::kI64);
  EXPECT_EQ(st.value->op, Op::kRelu);
  EXPECT_EQ(print_kernel(*kernel), text);
}

// Language version 2: loops over sizes and sizes as values, read from the dispatch; and what
// kernel_at_sizes makes of them for sizing a dispatch.
TEST(LoopTextTest, SizesRoundTripAndEvaluate) {
  const std::string text =
      "(kernel main_0 (nodes 0 1) (vars 2) (locals 0) (sizes 2)\n"
      "  (for v0 (* s0 2) parallel\n"
      "    (for v1 s1\n"
      "      (store 1 (+ (* v0 s1) v1) (+ f32 (load f32 0 (+ (* v0 s1) v1)) (f32 s0))))))\n";
  Result<Kernel> kernel = parse_kernel(text);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  EXPECT_EQ(kernel->size_count, 2);
  ASSERT_TRUE(kernel->body->extent_expr);
  EXPECT_EQ(kernel->body->extent, -1);
  EXPECT_EQ(print_kernel(*kernel), text);
  EXPECT_EQ(evaluate_extent(*kernel->body->extent_expr, {5, 3}), 10);
  const Kernel bound = kernel_at_sizes(*kernel, {5, 3});
  EXPECT_EQ(bound.body->extent, 10);
  EXPECT_FALSE(bound.body->extent_expr);
  EXPECT_EQ(bound.body->body[0]->extent, 3);
  EXPECT_EQ(kernel_at_sizes(*kernel, {-4, 3}).body->extent, 0);  // a negative extent runs nothing
  EXPECT_EQ(size_constants({5, -1, int64_t{1} << 40}),
            (std::vector<uint32_t>{5, 0, 0xffffffffu, 0xffffffffu, 0, 256}));
}

// Language version 2: a triangular loop's extent reads the variable of an enclosing loop (and
// sizes); kernel_at_sizes puts the sizes' values in it and keeps the rest. A failed check (kFail)
// carries its site, its message and its value, which failure_messages lists by site.
TEST(LoopTextTest, TriangularLoopsAndFailuresRoundTrip) {
  const std::string text =
      "(kernel main_0 (nodes 0 1) (vars 2) (locals 0) (sizes 1)\n"
      "  (for v0 s0 parallel\n"
      "    (for v1 (min s0 (+ v0 1))\n"
      "      (if (== (< v1 4) 0)\n"
      "        (fail 1 \"p.kiln:3: index out of range: \\\"x\\\" reads index \" v1))\n"
      "      (store 1 v0 (load f32 0 (+ (* v0 s0) v1))))))\n";
  Result<Kernel> kernel = parse_kernel(text);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  EXPECT_EQ(print_kernel(*kernel), text);
  const LStmt& inner = *kernel->body->body[0];
  EXPECT_TRUE(is_triangular(inner));
  EXPECT_FALSE(is_triangular(*kernel->body));
  EXPECT_TRUE(has_triangular_loop(kernel->body));
  EXPECT_EQ(failure_messages(*kernel), (std::vector<std::string>{"", "p.kiln:3: index out of range: \"x\" reads index "}));
  const Kernel bound = kernel_at_sizes(*kernel, {6});
  EXPECT_EQ(bound.body->extent, 6);
  const LStmt& bound_inner = *bound.body->body[0];
  ASSERT_TRUE(bound_inner.extent_expr);
  EXPECT_NE(print_kernel(bound).find("(for v1 (min 6 (+ v0 1))"), std::string::npos) << print_kernel(bound);
}

TEST(LoopTextTest, EveryStatementAndExpressionKind) {
  Kernel k;
  k.name = "all_kinds";
  k.nodes = {7, 2, 11};
  k.var_count = 3;
  k.local_count = 2;
  LExprRef off = lop(Op::kAdd, DType::kI64, {lop(Op::kMul, DType::kI64, {lvar(0), i64(8)}), lvar(1)});
  k.body = block({
      comment("every kind"),
      for_(0, 4, {
          local_decl(1, DType::kF64, 8, {
              for_(1, 8, {
                  local_store(1, lvar(1), lop(Op::kCastF64, DType::kF64,
                                              {lload(7, DType::kF32, off)})),
              }),
              if_(lop(Op::kLt, DType::kI32, {lvar(0), i64(2)}), {
                  store(2, lvar(0), llocal_load(1, DType::kF64, i64(3))),
              }),
              for_(2, 0, {}),
              block({}),
          }),
          store(11, lvar(0), lconst(DType::kI32, -7)),
          // A gather's offset: an i32 value widened, printed `(i32 i64 X)`.
          store(2, lop(Op::kCastI32, DType::kI64, {lload(11, DType::kI32, lvar(0))}), lconst(DType::kF64, 1)),
      }, /*parallel=*/true),
      local_decl(0, DType::kI32, 1, {comment("")}),
  });
  expect_round_trip(k);
}

TEST(LoopTextTest, TraceStatementsRoundTrip) {
  Kernel k;
  k.name = "traced";
  k.nodes = {3, 5};
  k.var_count = 1;
  k.body = block({
      for_(0, 4, {
          ltrace(2, 16, lload(5, DType::kI32, i64(0)), {lvar(0), lload(3, DType::kF32, lvar(0))}),
          ltrace(0, 0, lconst(DType::kI32, 7), {}),
      }),
  });
  expect_round_trip(k);
  EXPECT_NE(print_kernel(k).find("(trace 2 16 (load i32 5 0) v0 (load f32 3 v0))"), std::string::npos);
}

// Every op applied to operands of every type it takes (the parser refuses bitwise ops and
// shifts of floats), each operand a load of a node of its type.
TEST(LoopTextTest, EveryOpInEveryType) {
  std::vector<DType> types(std::begin(kAllDTypes), std::end(kAllDTypes));
  auto operand = [&](DType t) -> LExprRef {
    if (t == DType::kI64) return lop(Op::kAdd, DType::kI64, {lvar(0), i64(1)});
    const int node = static_cast<int>(std::find(types.begin(), types.end(), t) - types.begin());
    return lload(node, t, lvar(0));
  };
  auto other = [&](DType t, int k) {
    const size_t at = static_cast<size_t>(std::find(types.begin(), types.end(), t) - types.begin());
    return types[(at + static_cast<size_t>(k)) % types.size()];
  };
  std::vector<LStmtRef> stores;
  int store_node = 100;
  for (int o = 0; o <= static_cast<int>(Op::kFma); ++o) {
    const Op op = static_cast<Op>(o);
    for (DType t : types) {
      const bool bitwise = op == Op::kBitNot || op == Op::kBitAnd || op == Op::kBitOr || op == Op::kBitXor;
      if ((bitwise || op == Op::kShl || op == Op::kShr) && is_float_type(t)) continue;
      if ((op == Op::kShl || op == Op::kShr) && t == DType::kBool) continue;
      LExprRef e;
      if (std::optional<DType> to = cast_target(op)) {
        e = lop(op, *to, {operand(t)});  // every operand type
      } else if (is_comparison(op)) {
        e = lop(op, other(t, 1), {operand(t), operand(t)});  // the result in another type
      } else if (op == Op::kShl || op == Op::kShr) {
        DType amount = other(t, 3);
        while (!is_integer_type(amount)) amount = other(amount, 1);
        e = lop(op, t, {operand(t), operand(amount)});  // the amount in its own type
      } else if (op == Op::kSelect) {
        e = lop(op, t, {operand(other(t, 2)), operand(t), operand(t)});
      } else if (op_arity(op) == 3) {
        e = lop(op, t, {operand(t), operand(t), operand(t)});
      } else if (op_arity(op) == 2) {
        e = lop(op, t, {operand(t), operand(t)});
      } else {
        e = lop(op, t, {operand(t)});
      }
      stores.push_back(store(store_node++, lvar(0), e));
    }
  }
  Kernel k;
  k.name = "ops";
  for (size_t n = 0; n < types.size(); ++n) k.nodes.push_back(static_cast<int>(n));
  for (int n = 100; n < store_node; ++n) k.nodes.push_back(n);
  k.var_count = 1;
  k.body = for_(0, 16, std::move(stores));
  expect_round_trip(k);
  // The text names every op.
  std::string text = print_kernel(k);
  for (const char* name : {"(neg f32", "(exp f64", "(log i32", "(sqrt", "(rsqrt", "(tanh", "(sigmoid",
                           "(relu", "(abs", "(sin", "(cos", "(floor", "(ceil", "(f32 (load",
                           "(f64 (load", "(i32 (load", "(+ f32", "(- f64", "(* i32", "(/ (+",
                           "(< f64", "(<=", "(> ", "(>=", "(==", "(!=", "(max", "(min", "(pow",
                           "(select f32", "(fma f64", "(bool (load f16", "(u8 (load", "(bf16 (load f64",
                           "(i64 (load", "(u64 (", "(~ bool", "(& u16", "(| i8", "(^ u32", "(<< i8 (load i8 1 v0) (load",
                           "(>> u64", "(+ f16", "(* bf16"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

TEST(LoopTextTest, ConstantsRoundTripExactly) {
  const double floats[] = {0.0, -0.0, 0.1, 1.0 / 3.0, -2.5, 1e20, 1e-310, 3.4028234663852886e38,
                           std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), 16777217.0, 123456789.125};
  const double i32s[] = {0, 1, -1, 2147483647.0, -2147483648.0, 1000};
  const double i64s[] = {0, -1, 9007199254740992.0, -9007199254740992.0, 4611686018427387904.0,
                         -9223372036854775808.0, 1e18, 9223372036854775808.0 /* INT64_MAX's */};
  // Every other integer type at its limits; u64 above 2^63 and at 2^64 (UINT64_MAX's double).
  const std::pair<DType, std::vector<double>> others[] = {
      {DType::kBool, {0, 1}},
      {DType::kI8, {-128, 127, -1}},
      {DType::kU8, {0, 255}},
      {DType::kI16, {-32768, 32767}},
      {DType::kU16, {0, 65535}},
      {DType::kU32, {0, 4294967295.0}},
      {DType::kU64, {0, 9223372036854775808.0, 18446744073709549568.0, 18446744073709551616.0}},
  };
  std::vector<LStmtRef> stores;
  int node = 0;
  std::vector<int> nodes;
  auto add = [&](DType t, double v) {
    nodes.push_back(node);
    stores.push_back(store(node++, i64(0), lconst(t, v)));
  };
  for (double v : floats) {
    add(DType::kF32, v);
    add(DType::kF64, v);
  }
  for (double v : i32s) add(DType::kI32, v);
  for (double v : i64s) add(DType::kI64, v);
  for (double v : floats) {
    add(DType::kF16, v);
    add(DType::kBF16, v);
  }
  for (const auto& [type, values] : others) {
    for (double v : values) add(type, v);
  }
  Kernel k;
  k.name = "consts";
  k.nodes = nodes;
  k.body = block(std::move(stores));
  expect_round_trip(k);
  std::string text = print_kernel(k);
  EXPECT_NE(text.find("(const f32 0.1)"), std::string::npos);
  EXPECT_NE(text.find("(const f64 -0)"), std::string::npos);
  EXPECT_NE(text.find("(const f64 inf)"), std::string::npos);
  EXPECT_NE(text.find("(const f32 -inf)"), std::string::npos);
  EXPECT_NE(text.find("(const f64 nan)"), std::string::npos);
  EXPECT_NE(text.find("(const i32 -2147483648)"), std::string::npos);
  EXPECT_NE(text.find(" -9223372036854775808)"), std::string::npos);  // a bare i64
  EXPECT_NE(text.find(" 9007199254740992)"), std::string::npos);
  EXPECT_NE(text.find("(const i64 9223372036854775807)"), std::string::npos);
  EXPECT_NE(text.find("(const u64 18446744073709551615)"), std::string::npos);
  EXPECT_NE(text.find("(const u64 9223372036854775808)"), std::string::npos);
  EXPECT_NE(text.find("(const i8 -128)"), std::string::npos);
  EXPECT_NE(text.find("(const bool 1)"), std::string::npos);
  EXPECT_NE(text.find("(const f16 0.1)"), std::string::npos);
  EXPECT_NE(text.find("(const bf16 -inf)"), std::string::npos);
}

TEST(LoopTextTest, CommentsAreEscaped) {
  const std::string texts[] = {"plain", "", "quote \" and backslash \\", "line\nbreak\ttab\rcr",
                               std::string("nul \0 and \x01\x7f", 12), "utf-8: \xc3\xa9\xe2\x82\xac",
                               "(parens) ; not a comment", "\\x41 literally"};
  std::vector<LStmtRef> body;
  for (const std::string& t : texts) body.push_back(comment(t));
  Kernel k;
  k.name = "comments";
  k.body = block(std::move(body));
  expect_round_trip(k);
  std::string text = print_kernel(k);
  EXPECT_NE(text.find(R"((comment "quote \" and backslash \\"))"), std::string::npos) << text;
  EXPECT_NE(text.find(R"((comment "line\nbreak\ttab\rcr"))"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(\x00 and \x01\x7f)"), std::string::npos) << text;
  // One statement per line: no raw newline inside a comment.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2 + std::size(texts));
}

TEST(LoopTextTest, NullBodyPrintsAnEmptyBlock) {
  Kernel k;
  k.name = "empty";
  std::string text = print_kernel(k);
  EXPECT_EQ(text, "(kernel empty (nodes) (vars 0) (locals 0)\n  (block))\n");
  Result<Kernel> parsed = parse_kernel(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->body->kind, LStmt::Kind::kBlock);
  EXPECT_TRUE(parsed->body->body.empty());
}

Kernel copy_kernel(const std::string& name, int from, int to) {
  Kernel k;
  k.name = name;
  k.nodes = {from, to};
  k.var_count = 1;
  k.body = for_(0, 8, {store(to, lvar(0), lload(from, DType::kF32, lvar(0)))}, true);
  return k;
}

TEST(LoopTextTest, ProgramNamesGoIntoAComment) {
  Program program;
  program.nodes.resize(3);
  program.nodes[0].name = "x";
  program.nodes[2].name = "y";
  Kernel k = copy_kernel("copy", 0, 2);
  std::string text = print_kernel(k, &program);
  EXPECT_NE(text.find("(locals 0)  ; 0: x, 2: y\n"), std::string::npos) << text;
  Result<Kernel> parsed = parse_kernel(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_TRUE(same_kernel(*parsed, k));
  // A node the program does not have.
  k.nodes = {0, 5};
  k.body = for_(0, 8, {store(5, lvar(0), lload(0, DType::kF32, lvar(0)))}, true);
  EXPECT_NE(print_kernel(k, &program).find("; 0: x, 5: ?"), std::string::npos);
}

TEST(LoopTextTest, PrintLoweredReadsBackWithParseKernels) {
  LoweredProgram lowered;
  lowered.program.nodes.resize(3);
  lowered.program.nodes[0].name = "a";
  lowered.program.nodes[1].name = "b";
  lowered.program.nodes[2].name = "c";
  lowered.routines.push_back({"main", {copy_kernel("main_0", 0, 1), copy_kernel("main_1", 1, 2)}, {}});
  lowered.routines.push_back({"other", {copy_kernel("other_0", 2, 0)}, {}});
  std::string text = print_lowered(lowered);
  EXPECT_EQ(text.rfind("; routine main: 2 kernels\n(kernel main_0", 0), 0u) << text;
  EXPECT_NE(text.find("\n; routine other: 1 kernel\n(kernel other_0"), std::string::npos) << text;
  Result<std::vector<Kernel>> kernels = parse_kernels(text);
  ASSERT_TRUE(kernels.ok()) << kernels.status().to_string();
  ASSERT_EQ(kernels->size(), 3u);
  EXPECT_TRUE(same_kernel((*kernels)[0], lowered.routines[0].kernels[0]));
  EXPECT_TRUE(same_kernel((*kernels)[1], lowered.routines[0].kernels[1]));
  EXPECT_TRUE(same_kernel((*kernels)[2], lowered.routines[1].kernels[0]));
  // parse_kernel takes exactly one.
  Result<Kernel> one = parse_kernel(text);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("parse_kernels"), std::string::npos);
  // Empty text: no kernels.
  Result<std::vector<Kernel>> none = parse_kernels(" ; nothing\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(LoopTextTest, AcceptsFreeLayoutAndComments) {
  Result<Kernel> k = parse_kernel(
      "; leading comment\n"
      "(kernel k(nodes 3)(vars 1)(locals 1) ; trailing\n"
      "(for v0 4 (local 0 i32 2 (local_store 0 1 (const i32 5))\n"
      "  (store 3 v0 (local_load i32 0 1)))))");
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(k->nodes, std::vector<int>{3});
  EXPECT_EQ(print_kernel(*k),
            "(kernel k (nodes 3) (vars 1) (locals 1)\n"
            "  (for v0 4\n"
            "    (local 0 i32 2\n"
            "      (local_store 0 1 (const i32 5))\n"
            "      (store 3 v0 (local_load i32 0 1)))))\n");
  // Sibling scopes may reuse a loop variable and a local.
  Result<Kernel> siblings = parse_kernel(
      "(kernel k (nodes 0) (vars 1) (locals 1) (block (for v0 2 (local 0 f32 1 (store 0 v0 "
      "(local_load f32 0 0)))) (for v0 3 (local 0 f32 1 (store 0 v0 (local_load f32 0 0))))))");
  EXPECT_TRUE(siblings.ok()) << siblings.status().to_string();
}

// ---------------------------------------------------------------------------------------------
// Errors.

// Parsing `text` fails with INVALID_ARGUMENT, a message starting with `where` ("L:C:") and
// containing `what`.
void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  SCOPED_TRACE(text.size() > 300 ? text.substr(0, 300) + "..." : text);
  Result<Kernel> k = parse_kernel(text);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << k.status().to_string();
  const std::string& message = k.status().message();
  EXPECT_EQ(message.rfind(where + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

const char* kHead = "(kernel k (nodes 0 1) (vars 2) (locals 1)\n";  // the body starts at 2:1

TEST(LoopTextTest, SyntaxErrors) {
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (trace 0 1))", "1:41", "(trace SITE LIMIT RUN VALUE...)");
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (trace 0 1 (const f32 1)))", "1:52", "run id as an i32");
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (trace -1 1 (const i32 1)))", "1:48", "trace site");
  expect_error("", "1:1", "empty");
  expect_error("(kernel k (nodes) (vars 1) (locals 0) (sizes 1) (for v0 s1))", "1:57", "size s1 is out of range");
  expect_error("(kernel k (nodes) (vars 1) (locals 0) (for v0 s0))", "1:47", "size s0 is out of range");
  expect_error("(kernel k (nodes 0) (vars 2) (locals 0) (sizes 1) (for v0 4 (for v1 (select v0 1 2))))", "1:69", "loop extent");
  expect_error("(kernel k (nodes 0) (vars 2) (locals 0) (for v0 4 (for v1 v1)))", "1:59", "used outside a loop over it");
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (fail 0 1))", "1:41", "(fail SITE \"TEXT\" VALUE)");
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (fail 0 \"m\" (const i32 1)))", "1:53", "failure's value as an i64");
  expect_error("(kernel k (nodes 0) (vars 0) (locals 0) (fail -1 \"m\" 1))", "1:47", "failure's site");
  expect_error("(kernel k (nodes 0) (vars 1) (locals 0) (sizes 1) (for v0 (load i64 0 0)))", "1:59", "loop extent");
  expect_error("   \n ; only a comment\n", "1:1", "empty");
  expect_error("(kernel k (nodes 0) (vars 1) (locals 0) (for v0 4", "1:50", "unexpected end of text");
  expect_error("(kernel k (nodes 0) (vars 1) (locals 0) (for v0 4", "1:50", "'(' at 1:41");
  expect_error("(kernel k (nodes) (vars 0) (locals 0) (block)))", "1:47", "unexpected ')'");
  expect_error(")", "1:1", "unexpected ')'");
  expect_error("kernel", "1:1", "expected '(kernel ...)'");
  expect_error("(kernal k)", "1:2", "expected '(kernel NAME");
  expect_error("(kernel 9k (nodes) (vars 0) (locals 0) (block))", "1:9", "C identifier");
  expect_error("(kernel k (nodes) (vars 0) (locals 0) (block)) (block)", "1:48",
               "end of the text");
  expect_error("(kernel k (nodes) (vars 0) (locals 0))", "1:38", "the kernel's body");
  expect_error("(kernel k (nodes) (vars 0) (locals 0) (block) (block))", "1:47",
               "one body statement");
  expect_error("(kernel k (nodes) (locals 0) (vars 0) (block))", "1:19", "'(vars N)'");
  expect_error(std::string(kHead) + "(comment \"abc)", "2:10", "unterminated string");
  expect_error(std::string(kHead) + "(comment \"a\\qb\")", "2:12", "unknown escape");
  expect_error(std::string(kHead) + "(comment \"a\\x4\")", "2:12", "hexadecimal");
  expect_error(std::string(kHead) + "(comment abc))", "2:1", "(comment \"TEXT\")");
  expect_error(std::string(kHead) + "(frob))", "2:2", "expected a statement");
  expect_error(std::string(kHead) + "\"text\")", "2:1", "expected a statement");
}

TEST(LoopTextTest, UnknownOpsAndBadNumbers) {
  auto body = [](const std::string& stmt) { return std::string(kHead) + stmt + ")"; };
  expect_error(body("(store 0 0 (frob f32 (const f32 1)))"), "2:13", "unknown operation 'frob'");
  expect_error(body("(store 0 0 (const f32 1.5.3))"), "2:23", "floating-point number");
  expect_error(body("(store 0 0 (const f32 1e999))"), "2:23", "out of the range");
  expect_error(body("(store 0 0 (const f32 0x10))"), "2:23", "floating-point number");
  expect_error(body("(store 0 0 (const i32 1.5))"), "2:23", "i32 constant");
  expect_error(body("(store 0 0 (const i32 3000000000))"), "2:23", "i32 constant");
  expect_error(body("(store 0 0 (const i64 99999999999999999999))"), "2:23", "i64 constant");
  expect_error(body("(store 0 0 (const i64 9007199254740993))"), "2:23", "exactly representable");
  expect_error(body("(store 0 0 (const f8 1))"), "2:19", "expected a type (one of bool, i8,");
  expect_error(body("(store 0 0 (const u8 256))"), "2:22", "u8 constant (an integer in [0, 255])");
  expect_error(body("(store 0 0 (const i8 -129))"), "2:22", "an i8 constant");
  expect_error(body("(store 0 0 (const bool 2))"), "2:24", "bool constant (an integer in [0, 1])");
  expect_error(body("(store 0 0 (const u16 -1))"), "2:23", "u16 constant");
  expect_error(body("(store 0 0 (const u32 4294967296))"), "2:23", "u32 constant");
  expect_error(body("(store 0 0 (const u64 18446744073709551616))"), "2:23", "u64 constant");
  expect_error(body("(store 0 0 (const u64 18446744073709551614))"), "2:23", "exactly representable");
  expect_error(body("(store 0 0 (const u64 -1))"), "2:23", "[0, 18446744073709551615]");
  expect_error(body("(store 0 0 (const u8 1.0))"), "2:22", "u8 constant");
  expect_error(body("(store 0 0 (& f32 (const f32 1) (const f32 2)))"), "2:12", "'&' takes bool or integers");
  expect_error(body("(store 0 0 (~ f64 (const f64 1)))"), "2:12", "'~' takes bool or integers");
  expect_error(body("(store 0 0 (<< i32 (const i32 1) (const f32 2)))"), "2:12", "shifts an integer by an integer");
  expect_error(body("(store 0 0 (>> bool (const bool 1) (const i32 2)))"), "2:12", "shifts an integer");
  expect_error(body("(store 0 0 (<< u8 (const i8 1) (const i32 2)))"), "2:12", "operand 1 of type u8");
  expect_error(body("(store 0 0 (const f32))"), "2:12", "(const TYPE VALUE)");
  expect_error(body("(store 0 1.5 (const f32 1))"), "2:10", "i64 integer");
  expect_error(body("(store 0 +1 (const f32 1))"), "2:10", "expected an expression");
  expect_error(body("(for v0 -3 (block))"), "2:9", "the loop extent");
  expect_error(body("(for v0 lots (block))"), "2:9", "the loop extent");
  expect_error(body("(for v0 99999999999999999999 (block))"), "2:9", "the loop extent");
  expect_error(body("(for x0 3 (block))"), "2:6", "'vN'");
  expect_error(body("(for v 3 (block))"), "2:6", "'vN'");
  expect_error(body("(store x 0 (const f32 1))"), "2:8", "a node id");
  expect_error(body("(local 0 f32 0 (block))"), "2:14", "the local array's size");
  expect_error("(kernel k (nodes -1) (vars 0) (locals 0) (block))", "1:18", "a node id");
  expect_error("(kernel k (nodes) (vars 100000) (locals 0) (block))", "1:25", "[0, 65536]");
  expect_error("(kernel k (nodes) (vars 0) (locals -1) (block))", "1:36", "a count");
}

TEST(LoopTextTest, ValidationErrors) {
  auto body = [](const std::string& stmt) { return std::string(kHead) + stmt + ")"; };
  // Loop variables.
  expect_error(body("(for v2 3 (block))"), "2:6", "out of range");
  expect_error(body("(store 0 v0 (const f32 1))"), "2:10", "outside a loop over it");
  expect_error(body("(for v0 3 (for v0 2 (block)))"), "2:16", "enclosing loop");
  // Locals.
  expect_error(body("(local 1 f32 4 (block))"), "2:8", "out of range");
  expect_error(body("(local_store 0 0 (const f32 1))"), "2:14", "outside a (local 0");
  expect_error(body("(local 0 f32 4 (local_store 0 0 (const i32 1)))"), "2:29", "declared f32 but used as i32");
  expect_error(body("(local 0 f32 4 (store 0 0 (local_load f64 0 0)))"), "2:43", "declared f32");
  expect_error(body("(local 0 f32 4 (local 0 f32 2 (block)))"), "2:23", "already declared");
  // Nodes.
  expect_error(body("(store 5 0 (const f32 1))"), "2:8", "not listed");
  expect_error(body("(store 0 0 (load f32 9 0))"), "2:22", "not listed");
  expect_error("(kernel k (nodes 0 0) (vars 0) (locals 0) (block))", "1:20", "listed twice");
  expect_error(body("(block (store 0 0 (const f32 1)) (store 0 1 (const i32 1)))"), "2:41",
               "used as f32 and as i32");
  // Arity and operand types.
  expect_error(body("(store 0 0 (+ f32 (const f32 1)))"), "2:12", "takes 2 operands, got 1");
  expect_error(body("(store 0 0 (exp f32 (const f32 1) (const f32 2)))"), "2:12",
               "takes 1 operand, got 2");
  expect_error(body("(store 0 0 (f32 f32 1))"), "2:12", "takes 1 operand");
  expect_error(body("(store 0 0 (+ f32 (const f32 1) (const f64 2)))"), "2:12",
               "operand 2 of type f32, got f64");
  expect_error(body("(store 0 0 (exp (const f32 1)))"), "2:12", "'exp' of type i64");
  expect_error(body("(store 0 0 (< f32 (const f32 1) (const i32 2)))"), "2:12", "operand 2");
  expect_error(body("(store 0 0 (select f32 1 (const f32 1) (const i32 2)))"), "2:12", "operand 3");
  expect_error(body("(store 0 (const i32 0) (const f32 1))"), "2:10", "i64 offset");
  expect_error(body("(store 0 0 (load f32 0 (const f64 0)))"), "2:24", "i64 offset");
  expect_error(body("(if (comment \"x\") (block))"), "2:6", "unknown operation 'comment'");
}

TEST(LoopTextTest, DuplicateKernelNames) {
  std::string one = print_kernel(copy_kernel("same", 0, 1));
  Result<std::vector<Kernel>> kernels = parse_kernels(one + one);
  ASSERT_FALSE(kernels.ok());
  EXPECT_NE(kernels.status().message().find("4:9: kernel name 'same' is already used by the kernel at 1:9"),
            std::string::npos)
      << kernels.status().to_string();
}

TEST(LoopTextTest, DeepNestingIsAnErrorNotACrash) {
  constexpr int kDeep = 100000;
  // Unbalanced.
  expect_error(std::string(kDeep, '('), "1:1001", "nesting deeper than 1000");
  // Balanced statements.
  std::string blocks = std::string(kHead);
  for (int i = 0; i < kDeep; ++i) blocks += "(block ";
  blocks += std::string(kDeep + 1, ')');
  expect_error(blocks, "2:6994", "nesting deeper");
  // Balanced expressions.
  std::string negs = std::string(kHead) + "(store 0 0 ";
  for (int i = 0; i < kDeep; ++i) negs += "(neg f32 ";
  negs += "(const f32 1)" + std::string(kDeep + 2, ')');
  expect_error(negs, "2:8994", "nesting deeper");
  // Just below the limit is fine.
  std::string ok = std::string(kHead) + "(store 0 0 ";
  for (int i = 0; i < 990; ++i) ok += "(neg f32 ";
  ok += "(const f32 1)" + std::string(990 + 2, ')');
  Result<Kernel> parsed = parse_kernel(ok);
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
}

TEST(LoopTextTest, EveryPrefixOfAKernelIsAnError) {
  Kernel k = copy_kernel("prefix", 0, 1);
  std::string text = print_kernel(k);
  for (size_t n = 0; n + 2 < text.size(); ++n) {  // all but the final ")\n" and "\n"
    Result<Kernel> parsed = parse_kernel(text.substr(0, n));
    EXPECT_FALSE(parsed.ok()) << "prefix of " << n << " bytes parsed";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    }
  }
  EXPECT_TRUE(parse_kernel(text.substr(0, text.size() - 1)).ok());
}

TEST(LoopTextTest, RandomMutationsNeverCrash) {
  Kernel k;
  k.name = "fuzz";
  k.nodes = {0, 1};
  k.var_count = 2;
  k.local_count = 1;
  LExprRef off = lop(Op::kAdd, DType::kI64, {lop(Op::kMul, DType::kI64, {lvar(0), i64(4)}), lvar(1)});
  k.body = for_(0, 4, {
      local_decl(0, DType::kF32, 4, {
          for_(1, 4, {local_store(0, lvar(1), lop(Op::kSelect, DType::kF32,
                                                  {lop(Op::kLt, DType::kI32, {lvar(1), i64(2)}),
                                                   lload(0, DType::kF32, off), lconst(DType::kF32, 0.5)}))}),
          comment("q\"x"),
          store(1, lvar(0), llocal_load(0, DType::kF32, i64(3))),
      }),
  }, true);
  const std::string text = print_kernel(k);
  const std::string alphabet = "()\"\\; \nv0123456789-.e+fi l";
  std::mt19937 rng(1234);
  int ok = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string mutated = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !mutated.empty(); ++e) {
      size_t at = rng() % mutated.size();
      switch (rng() % 4) {
        case 0: mutated[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: mutated.erase(at, 1 + rng() % 4); break;
        case 2: mutated.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 3: mutated[at] = static_cast<char>(rng() % 256); break;
      }
    }
    Result<Kernel> parsed = parse_kernel(mutated);
    if (parsed.ok()) {
      ++ok;
      // Whatever parses prints to text that parses to the same kernel.
      Result<Kernel> again = parse_kernel(print_kernel(*parsed));
      ASSERT_TRUE(again.ok()) << mutated << "\n" << again.status().to_string();
      ASSERT_TRUE(same_kernel(*again, *parsed)) << mutated;
    } else {
      ASSERT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << mutated;
    }
  }
  EXPECT_GT(ok, 0);  // some mutations (digits, whitespace) stay valid
}

}  // namespace
}  // namespace kiln::ir
