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
  kPrecBitOr = 6,     // |
  kPrecBitXor = 7,    // ^
  kPrecBitAnd = 8,    // &
  kPrecEquality = 9,  // == !=
  kPrecRelational = 10,
  kPrecShift = 11,    // << >>
  kPrecAdditive = 12,
  kPrecMultiplicative = 13,
  kPrecUnary = 14,  // -x, (T)x
  kPrecPrimary = 16,
};

// Where an integer value can lie (inclusive), as its 64 bits read as an int64: a u64 value
// above INT64_MAX is negative here (u64 + - * and conversions between u64 and i64 act on those
// bits as on i64's). Plain C arithmetic is printed where the exact result provably stays in its
// type; elsewhere the wrapping helpers.
struct Range {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
};

// Every value of the type (bool: 0 and 1; i64 and u64: any int64).
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
// An integer of `type` (a u64 as its bits), with the dialect's suffix where C's default type of
// the literal is not the type's (u32, u64).
Code int_constant(int64_t value, ir::DType type, const DialectSyntax& d);
// A constant of `type` holding `value` as the loop IR evaluates it (op_eval's const_scalar: f16
// and bf16 rounded, printed as f32; integers saturated).
Code literal(double value, ir::DType type, const DialectSyntax& d);

}  // namespace kiln::codegen::internal
