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
    // language version 3
    {Op::kCastBool, "bool", 1},   {Op::kCastI8, "i8", 1},       {Op::kCastU8, "u8", 1},
    {Op::kCastI16, "i16", 1},     {Op::kCastU16, "u16", 1},     {Op::kCastU32, "u32", 1},
    {Op::kCastI64, "i64", 1},     {Op::kCastU64, "u64", 1},     {Op::kCastF16, "f16", 1},
    {Op::kCastBF16, "bf16", 1},   {Op::kBitNot, "~", 1},        {Op::kBitAnd, "&", 2},
    {Op::kBitOr, "|", 2},         {Op::kBitXor, "^", 2},        {Op::kShl, "<<", 2},
    {Op::kShr, ">>", 2},
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

// The type names are the language's (dtype_name).
inline std::string_view type_text(DType type) { return dtype_name(type); }

inline std::optional<DType> parse_type(std::string_view text) { return dtype_from_name(text); }

inline bool is_cast(Op op) { return cast_target(op).has_value(); }

inline DType cast_type(Op op) { return cast_target(op).value_or(DType::kF32); }

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
