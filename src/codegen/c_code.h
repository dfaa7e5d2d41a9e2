// Pieces of C source as the emitter builds them: an expression's text with its C precedence and,
// for integers, the range its value can lie in, and the literals and small type tables the
// kernel emitter (kernel_emitter.h) prints with. Internal to codegen.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "codegen/dialect.h"
#include "kiln/loop/loop.h"
#include "kiln/ir/program.h"

namespace kiln::codegen::internal {

// ---- Small local tables (type names are ir::dtype_name) --------------------------------------

inline int64_t type_size(ir::DType type) { return static_cast<int64_t>(ir::dtype_size(type)); }
inline bool is_float(ir::DType type) { return ir::is_float_type(type); }
// Text that is safe inside /* ... */: no comment delimiters, trigraphs or line breaks.
std::string comment_safe(std::string_view text);

// ---- Expressions as text with their C precedence and, for integers, their range --------------

enum Precedence : int {
  kPrecCond = 3,      // c ? a : b
  kPrecEquality = 9,  // == !=
  kPrecRelational = 10,
  kPrecAdditive = 12,
  kPrecMultiplicative = 13,
  kPrecUnary = 14,  // -x, (T)x
  kPrecPrimary = 16,
};

// Where an integer value can lie (inclusive). Plain C arithmetic is printed where the exact
// result provably stays in its type; elsewhere the wrapping helpers.
struct Range {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
};

Range type_range(ir::DType type);

using Wide = __int128;

bool fits(Wide lo, Wide hi, ir::DType type);

struct Code {
  Code() = default;
  Code(std::string t, int p) : text(std::move(t)), prec(p) {}

  std::string text;
  int prec = kPrecPrimary;
  Range range;          // integer values only
  bool narrow = false;  // an i64 value whose C expression has type int (a small literal)
};

// `code` as an operand that needs at least precedence `min`.
std::string operand(const Code& code, int min);
Code infix(const Code& a, std::string_view op, const Code& b, int prec);
Code call(std::string_view fn, std::initializer_list<Code> args);
Code negate(const Code& x);
Code with_sign(std::string text);
Code float_literal(double value, ir::DType type, const DialectSyntax& d);
Code int_constant(int64_t value, ir::DType type, const DialectSyntax& d);
Code literal(double value, ir::DType type, const DialectSyntax& d);

}  // namespace kiln::codegen::internal
