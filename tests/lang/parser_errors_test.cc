// The parser's errors: each class at its exact line and column with a message that says what to
// do, and every error of a file reported at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

// Declarations shared by the error cases (lines 1-7); the case's text starts on line 8.
constexpr const char* kPrelude =
    "input  x : f32[4, 5]\n"
    "input  v : f32[5]\n"
    "output y : f32[4]\n"
    "output z : f32[4, 5]\n"
    "param  s : f32\n"
    "const  c : i32 = 2\n"
    "tensor t : f32[4]\n";
constexpr int kFirstLine = 8;

std::vector<std::string> errors(const std::string& text) {
  ParseResult r = parse(text, "e.kiln");
  std::vector<std::string> out;
  for (const Diagnostic& d : r.diagnostics) {
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.column) + ": " + d.message);
  }
  EXPECT_EQ(r.program.has_value(), out.empty());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

struct Case {
  const char* name;
  const char* text;  // after the prelude
  int line;          // relative to the case's first line (1 = first)
  int column;
  const char* fragment;
};

// One error exactly, where expected, saying what is expected.
void check(const Case& c, bool with_prelude = true) {
  std::string text = (with_prelude ? std::string(kPrelude) : std::string()) + c.text;
  std::vector<std::string> e = errors(text);
  int line = c.line + (with_prelude ? kFirstLine - 1 : 0);
  std::string prefix = std::to_string(line) + ":" + std::to_string(c.column) + ": ";
  ASSERT_EQ(e.size(), 1u) << c.name << "\n" << joined(e);
  EXPECT_EQ(e[0].rfind(prefix, 0), 0u) << c.name << ": " << e[0];
  EXPECT_NE(e[0].find(c.fragment), std::string::npos) << c.name << ": " << e[0];
}

TEST(ParserErrors, LexicalErrors) {
  check({"unknown character", "y[i] = x[i, 0] $ 2\n", 1, 16, "unexpected character '$'; remove it"});
  check({"malformed number", "y[i] = x[i, 0] * 1.2.3\n", 1, 18, "malformed number '1.2.3'; numbers look like 3, 0.5, 1e-3 or 2.5E+2"});
  check({"number out of range", "y[i] = 1e400\n", 1, 8, "out of the range of a 64-bit float"});
}

TEST(ParserErrors, DeclarationErrors) {
  check({"unknown dtype", "input a : f8[3]\n", 1, 11,
         "unknown type 'f8'; the types are bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64"});
  check({"misspelt dtype", "input a : unt8[3]\n", 1, 11, "unknown type 'unt8'; the types are bool, i8, "});
  check({"misspelt dtype suggestion", "input a : f23[3]\n", 1, 11, "did you mean 'f32'?"});
  check({"zero dim", "input a : f32[3, 0]\n", 1, 18, "dimension sizes must be positive integers, found 0"});
  check({"negative dim", "input a : f32[-2]\n", 1, 15, "dimension sizes must be positive integers, found -2"});
  check({"float dim", "input a : f32[2.5]\n", 1, 15, "dimension sizes must be positive integers, found 2.5"});
  check({"name dim", "input a : f32[N]\n", 1, 15,
         "'N' is not a declared size or integer const; declare it before this line, with `size N` or `const N : i32 = 16`"});
  check({"missing comma", "input a : f32[2 3]\n", 1, 17, "expected ',' or ']' after the dimension sizes, found '3'"});
  check({"duplicate name", "param x : f32\n", 1, 7, "'x' is already declared on line 1; every name is declared once"});
  check({"init on input", "input a : f32 = 1\n", 1, 15, "input 'a' cannot have an initializer: inputs are supplied by the host"});
  check({"init on output", "output a : f32 = uniform(0, 1)\n", 1, 16, "output 'a' cannot have an initializer"});
  check({"const without value", "const k : f32\n", 1, 7, "const 'k' needs a value, like `const k : f32 = 1`"});
  check({"random const", "const k : f32 = normal(0, 1)\n", 1, 15, "const 'k' must be initialized with a number"});
  check({"bad init", "param a : f32 = foo\n", 1, 17, "unknown name 'foo' in a constant expression (it reads numbers and consts declared before)"});
  check({"no init", "param a : f32 = @local\n", 1, 17, "expected a number, uniform(LO, HI) or normal(MEAN, STD) after '=', found '@'"});
  check({"bad uniform", "param a : f32 = uniform(1)\n", 1, 26, "expected ',', found ')'"});
  check({"normal without parentheses", "param a : f32 = normal 0, 1\n", 1, 24, "expected '(' after normal, found '0'"});

  check({"uniform order", "param a : f32 = uniform(1, 0)\n", 1, 15, "uniform(LO, HI) needs LO <= HI"});
  check({"i32 init", "param a : i32 = 0.5\n", 1, 15, "i32 'a' cannot be initialized with 0.5; use an integer"});
  check({"keyword as name", "input where : f32\n", 1, 7, "'where' is a keyword and cannot be used as a name"});
  check({"keyword as routine name", "routine const {\n}\n", 1, 9, "'const' is a keyword and cannot be used as a name"});
  check({"missing colon", "input a f32\n", 1, 9, "expected ':' after the name, as in `input a : f32[4]`, found 'f32'"});
  check({"missing name", "input : f32\n", 1, 7, "expected a name after 'input', found ':'"});
}

// Language version 3: the types' rules, each error at its place with what to do. Declarations on
// the lines before each case's statement (line 5).
TEST(ParserErrors, ElementTypeErrors) {
  const std::string decls =
      "input a : u64[4]\ninput n : i32[4]\ninput f : f32[4]\ninput m : bool[4]\n";
  auto typing = [&](const char* name, const std::string& statement, int column, const char* fragment) {
    const std::string text = decls + "output o : i32[4]\n" + statement + "\n";
    check({name, text.c_str(), 6, column, fragment}, false);
  };
  typing("u64 and a signed type", "o[i] = i32(a[i] + n[i])", 17,
         "'+' of u64 and i32: u64 and a signed integer type have no common type; cast one of them (i64(...) or u64(...))");
  typing("a comparison of u64 and i32", "o[i] = i32(a[i] < n[i])", 17, "'<' of u64 and i32");
  typing("float in &", "o[i] = i32(f[i] & n[i])", 17,
         "'&' does not apply to f32 and i32: it takes bool or integer operands (compare a float first, or cast it)");
  typing("float in ~", "o[i] = i32(~f[i])", 12, "'~' does not apply to f32: it takes bool or integer operands");
  typing("float shift", "o[i] = i32(f[i] >> 1)", 17,
         "'>>' does not apply to f32 and i32: it takes integer operands (cast with i32(...) or another integer type)");
  typing("shift by a float", "o[i] = n[i] << f[i]", 13, "'<<' does not apply to i32 and f32: it takes integer operands");
  typing("bool shift", "o[i] = i32(m[i] << 1)", 17, "'<<' does not apply to bool and i32");
  typing("literal beyond u8", "o[i] = i32(u8(n[i]) + 300)", 23,
         "integer literal 300 does not fit in u8, the type of the operand beside it; cast that operand");
  typing("negative literal beside u64", "o[i] = i32(a[i] * -1)", 19, "integer literal -1 does not fit in u64");
  typing("literal beyond i64", "o[i] = i32(i64(n[i]) + 9223372036854775808)", 24,
         "integer literal 9223372036854775808 does not fit in i64");
  typing("gather of a float", "o[i] = n[f[i]]", 10,
         "a subscript of 'n' reads a f32 value; a gathered subscript reads integer values (convert with i32(...))");
  typing("gather of a bool", "o[i] = n[m[i]]", 10, "a subscript of 'n' reads a bool value");
  typing("unknown cast", "o[i] = uint8(n[i])", 8,
         "unknown function 'uint8'; the functions are exp, log, sqrt, rsqrt, tanh, sigmoid, relu, abs, sin, cos, erf, "
         "floor, ceil, max, min, pow, select, the casts to each type (bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, "
         "bf16, f32, f64), and the reductions sum, prod, max, min, mean, argmax, argmin");
  typing("misspelt function", "o[i] = i32(floot(f[i]))", 12, "unknown function 'floot'; the functions are exp,");
  typing("misspelt function suggestion", "o[i] = i32(floot(f[i]))", 12, "; did you mean 'floor'?");
  typing("C's and", "o[i] = n[i] && n[i]", 13, "'&&' is not an operator; write '&' (on bool values it is the logical and)");
  typing("C's or", "o[i] = n[i] || n[i]", 13, "'||' is not an operator; write '|' (on bool values it is the logical or)");
  typing("C's not", "o[i] = i32(!m[i])", 12, "unexpected character '!'; did you mean '!='? (the logical not of a bool is '~')");
  typing("true is a keyword", "true = 1", 1, "'true' cannot start a statement");
  typing("a compound shift", "o[i] >>= 1", 6, "expected '=', '+=', '-=' or '*=' after the target 'o', found '>>'");

  check({"input named false", "input false : bool\n", 1, 7, "'false' is a keyword and cannot be used as a name"});
  check({"u8 beyond its range", "param p : u8[4] = 300\n", 1, 17,
         "u8 'p' cannot be initialized with 300; use an integer in the u8 range (0 to 255)"});
  check({"i8 below its range", "param q : i8 = -129\n", 1, 14, "use an integer in the i8 range (-128 to 127)"});
  check({"u64 negative", "const w : u64 = -1\n", 1, 15, "use an integer in the u64 range (0 to 18446744073709551615)"});
  check({"i64 beyond its range", "const w : i64 = 9223372036854775808\n", 1, 15,
         "use an integer in the i64 range (-9223372036854775808 to 9223372036854775807)"});
  check({"u16 fraction", "param p : u16 = 1.5\n", 1, 15, "u16 'p' cannot be initialized with 1.5"});
  check({"bool beyond 1", "const b : bool = 2\n", 1, 16, "bool 'b' cannot be initialized with 2; use true, false, 1 or 0"});
  check({"f16 beyond its range", "param h : f16[2] = 65520\n", 1, 18,
         "f16 'h' cannot be initialized with 65520: it is beyond the f16 range and would be infinite (write inf if that is meant)"});
  check({"bf16 beyond its range", "param h : bf16 = -3.4e38\n", 1, 16, "beyond the bf16 range"});
  check({"f32 beyond its range", "const h : f32 = 1e39\n", 1, 15, "beyond the f32 range"});
  check({"random u8", "param r : u8[4] = uniform(0, 10)\n", 1, 17,
         "uniform(...) cannot initialize u8 'r': random initializers are for float types and i32 (draw into a float "
         "tensor and convert it with u8(...) in a routine)"});
  check({"random bool", "param r : bool[4] = normal(0, 1)\n", 1, 19, "normal(...) cannot initialize bool 'r'"});
}

// Sizes (language version 2): each misuse at its place, with what to do.
// Constant expressions (language version 2) in INITs and const values.
TEST(ParserErrors, ConstantExpressionErrors) {
  check({"division by zero", "const a : f32 = 1 / (2 - 2)\n", 1, 19, "division by zero in a constant expression"});
  check({"a param", "param pp : f32 = 1\nconst cc : f32 = pp + 1\n", 2, 18,
         "'pp' is a param: a constant expression reads numbers and consts with a value"});
  check({"a function", "const d : f32 = exp(1)\n", 1, 17, "'exp' in a constant expression: it takes + - * / only"});
  check({"a later const", "const a : f32 = b\nconst b : f32 = 1\n", 1, 17, "unknown name 'b' in a constant expression"});
  check({"a tensor read", "input xx : f32[2]\nconst cc : f32 = xx[0]\n", 2, 18, "reads numbers and consts, not tensors"});
  check({"overflow", "const big : f64 = 1e300 * 1e300\n", 1, 25, "overflows"});
}

// Consts as dimensions: a scalar i32 const only, and the dimension must come out positive.
TEST(ParserErrors, ConstDimensionErrors) {
  check({"float const", "const F : f32 = 4\ninput a : f32[2, F]\n", 2, 18,
         "const 'F' is f32; a dimension takes a scalar i32 const (`const F : i32 = 16`)"});
  check({"const tensor", "const K : i32[2] = 1\ninput a : f32[K]\n", 2, 15, "const 'K' is i32[2]; a dimension takes a scalar i32 const"});
  check({"zero", "const Z : i32 = 2\noutput a : f32[Z - 2]\n", 2, 16, "dimension sizes must be positive integers, found 0"});
  check({"negative", "const M : i32 = -3\nparam a : f32[4, M]\n", 2, 18, "dimension sizes must be positive integers, found -3"});
  check({"a tensor", "input a : f32[t]\n", 1, 15,
         "'t' is a tensor, whose values are not known when it is declared; a dimension takes sizes and integer consts"});
  check({"a const declared later", "input a : f32[L]\nconst L : i32 = 2\n", 1, 15, "'L' is not a declared size or integer const"});
  check({"misspelled", "const Dim : i32 = 2\ninput a : f32[Dmi]\n", 2, 15, "did you mean 'Dim'?"});
  check({"not affine", "const D : i32 = 2\nsize N\noutput a : f32[N * N + D]\n", 3, 18, "dimension is not affine"});
}

// inf and nan: float values only, and not where a random initializer's numbers go.
TEST(ParserErrors, InfAndNanErrors) {
  check({"i32 const", "const k : i32 = -inf\n", 1, 15, "i32 'k' cannot be initialized with -inf; use an integer"});
  check({"i32 nan", "param p : i32[2] = nan\n", 1, 18, "i32 'p' cannot be initialized with nan"});
  check({"random", "param r : f32[2] = uniform(-inf, 0)\n", 1, 18, "the initializer of 'r' must be finite"});
  check({"a dimension", "input a : f32[inf]\n", 1, 15, "'inf' is not a declared size or integer const"});
  check({"finite overflow still", "const big : f64 = 1e300 * 1e300 + inf\n", 1, 25, "overflows"});
  check({"a size hides it", "size inf\nconst cc : f32 = inf\n", 2, 18, "'inf' is a size: a constant expression reads numbers"});
  check({"a tensor hides it", "input inf : f32[4]\ny[i] = x[i, 0] + inf\n", 2, 18,
         "'inf' has 1 dimension but 0 subscripts are given; write exactly one subscript per dimension (this "
         "declaration hides the literal inf; rename it)"});
}

TEST(ParserErrors, SizeErrors) {
  check({"undeclared size", "size Batch\ninput a : f32[Bach, 3]\n", 2, 15,
         "'Bach' is not a declared size or integer const; did you mean 'Batch'?; declare it before this line, with "
         "`size Bach` or `const Bach : i32 = 16`"});
  check({"size in a param", "size N\nparam a : f32[N]\n", 2, 15, "a param keeps one shape across runs"});
  check({"size in a const", "size N\nconst a : f32[N] = 1\n", 2, 15, "a const keeps one shape across runs"});
  check({"affine input", "size N\ninput a : f32[N + 1]\n", 2, 15,
         "an input's dimension is a number or a size's bare name, which the input binds; 'N + 1' is an expression"});
  check({"size times size", "size N\noutput a : f32[N * N]\n", 2, 18, "dimension is not affine: it multiplies size 'N' by size 'N'"});
  check({"size declared twice", "size N\nsize N\n", 2, 6, "size 'N' is already declared on line 8"});
  check({"size named like a tensor", "size x\n", 1, 6, "'x' is already declared on line 1"});
  check({"tensor named like a size", "size N\ntensor N : f32\n", 2, 8, "'N' is already declared as a size on line 8"});
  check({"size in a subscript", "size N\ny[i] = x[i, N - 1]\n", 2, 13, "size 'N' cannot be used in a subscript"});
  check({"size as a target index", "size N\ny[N] = 1\n", 2, 3, "target subscripts must be index names, but 'N' is a size"});
  check({"size as an index", "size N\ny[i] = sum(x[i, k]) where N < 5\n", 2, 27, "'N' is a size, so it cannot be an index"});
  check({"sizes disagree", "size N\nsize M\ninput u : f32[N]\noutput o : f32[M]\no[i] = u[i] + 1\n", 5, 10,
         "index 'i' stands alone in dimension 0 of 'u' (size N) here, but in dimension 0 of 'o' (size M) elsewhere"});
  check({"bound of a number for a size", "size N\ninput u : f32[N]\noutput o : f32\no = sum(u[k]) where k < 4\n", 4, 21,
         "where k < 4 disagrees with dimension 0 of 'u' (size N)"});
  check({"bound disagrees", "size N\noutput w : f32[N]\nw[i] = 1 where i < 4\n", 3, 16,
         "where i < 4 disagrees with dimension 0 of 'w' (size N)"});
}

// Triangular bounds (language version 2): `where u < t + 1` limits a reduced index by other
// indices; each misuse at its place.
TEST(ParserErrors, TriangularBoundErrors) {
  check({"on a target index", "z[i, j] = x[i, j] where j < i + 1\n", 1, 25,
         "'j' is a target index; a bound that names other indices (a triangle, like `where u < t + 1`) limits an "
         "index the statement reduces over"});
  check({"names itself", "y[i] = sum(x[i, u]) where u < u + 1\n", 1, 31, "the bound of 'u' names 'u' itself"});
  check({"a cycle", "s = sum(x[i + 0, j + 0]) where i < j + 1, j < i + 1\n", 1, 32,
         "the bound of 'i' depends on 'i' itself through the bounds of the indices it names"});
  check({"below 1 everywhere", "y[i] = sum(v[u + i]) where u < i - 4\n", 1, 28,
         "the bound of 'u' is below 1 at every point, so 'u' would run over no value"});
  check({"not affine", "y[i] = sum(x[i, u]) where u < i * i\n", 1, 33, "bound is not affine: it multiplies 'i' by 'i'"});
  check({"a tensor", "y[i] = sum(x[i, u]) where u < v[i]\n", 1, 31, "a tensor value cannot be used in a bound"});
  check({"mean over a triangle of two reduced indices", "s = mean(x[i, u]) where u < i + 1\n", 1, 25,
         "mean(...) over 'u', whose bound names 'i', which it also reduces over, is not supported"});
  check({"an argmax that the bound makes reduce over two", "s = sum(f32(k)) * f32(argmax(v[u])) where u < k + 1, k < 3\n", 1, 23,
         "argmax(...) gives a position along one index, but it reduces over 2"});
}

TEST(ParserErrors, MemoryModeErrors) {
  check({"unknown mode", "tensor a : f32[3] @vitual\n", 1, 20,
         "unknown memory mode '@vitual' (the modes are @virtual, @local, @device and @hosted); did you mean '@virtual'?"});
  check({"input local", "input a : f32[3] @local\n", 1, 19, "tensor 'a' cannot be local: it is input"});
  check({"output virtual", "output a : f32[3] @virtual\n", 1, 20, "inputs, outputs and params are always stored"});
  check({"local const", "const a : f32[3] = 1 @local\n", 1, 23, "a const cannot be a local array"});
  check({"mode without name", "tensor a : f32[3] @\n", 1, 20, "expected a memory mode after '@'"});
  check({"mode before init", "param a : f32[3] @device = 1\n", 1, 26, "expected end of line, found '='"});
}

TEST(ParserErrors, NameErrors) {
  check({"use before declaration", "y[i] = late[i]\ninput late : f32[4]\n", 1, 8,
         "'late' is used before its declaration on line 9; declare it before the statements that use it"});
  check({"unknown tensor", "y[i] = nope[i]\n", 1, 8, "unknown tensor 'nope'; declare it before the statements that use it"});
  check({"unknown target", "w[i] = y[i]\n", 1, 1, "unknown tensor 'w'; declare it before assigning to it"});
  check({"unknown name", "y[i] = x[i, 0] * foo\n", 1, 18, "unknown name 'foo': it is not a declared tensor, const or size, nor an index of this statement (an index must appear in a subscript)"});
  check({"keyword as value", "y[i] = input\n", 1, 8, "'input' is a keyword and cannot be used as a value"});
  check({"where without statement", "where k < 3\n", 1, 1, "'where' cannot start a statement"});
  check({"tensor as index", "y[i] = v[s]\n", 1, 10, "'s' is a tensor, so it cannot be an index"});
}

TEST(ParserErrors, CallErrors) {
  check({"unknown function", "y[i] = foo(x[i, 0])\n", 1, 8, "unknown function 'foo'; the functions are exp, log"});
  check({"tensor called", "y[i] = t(i)\n", 1, 8, "'t' is a tensor, not a function: read it with brackets, t[...]"});
  check({"initializer called", "y[i] = uniform(0, 1)\n", 1, 8, "uniform(...) is an initializer; it is allowed only after '=' in a declaration"});
  check({"fma is not the language's", "y[i] = fma(y[i], y[i], y[i])\n", 1, 8, "unknown function 'fma'"});
  check({"wrong argument count", "y[i] = exp(y[i], 2)\n", 1, 8, "exp takes 1 argument, but 2 are given"});
  check({"wrong argument count 2", "y[i] = pow(y[i])\n", 1, 8, "pow takes 2 arguments, but 1 is given"});
  check({"select arguments", "y[i] = select(y[i], 1)\n", 1, 8, "select takes 3 arguments, but 2 are given"});
  check({"max arguments", "y[i] = max(y[i], 1, 2)\n", 1, 8, "max takes 1 argument (a reduction) or 2 (elementwise), but 3 are given"});
  check({"sum arguments", "y[i] = sum(x[i, j], 1)\n", 1, 8, "sum is a reduction and takes 1 argument, but 2 are given"});
  check({"no arguments", "y[i] = mean()\n", 1, 8, "mean is a reduction and takes 1 argument, but 0 are given"});
}

TEST(ParserErrors, SubscriptErrors) {
  check({"too few subscripts", "y[i] = x[i]\n", 1, 8, "'x' has 2 dimensions but 1 subscript is given; write exactly one subscript per dimension"});
  check({"too many subscripts", "y[i] = v[i, 0]\n", 1, 8, "'v' has 1 dimension but 2 subscripts are given"});
  check({"target subscripts", "z[i] = 1\n", 1, 1, "'z' has 2 dimensions but 1 subscript is given"});
  check({"scalar with subscripts", "y[i] = s[i]\n", 1, 8, "'s' is a scalar; write it without subscripts"});
  check({"array without subscripts", "y[i] = t\n", 1, 8, "'t' has 1 dimension but 0 subscripts are given"});
  check({"non-affine", "y[i] = sum(x[i, i * j])\n", 1, 19, "subscript is not affine: it multiplies index 'i' by index 'j'"});
  check({"division", "y[i] = x[i, i / 2]\n", 1, 15, "a subscript cannot divide"});
  check({"float subscript", "y[i] = v[0.5]\n", 1, 10, "a subscript must be an integer, not a float literal"});
  check({"gather of a float", "y[i] = v[c + y[i]]\n", 1, 14, "a subscript of 'v' reads a f32 value; a gathered subscript reads integer values (convert with i32(...))"});
  check({"target not bare", "y[i + 1] = 1\n", 1, 5, "target subscripts must be bare index names, one per dimension"});
  check({"target const", "y[c] = 1\n", 1, 3, "target subscripts must be index names, but 'c' is a const"});
  check({"target repeated", "z[i, i] = 1\n", 1, 6, "index 'i' appears twice in the target"});
}

TEST(ParserErrors, IndexErrors) {
  check({"bound missing", "y[i] = sum(x[i, j + 1])\n", 1, 17, "the range of index 'j' is unknown: it never stands alone as a whole subscript; add a bound like `where j < N`"});
  check({"extents disagree", "z[i, j] = x[i, j] + v[i]\n", 1, 23, "index 'i' stands alone in dimension 0 of 'v' (size 5) here, but in dimension 0 of 'z' (size 4) elsewhere; the sizes must agree"});
  check({"bound disagrees", "y[i] = sum(v[k]) where k < 4\n", 1, 24, "where k < 4 disagrees with dimension 0 of 'v' (size 5), where 'k' stands alone"});
  check({"bound on a non-index", "y[i] = 1 where q < 2\n", 1, 16, "where bound on 'q', which is not used in this statement"});
  check({"bound not positive", "y[i] = sum(v[i + k]) where k < 0\n", 1, 32, "the bound of 'k' must be positive"});
  check({"bound not a number", "y[i] = sum(v[i + k]) where k < q\n", 1, 32,
         "the bound of 'k' must be an integer, an integer const, a size or another index of the statement; 'q' is none"});
  check({"bad bound syntax", "y[i] = sum(v[i + k]) where k <= 2\n", 1, 30, "expected '<' in `where k < N`, found '<='"});
  check({"not on the left", "y[i] = x[i, j]\n", 1, 13, "index 'j' is not on the left side; reduce over it with sum(...)"});
}

TEST(ParserErrors, StatementErrors) {
  check({"inner reduction over nothing", "z[i, j] = x[i, j] + sum(x[i, j])\n", 1, 21, "sum(...) reduces over no index: every index of its argument also appears in the target or in the expression around it; reduce over an index that appears only inside it"});
  check({"nested reduction over nothing", "s = sum(x[i, j] * max(x[i, j]))\n", 1, 19, "max(...) reduces over no index"});
  check({"inner argmax over two indices", "y[i] = 1 + argmax(x[i, j] * x[i, k])\n", 1, 12, "argmax(...) gives a position along one index, but it reduces over 2 ('j', 'k')"});
  check({"assignment to input", "x[i, j] = 0\n", 1, 1, "cannot assign to input 'x': inputs are read-only inside routines (declare it as a param to update it)"});
  check({"assignment to const", "c = 3\n", 1, 1, "cannot assign to const 'c': consts are fixed values"});
  check({"assignment to merge", "y.merge[i] = 1\n", 1, 2, "cannot assign to a merge buffer"});
  check({"merge of const", "y[i] = c.merge\n", 1, 8, "const 'c' has no merge buffer"});
  check({"bad merge", "y[i] = y.mrge[i]\n", 1, 10, "expected 'merge' after '.' (as in y.merge[i]), found 'mrge'"});
  check({"missing operator", "y[i] x[i, 0]\n", 1, 6, "expected '=', '+=', '-=' or '*=' after the target 'y', found 'x'"});
  check({"missing right side", "y[i] =\n", 1, 7, "expected an expression, found end of line"});
  check({"trailing tokens", "y[i] = 1 2\n", 1, 10, "expected end of line, found '2'"});
  check({"dangling operator", "y[i] = 1 +\n", 1, 11, "expected an expression, found end of line"});
  check({"unclosed parenthesis", "y[i] = exp(v[i]\ny[i] = 1\n", 1, 11, "this '(' is not closed; add ')' (a statement goes on to the next line only inside brackets)"});
  check({"unclosed bracket at end", "y[i] = v[i", 1, 9, "this '[' is not closed; add ']'"});
  check({"stray brace", "}\n", 1, 1, "'}' without a routine block to close; remove it"});
  check({"statement starts oddly", "3 = y\n", 1, 1, "expected a declaration, a statement or a routine block, found '3'"});
  check({"too deep", (std::string("y[i] = ") + std::string(300, '(') + "1" + std::string(300, ')') + "\n").c_str(), 1, 264,
         "expression nested too deeply (more than 256 levels); simplify it"});
  check({"too long a chain", (std::string("y[i] = 1") + [] { std::string s; for (int n = 0; n < 300; ++n) s += " + 1"; return s; }() + "\n").c_str(),
         1, 10 + 4 * 255, "expression is too deep (more than 256 levels of operations); split it into several statements"});
}

TEST(ParserErrors, TooManyIndices) {
  // A balanced product of 300 reads v[aN], each with its own index.
  std::vector<std::string> terms;
  for (int n = 0; n < 300; ++n) terms.push_back("v[a" + std::to_string(n) + "]");
  while (terms.size() > 1) {
    std::vector<std::string> next;
    for (size_t t = 0; t + 1 < terms.size(); t += 2) next.push_back("(" + terms[t] + " * " + terms[t + 1] + ")");
    if (terms.size() % 2) next.push_back(terms.back());
    terms = next;
  }
  std::string line = "s = sum(" + terms[0] + ")";
  int column = static_cast<int>(line.find("a256]")) + 1;
  check({"too many indices", (line + "\n").c_str(), 1, column, "a statement with more than 256 indices is not supported"});
}

TEST(ParserErrors, RoutineErrors) {
  check({"unterminated routine", "routine r {\n  y[i] = 1\n", 1, 1, "routine 'r' is not closed: add '}' on a line after its last statement"});
  check({"routine inside routine", "routine r {\n  y[i] = 1\nroutine q {\n}\n", 3, 1, "a routine starts inside routine 'r': close 'r' with '}' first"});
  check({"declaration inside routine", "routine r {\n  input q : f32\n}\n", 2, 3, "declarations go outside routine blocks"});
  check({"duplicate routine", "routine r {\n}\nroutine r {\n}\n", 3, 9, "routine 'r' is already defined on line 8; routine names are unique"});
  check({"main twice", "y[i] = 1\nroutine main {\n}\n", 2, 9, "routine 'main' conflicts with the top-level statements, which form routine main"});
  check({"missing brace", "routine r\n", 1, 10, "expected '{' after the routine name, found end of line"});
  check({"text after brace", "routine r {\n} y\n", 2, 3, "expected end of line, found 'y'"});
}

TEST(ParserErrors, EveryErrorOfAFileIsReported) {
  std::string text =
      "input  x : f32[4, 5]\n"      // 1
      "input  bad : f17[3]\n"       // 2: unknown type
      "output y : f32[4]\n"         // 3
      "output y : f32[4]\n"         // 4: duplicate
      "y[i] = x[i, j]\n"            // 5: j not on the left
      "y[i] = x[i, 0] $ 1\n"        // 6: unknown character
      "y[i] = sum(x[i, j] * w[j])\n"  // 7: unknown tensor
      "\n"
      "routine step {\n"            // 9
      "  y[i] = exp(x[i, 0], 1)\n"  // 10: argument count
      "  x[i, j] = 1\n"             // 11: input
      "  y[i] = sum(x[i, j + 1])\n" // 12: bound missing
      "}\n"
      "y[i] = (x[i, 0]\n"           // 14: unclosed '('
      "y[i] = 1.5.2\n";             // 15: malformed number (reported although 14 swallowed it)
  std::vector<std::string> e = errors(text);
  std::vector<std::string> expected_prefixes = {
      "2:14: unknown type 'f17'",
      "4:8: 'y' is already declared on line 3",
      "5:13: index 'j' is not on the left side",
      "6:16: unexpected character '$'",
      "7:22: unknown tensor 'w'",
      "10:10: exp takes 1 argument, but 2 are given",
      "11:3: cannot assign to input 'x'",
      "12:19: the range of index 'j' is unknown",
      "14:8: this '(' is not closed",
      "15:8: malformed number '1.5.2'",
  };
  ASSERT_EQ(e.size(), expected_prefixes.size()) << joined(e);
  for (size_t n = 0; n < e.size(); ++n) {
    EXPECT_EQ(e[n].rfind(expected_prefixes[n], 0), 0u) << e[n];
  }
}

TEST(ParserErrors, ErrorsInsideRoutineBlocksDoNotEndTheBlock) {
  std::vector<std::string> e = errors(
      "output y : f32[4]\n"
      "routine r {\n"
      "  y[i] = $\n"
      "  y[i] = 1 +\n"
      "  y[i] = 2\n"
      "}\n"
      "y[i] = 3\n");
  EXPECT_EQ(joined(e),
            "3:10: unexpected character '$'; remove it\n"
            "4:13: expected an expression, found end of line (a statement goes on to the next line "
            "only inside brackets)\n");
}

TEST(ParserErrors, StopsAfterTooManyErrors) {
  std::string text;
  for (int n = 0; n < 1000; ++n) text += "y = $\n";
  ParseResult r = parse(text, "many.kiln");
  ASSERT_EQ(r.diagnostics.size(), kMaxDiagnostics + 1);
  EXPECT_EQ(r.diagnostics.back().message, "too many errors; stopped after 100");
}

}  // namespace
}  // namespace kiln::lang
