// Expression text for the C-syntax emitter: precedence, integer ranges and literals (c_code.h).
#include "codegen/c_code.h"

#include <charconv>
#include <cmath>

#include "kiln/loop/op_eval.h"

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
  if (type == DType::kI64 || type == DType::kU64 || ir::is_float_type(type)) return {};
  if (type == DType::kBool) return {0, 1};
  const int bits = ir::dtype_bits(type);
  if (ir::is_unsigned_type(type)) return {0, (int64_t{1} << bits) - 1};
  return {-(int64_t{1} << (bits - 1)), (int64_t{1} << (bits - 1)) - 1};
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
  if ((type == DType::kI32 || type == DType::kI64) && value == type_range(type).lo) {
    code = {d.int_limit(type, false), kPrecPrimary};  // -2147483648 would be a long
  } else if ((type == DType::kI32 || type == DType::kI64) && value == type_range(type).hi) {
    code = {d.int_limit(type, true), kPrecPrimary};
  } else if (type == DType::kU64) {
    code = {std::to_string(static_cast<uint64_t>(value)) + std::string(d.literal_suffix(type)), kPrecPrimary};
  } else {
    code = with_sign(std::to_string(value) + std::string(d.literal_suffix(type)));
  }
  code.range = {value, value};
  code.narrow = type == DType::kI64 && fits(value, value, DType::kI32);
  return code;
}

Code literal(double value, DType type, const DialectSyntax& d) {
  const ir::Scalar v = ir::const_scalar(type, value);
  if (ir::is_narrow_float(type)) return float_literal(v.f, DType::kF32, d);  // exact in f32
  if (is_float(type)) return float_literal(value, type, d);
  return int_constant(v.i, type, d);
}

}  // namespace kiln::codegen::internal
