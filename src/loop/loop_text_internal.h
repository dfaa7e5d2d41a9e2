// Shared by the loop IR's text printer (loop_print.cc) and parser (loop_parse.cc): the op names
// and type names of the text form, which are fixed by the format (kiln/loop/loop.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/loop/loop.h"

namespace kiln::ir::loop_text {

// ---------------------------------------------------------------------------------------------
// Names.

struct OpText {
  Op op;
  std::string_view name;
  int arity;
};

// The loop text's own names (independent of the language's op_name, so the format is fixed).
constexpr OpText kOpTexts[] = {
    {Op::kNeg, "neg", 1},         {Op::kExp, "exp", 1},         {Op::kLog, "log", 1},
    {Op::kSqrt, "sqrt", 1},       {Op::kRsqrt, "rsqrt", 1},     {Op::kTanh, "tanh", 1},
    {Op::kSigmoid, "sigmoid", 1}, {Op::kRelu, "relu", 1},       {Op::kAbs, "abs", 1},
    {Op::kSin, "sin", 1},         {Op::kCos, "cos", 1},         {Op::kFloor, "floor", 1},
    {Op::kCeil, "ceil", 1},       {Op::kCastF32, "f32", 1},     {Op::kCastF64, "f64", 1},
    {Op::kCastI32, "i32", 1},     {Op::kAdd, "+", 2},           {Op::kSub, "-", 2},
    {Op::kMul, "*", 2},           {Op::kDiv, "/", 2},           {Op::kLt, "<", 2},
    {Op::kLe, "<=", 2},           {Op::kGt, ">", 2},            {Op::kGe, ">=", 2},
    {Op::kEq, "==", 2},           {Op::kNe, "!=", 2},           {Op::kMax, "max", 2},
    {Op::kMin, "min", 2},         {Op::kPow, "pow", 2},         {Op::kSelect, "select", 3},
    {Op::kFma, "fma", 3},         {Op::kErf, "erf", 1},
};

inline const OpText* find_op(Op op) {
  for (const OpText& t : kOpTexts) {
    if (t.op == op) return &t;
  }
  return nullptr;
}

inline const OpText* find_op(std::string_view name) {
  for (const OpText& t : kOpTexts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

inline std::string_view type_text(DType type) {
  switch (type) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

inline std::optional<DType> parse_type(std::string_view text) {
  if (text == "f32") return DType::kF32;
  if (text == "f64") return DType::kF64;
  if (text == "i32") return DType::kI32;
  if (text == "i64") return DType::kI64;
  return std::nullopt;
}

inline bool is_cast(Op op) { return op == Op::kCastF32 || op == Op::kCastF64 || op == Op::kCastI32; }

inline DType cast_type(Op op) {
  return op == Op::kCastF32 ? DType::kF32 : op == Op::kCastF64 ? DType::kF64 : DType::kI32;
}

inline bool is_comparison(Op op) {
  return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe || op == Op::kEq ||
         op == Op::kNe;
}

// Text helpers both directions need.
inline std::optional<int64_t> exact_integer(double value) {
  if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0)) return std::nullopt;
  if (std::trunc(value) != value) return std::nullopt;
  return static_cast<int64_t>(value);
}

inline void append_escaped(std::string& out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
}

}  // namespace kiln::ir::loop_text
