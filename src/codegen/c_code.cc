// Expression text for the C-syntax emitter: precedence, integer ranges and literals (c_code.h).
#include "codegen/c_code.h"

#include <charconv>
#include <cmath>

namespace kiln::codegen::internal {

using ir::DType;
using ir::Op;

std::string comment_safe(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if ((c == '*' && next == '/') || (c == '/' && next == '*') || (c == '?' && next == '?')) {
      out += c;
      out += ' ';
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

Range type_range(DType type) {
  if (type == DType::kI32) {
    return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
  return {};
}

bool fits(Wide lo, Wide hi, DType type) {
  Range r = type_range(type);
  return lo >= r.lo && hi <= r.hi;
}

std::string operand(const Code& code, int min) {
  return code.prec >= min ? code.text : "(" + code.text + ")";
}

Code infix(const Code& a, std::string_view op, const Code& b, int prec) {
  // Left-associative: the right operand needs parentheses at equal precedence.
  return {operand(a, prec) + " " + std::string(op) + " " + operand(b, prec + 1), prec};
}

Code call(std::string_view fn, std::initializer_list<Code> args) {
  std::string text(fn);
  text += '(';
  bool first = true;
  for (const Code& a : args) {
    if (!first) text += ", ";
    first = false;
    text += a.text;
  }
  text += ')';
  return {text, kPrecPrimary};
}

Code negate(const Code& x) {
  std::string inner = operand(x, kPrecUnary);
  if (!inner.empty() && inner[0] == '-') inner = "(" + x.text + ")";  // never "--x"
  return {"-" + inner, kPrecUnary};
}

Code with_sign(std::string text) {
  int prec = !text.empty() && text[0] == '-' ? kPrecUnary : kPrecPrimary;
  if (text.starts_with("(")) prec = kPrecUnary;  // "(double)INFINITY" is a cast
  return {std::move(text), prec};
}

namespace {

// The shortest decimal that reads back as exactly `value` (std::to_chars round-trips).
template <typename T>
std::string shortest_decimal(T value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

Code float_literal(double value, DType type, const DialectSyntax& d) {
  if (std::isnan(value)) return with_sign(d.nan(type));
  if (type == DType::kF32) {
    // The f32 value of the constant: values from FLT_MAX + half an ulp up round to infinity.
    constexpr double kOverflow = 0x1.ffffffp127;
    if (std::isinf(value) || std::fabs(value) >= kOverflow) {
      return with_sign(d.infinity(type, value < 0));
    }
    return with_sign(shortest_decimal(static_cast<float>(value)) + "f");
  }
  if (std::isinf(value)) return with_sign(d.infinity(type, value < 0));
  return with_sign(shortest_decimal(value));
}

Code int_constant(int64_t value, DType type, const DialectSyntax& d) {
  Code code;
  const Range limits = type_range(type);
  if (value == limits.lo) {
    code = {d.int_limit(type, false), kPrecPrimary};
  } else if (value == limits.hi) {
    code = {d.int_limit(type, true), kPrecPrimary};
  } else {
    code = with_sign(std::to_string(value));
  }
  code.range = {value, value};
  code.narrow = type == DType::kI64 && fits(value, value, DType::kI32);
  return code;
}

Code literal(double value, DType type, const DialectSyntax& d) {
  if (is_float(type)) return float_literal(value, type, d);
  // The cast semantics: truncate toward zero, saturate, NaN -> 0.
  const Range limits = type_range(type);
  int64_t v = 0;
  if (std::isnan(value)) {
    v = 0;
  } else if (value >= static_cast<double>(limits.hi)) {  // 2^63 for i64: saturates
    v = limits.hi;
  } else if (value <= static_cast<double>(limits.lo)) {
    v = limits.lo;
  } else {
    v = static_cast<int64_t>(value);
  }
  return int_constant(v, type, d);
}

}  // namespace kiln::codegen::internal
