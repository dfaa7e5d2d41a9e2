// Language version 3 in text: every element type in declarations and casts, `true` / `false`,
// the bitwise operators and shifts with C's precedence, and the round trip of all of them
// through the printer (docs/language.md, "Version 3: element types"). The errors are in
// parser_errors_test.cc.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ir/program_equal.h"
#include "kiln/ir/builder.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"
#include "lang/round_trip.h"

namespace kiln::lang {
namespace {

using testing::check_round_trip;

ir::Program parsed(const std::string& text) {
  ParseResult r = parse(text, "types.kiln");
  EXPECT_TRUE(r.program.has_value()) << text << format_diagnostics("types.kiln", text, r.diagnostics);
  return r.program ? std::move(*r.program) : ir::Program{};
}

std::string type_name(ir::DType t) { return std::string(ir::dtype_name(t)); }

// Every type in every role, and a cast from every type to every type.
TEST(ElementTypes, EveryTypeDeclaresAndCastsToEveryType) {
  std::string decls, body;
  for (ir::DType t : ir::kAllDTypes) {
    const std::string n = type_name(t);
    decls += "input  x_" + n + " : " + n + "[4]\n" + "param  p_" + n + " : " + n + "[2] = 1\n" + "const  c_" + n +
             " : " + n + " = 0\n" + "tensor t_" + n + " : " + n + "[4]\n" + "output y_" + n + " : " + n + "[4]\n";
  }
  for (ir::DType to : ir::kAllDTypes) {
    for (ir::DType from : ir::kAllDTypes) {
      body += "y_" + type_name(to) + "[i] = " + type_name(to) + "(x_" + type_name(from) + "[i])\n";
    }
  }
  const ir::Program p = parsed(decls + "\n" + body);
  ASSERT_EQ(p.nodes.size(), 5 * std::size(ir::kAllDTypes));
  for (size_t n = 0; n < p.nodes.size(); ++n) EXPECT_EQ(p.nodes[n].dtype, ir::kAllDTypes[n / 5]) << p.nodes[n].name;
  ASSERT_EQ(p.routines.size(), 1u);
  size_t s = 0;
  for (ir::DType to : ir::kAllDTypes) {
    for (ir::DType from : ir::kAllDTypes) {
      const ir::Expr& e = *p.routines[0].statements[s++].rhs;
      ASSERT_EQ(e.kind, ir::Expr::Kind::kOp);
      EXPECT_EQ(e.op, ir::cast_op(to));
      EXPECT_EQ(e.type, to);
      EXPECT_EQ(e.args[0]->type, from);
    }
  }
  // bool's INITs print as true and false.
  std::string printed_decls = decls;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"bool[2] = 1", "bool[2] = true"}, {"bool = 0", "bool = false"}}) {
    printed_decls.replace(printed_decls.find(from), from.size(), to);
  }
  EXPECT_EQ(check_round_trip(p, "every type and cast"), printed_decls + "\n" + body);
}

// The example of docs/language.md's "Version 3: element types", verbatim.
TEST(ElementTypes, TheLanguageReferencesExample) {
  const std::string text =
      "input  img : u8[64, 64]\n"
      "input  mask : bool[64, 64]\n"
      "param  w : bf16[64] = normal(0, 0.02)\n"
      "output y : f32[64]\n"
      "output bright : i64\n"
      "\n"
      "y[r] = sum(f32(img[r, c]) * w[c] * f32(mask[r, c]))\n"
      "bright = sum(img[r, c] > 200 & mask[r, c])\n";
  const ir::Program p = parsed(text);
  ASSERT_EQ(p.routines.size(), 1u);
  const ir::Assignment& bright = p.routines[0].statements[1];
  EXPECT_EQ(bright.rhs->type, ir::DType::kBool);
  EXPECT_EQ(bright.rhs->args[0]->args[1]->type, ir::DType::kU8);  // 200 compares as a u8
  EXPECT_EQ(ir::accumulation_type(bright.reduce, bright.rhs->type), ir::DType::kI64);
  EXPECT_EQ(check_round_trip(p, "the reference's example"), text);
}

// The bool literals: keywords of version 3, bool in any expression, and printed back as written.
TEST(ElementTypes, TrueAndFalse) {
  const std::string text =
      "input  m : bool[4]\n"
      "input  x : f32[4]\n"
      "param  on : bool = true\n"
      "output z : bool[4]\n"
      "output y : f32[4]\n"
      "output n : i32[4]\n"
      "\n"
      "z[i] = m[i] & true | false ^ on\n"
      "y[i] = select(m[i] == false, x[i], 0.0)\n"
      "z[i] = true\n"
      "n[i] = true + true\n"
      "z[i] = ~m[i] | bool(x[i])\n";
  const ir::Program p = parsed(text);
  const auto& st = p.routines[0].statements;
  ASSERT_EQ(st.size(), 5u);
  const ir::Expr& lit = *st[2].rhs;
  EXPECT_EQ(lit.kind, ir::Expr::Kind::kLiteral);
  EXPECT_EQ(lit.type, ir::DType::kBool);
  EXPECT_EQ(lit.literal, 1);
  EXPECT_EQ(st[0].rhs->type, ir::DType::kBool);
  EXPECT_EQ(st[0].rhs->op, ir::Op::kBitOr);
  EXPECT_EQ(st[1].rhs->args[0]->type, ir::DType::kBool);  // a comparison
  EXPECT_EQ(st[3].rhs->type, ir::DType::kI32);             // arithmetic on bool counts in i32
  EXPECT_EQ(p.nodes[2].init.a, 1);
  EXPECT_EQ(check_round_trip(p, "true and false"), text);
  // A keyword cannot name anything.
  ParseResult named = parse("input true : f32\n", "k.kiln");
  ASSERT_EQ(named.diagnostics.size(), 1u);
  EXPECT_EQ(named.diagnostics[0].message, "'true' is a keyword and cannot be used as a name");
}

// INITs hold any value of their type: the integer types' whole range, bool's true, false, 1 and
// 0, the narrow floats up to where they would round to infinity; i32 keeps its random draws.
TEST(ElementTypes, InitValuesAtTheEdgesOfEachType) {
  const std::string text =
      "param  a : u8[4] = 255\n"
      "param  b : i8 = -128\n"
      "const  w : i64 = -9223372036854775808\n"
      "const  u : u64 = 18446744073709549568\n"
      "const  t : bool = true\n"
      "param  f : bool[2] = 0\n"
      "param  h : f16 = 65519.99\n"
      "param  g : bf16[2] = -inf\n"
      "param  k : bf16 = 3.38e+38\n"
      "param  r : i32[2] = uniform(0, 10)\n"
      "param  q : f16[3] = normal(0, 1)\n";
  const ir::Program p = parsed(text);
  ASSERT_EQ(p.nodes.size(), 11u);
  EXPECT_EQ(p.nodes[2].init.a, -9223372036854775808.0);
  std::string expected = text;
  expected.replace(expected.find("bool[2] = 0"), 11, "bool[2] = false");
  EXPECT_EQ(check_round_trip(p, "INITs"), expected);
}

// The operators' tree, every operation in parentheses.
std::string tree(const ir::Program& p, const ir::Assignment& s, const ir::Expr& e) {
  if (e.kind != ir::Expr::Kind::kOp) return ir::print_expr(p, s, e);
  const std::string name(ir::op_name(e.op));
  std::vector<std::string> args;
  for (const ir::ExprRef& a : e.args) args.push_back(tree(p, s, *a));
  const bool infix = !std::isalpha(static_cast<unsigned char>(name[0]));
  if (infix && args.size() == 1) return "(" + name + args[0] + ")";
  if (infix) return "(" + args[0] + " " + name + " " + args[1] + ")";
  std::string out = name + "(";
  for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i];
  return out + ")";
}

// Binding as in C, but with one level for every comparison: from the loosest, | ^ & comparisons
// shifts + - * / and the unary - ~; binary operators group to the left.
TEST(ElementTypes, PrecedenceOfTheNewOperators) {
  const struct {
    const char* text;
    const char* tree;
  } cases[] = {
      {"a | b ^ c & d", "(a | (b ^ (c & d)))"},
      {"a & b | c ^ d", "((a & b) | (c ^ d))"},
      {"a ^ b | c", "((a ^ b) | c)"},
      {"a & b == c", "(a & (b == c))"},
      {"a == b & c", "((a == b) & c)"},
      {"a > 0 & b > 0 | c == d", "(((a > 0) & (b > 0)) | (c == d))"},
      {"a < b << c", "(a < (b << c))"},
      {"a >> b > c", "((a >> b) > c)"},
      {"a << b + c", "(a << (b + c))"},
      {"a + b << c", "((a + b) << c)"},
      {"a << b << c", "((a << b) << c)"},
      {"a>>b>>c", "((a >> b) >> c)"},
      {"a | b | c", "((a | b) | c)"},
      {"a - b - c", "((a - b) - c)"},
      {"a * b + c * d", "((a * b) + (c * d))"},
      {"~a & b", "((~a) & b)"},
      {"~a * b", "((~a) * b)"},
      {"-~a", "(-(~a))"},
      {"~-a", "(~(-a))"},
      {"~~a", "(~(~a))"},
      {"a > -b", "(a > (-b))"},
      {"a<<-b", "(a << (-b))"},
      {"a>=b", "(a >= b)"},
      {"(a | b) & c", "((a | b) & c)"},
      {"a & (b << c + 1)", "(a & (b << (c + 1)))"},
  };
  const std::string decls = "input a : i32\ninput b : i32\ninput c : i32\ninput d : i32\noutput y : i32\n";
  for (const auto& c : cases) {
    const ir::Program p = parsed(decls + "y = " + c.text + "\n");
    if (p.routines.empty()) continue;
    const ir::Assignment& s = p.routines[0].statements[0];
    EXPECT_EQ(tree(p, s, *s.rhs), c.tree) << c.text;
    check_round_trip(p, c.text);  // printed with only the parentheses precedence needs
  }
  // `->` of a call and `>>` of a shift side by side.
  const ir::Program call = parsed("input x : i32[4]\noutput y : i32[4]\noutput z : i32[4]\ncall sort(x) -> y\nz[i] = y[i]>>1\n");
  ASSERT_EQ(call.routines.size(), 1u);
  EXPECT_EQ(call.routines[0].calls.size(), 1u);
  EXPECT_EQ(call.routines[0].statements[0].rhs->op, ir::Op::kShr);
}

// Integer literals print without '.' in every integer type, all their digits, so that they read
// back as weak integer literals and take the same type again.
TEST(ElementTypes, IntegerLiteralsOfEveryWidthPrintBack) {
  const std::string text =
      "input  a : u8[4]\n"
      "input  w : u64[4]\n"
      "input  v : i64[4]\n"
      "input  h : f16[4]\n"
      "output y : u8[4]\n"
      "output yw : u64[4]\n"
      "output yv : i64[4]\n"
      "output yh : f16[4]\n"
      "\n"
      "y[i] = a[i] + 3\n"
      "yw[i] = w[i] + 10000000000000000000\n"
      "yv[i] = v[i] + -9223372036854775808\n"
      "yv[i] = 4611686018427387904 * v[i] >> 62\n"
      "yh[i] = h[i] * 0.5 + 2.0\n"
      "y[i] = 255\n";
  const ir::Program p = parsed(text);
  const auto& st = p.routines[0].statements;
  ASSERT_EQ(st.size(), 6u);
  EXPECT_EQ(st[0].rhs->type, ir::DType::kU8);
  EXPECT_EQ(st[0].rhs->args[1]->type, ir::DType::kU8);
  EXPECT_EQ(st[1].rhs->args[1]->type, ir::DType::kU64);
  EXPECT_EQ(st[2].rhs->args[1]->literal, -9223372036854775808.0);
  EXPECT_EQ(st[4].rhs->args[1]->type, ir::DType::kF32);  // a literal beside f16 is f32
  EXPECT_EQ(st[5].rhs->type, ir::DType::kU8);
  EXPECT_EQ(check_round_trip(p, "literals of every width"), text);
}

// A gathered subscript reads any integer type.
TEST(ElementTypes, GathersOfEveryIntegerType) {
  for (ir::DType t : ir::kAllDTypes) {
    if (!ir::is_integer_type(t)) continue;
    const std::string text = "input  t : " + type_name(t) +
                             "[3]\n"
                             "input  e : f32[5, 2]\n"
                             "output y : f32[3, 2]\n"
                             "\n"
                             "y[i, j] = e[t[i], j] + e[t[t[i]] + 1, j]\n";
    const ir::Program p = parsed(text);
    if (p.routines.empty()) continue;
    EXPECT_EQ(check_round_trip(p, text), text);
  }
}

// Random programs over every type and every operator, from the builder: those that type-check
// print and parse back to themselves; the others are refused for a typing rule, not a crash or
// an invalid program.
class RandomTypedPrograms {
 public:
  explicit RandomTypedPrograms(uint64_t seed) : rng_(seed) {}

  Result<ir::Program> make() {
    ir::ProgramBuilder b;
    for (ir::DType t : ir::kAllDTypes) inputs_.push_back(b.input("x_" + type_name(t), t, {4}));
    std::vector<ir::Tensor> outputs;
    for (ir::DType t : ir::kAllDTypes) outputs.push_back(b.output("y_" + type_name(t), t, {4}));
    for (int st = 0; st < 3; ++st) {
      b.main().assign(outputs[pick(outputs.size())](ir::Index("i")), expr(4).value);
    }
    return b.build();
  }

 private:
  // A value, and whether it is made only of number literals (weak: typed by its context).
  struct Made {
    ir::Value value;
    bool weak;
  };

  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }

  Made leaf() {
    switch (pick(6)) {
      case 0: return {ir::Value(static_cast<int>(pick(300)) - 20), true};
      case 1: return {ir::Value(static_cast<double>(pick(100)) / 4), true};
      case 2: return {ir::Value(pick(2) == 0), false};
      case 3: return {ir::Index("i"), false};
      default: return {inputs_[pick(inputs_.size())](ir::Index("i")), false};
    }
  }

  Made expr(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf();
    const Made x = expr(depth - 1);
    const size_t op = pick(16);
    if (op == 13) {  // select: its condition does not make it strong
      const Made a = expr(depth - 1), b = expr(depth - 1);
      return {ir::select(x.value, a.value, b.value), a.weak && b.weak};
    }
    if (op == 15) return {ir::cast(x.value, ir::kAllDTypes[pick(std::size(ir::kAllDTypes))]), false};
    const bool bitwise = (op >= 5 && op <= 10);
    if (op == 4 || op == 8) {  // - ~
      // Known bug, DISABLED_WeakBitwiseBesideAFloat below: a weak ~, & | ^ or shift settled into
      // a float context, or a weak value shifted by a float or bool, makes an invalid program.
      if (bitwise && x.weak) return leaf();
      return {op == 4 ? -x.value : ~x.value, x.weak};
    }
    const Made y = expr(depth - 1);
    if (bitwise && x.weak && (y.weak || op == 9 || op == 10)) return leaf();
    const ir::Value& a = x.value;
    const ir::Value& b = y.value;
    const bool weak = x.weak && y.weak;
    switch (op) {
      case 0: return {a + b, weak};
      case 1: return {a - b, weak};
      case 2: return {a * b, weak};
      case 3: return {a / b, weak};
      case 5: return {a & b, weak};
      case 6: return {a | b, weak};
      case 7: return {a ^ b, weak};
      case 9: return {a << b, x.weak};
      case 10: return {a >> b, x.weak};
      case 11: return {ir::lt(a, b), weak};
      case 12: return {ir::eq(a, b), weak};
      default: return {ir::max(a, b), weak};
    }
  }

  std::mt19937_64 rng_;
  std::vector<ir::Tensor> inputs_;
};

TEST(ElementTypes, RandomProgramsOfEveryTypeRoundTrip) {
  int built = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Result<ir::Program> p = RandomTypedPrograms(seed).make();
    if (!p.ok()) {
      // Only the typing rules of version 3 may refuse one. (Which programs the seeds make
      // depends on the compiler's order of evaluating arguments: Clang's make bool(252).)
      const std::string& m = p.status().message();
      EXPECT_TRUE(m.find("does not apply to") != std::string::npos ||
                  m.find("have no common type") != std::string::npos ||
                  m.find("does not fit in") != std::string::npos ||
                  m.find("is not a bool value") != std::string::npos)
          << "seed " << seed << ": " << m;
      continue;
    }
    ++built;
    check_round_trip(*p, "seed " + std::to_string(seed));
  }
  EXPECT_GT(built, 40);
}

// A weak bitwise operation or shift (made of number literals only) beside a float: typing settles
// its literals to the float type, which the operator does not take, and the program fails
// validation ("internal error: op '~' does not take arguments of types f32"). It should type the
// operation as an integer one (or refuse it with a message). So does a number literal shifted by
// a float or a bool (`1 << x`), which should be refused like `n << x`. Typing is
// src/ir/statement_typing.cc.
// Bitwise ops and shifts of literals beside a float compute in i32 and are promoted; a shift by
// a float or bool is refused with a message (both were internal errors once).
TEST(ElementTypes, WeakBitwiseBesideAFloat) {
  for (const char* rhs : {"x + ~3", "x + (1 << 2)", "x + (3 & 1)", "x * (1 >> 2)", "x + (2 ^ 1)", "h + ~3", "1 << x",
                          "f32(2 >> b)", "x + (1.5 & 3)"}) {
    const std::string text = std::string("input x : f32\ninput h : f16\ninput b : bool\noutput y : f32\ny = ") + rhs + "\n";
    ParseResult r = parse(text, "weak.kiln");
    for (const ir::Diagnostic& d : r.diagnostics) {
      EXPECT_EQ(d.message.find("internal error"), std::string::npos) << rhs << ": " << d.message;
    }
    const bool refused = std::string(rhs) == "1 << x" || std::string(rhs) == "f32(2 >> b)" || std::string(rhs) == "x + (1.5 & 3)";
    EXPECT_EQ(r.program.has_value(), !refused) << rhs;
    if (r.program) check_round_trip(*r.program, rhs);
  }
  ParseResult cast = parse("output y : u8\ny = u8(300)\n", "cast.kiln");
  ASSERT_FALSE(cast.diagnostics.empty());
  EXPECT_NE(cast.diagnostics[0].message.find("u8(300): 300 is not a u8 value"), std::string::npos)
      << cast.diagnostics[0].message;
}

// The builder writes the same program as the text: casts to any type, bool literals, the
// bitwise operators and shifts.
TEST(ElementTypes, BuilderProgramsEqualParsedOnes) {
  using namespace ir;
  ProgramBuilder b;
  Tensor a = b.input("a", DType::kU8, {4});
  Tensor m = b.input("m", DType::kBool, {4});
  Tensor h = b.input("h", DType::kBF16, {4});
  Tensor y = b.output("y", DType::kU8, {4});
  Tensor z = b.output("z", DType::kBool, {4});
  Tensor w = b.output("w", DType::kI64, {4});
  Index i("i");
  b.main()
      .assign(y(i), ((a(i) << 2 | a(i) >> 1) & ~a(i)) ^ 7)
      .assign(z(i), (m(i) & true) | (~m(i) & gt(h(i), 0.5)))
      .assign(w(i), cast(h(i), DType::kI64) + cast(a(i), DType::kI64) * cast(m(i), DType::kU16))
      .assign(z(i), false);
  Result<Program> built = b.build();
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string text =
      "input  a : u8[4]\n"
      "input  m : bool[4]\n"
      "input  h : bf16[4]\n"
      "output y : u8[4]\n"
      "output z : bool[4]\n"
      "output w : i64[4]\n"
      "\n"
      "y[i] = (a[i] << 2 | a[i] >> 1) & ~a[i] ^ 7\n"
      "z[i] = m[i] & true | ~m[i] & h[i] > 0.5\n"
      "w[i] = i64(h[i]) + i64(a[i]) * u16(m[i])\n"
      "z[i] = false\n";
  const ir::Program p = parsed(text);
  EXPECT_TRUE(ir::testing::programs_equal(*built, p));
  EXPECT_EQ(ir::print_program(*built), text);
}

}  // namespace
}  // namespace kiln::lang
