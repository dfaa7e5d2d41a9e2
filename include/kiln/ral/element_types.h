// The element types of tensors as the RAL passes them: one C++ type per ir::DType, so that a
// registered function's MemRef<T, N> names its element type in the mangled name (mangle.h), and
// the code of each type (docs/ral.md, "Names").
//
// f16 and bf16 have no standard C++ type (C++23's std::float16_t is not in C++20, and GCC's
// _Float16 is not everywhere): Half and BFloat16 hold their 16 bits. They are storage: a function
// computes with their values in f32 (kiln/loop/op_eval.h converts, rounding to nearest even).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "kiln/ir/program.h"

namespace kiln::ral {

// An IEEE binary16 element, as its bits.
struct Half {
  uint16_t bits = 0;
  friend bool operator==(Half, Half) = default;
};
// A bfloat16 element (the top 16 bits of an f32), as its bits.
struct BFloat16 {
  uint16_t bits = 0;
  friend bool operator==(BFloat16, BFloat16) = default;
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<Half>);

// The C++ element type of each DType: bool, int8_t ... uint64_t, Half, BFloat16, float, double.
template <ir::DType D>
struct ElementOf;
template <> struct ElementOf<ir::DType::kBool> { using type = bool; };
template <> struct ElementOf<ir::DType::kI8> { using type = int8_t; };
template <> struct ElementOf<ir::DType::kU8> { using type = uint8_t; };
template <> struct ElementOf<ir::DType::kI16> { using type = int16_t; };
template <> struct ElementOf<ir::DType::kU16> { using type = uint16_t; };
template <> struct ElementOf<ir::DType::kI32> { using type = int32_t; };
template <> struct ElementOf<ir::DType::kU32> { using type = uint32_t; };
template <> struct ElementOf<ir::DType::kI64> { using type = int64_t; };
template <> struct ElementOf<ir::DType::kU64> { using type = uint64_t; };
template <> struct ElementOf<ir::DType::kF16> { using type = Half; };
template <> struct ElementOf<ir::DType::kBF16> { using type = BFloat16; };
template <> struct ElementOf<ir::DType::kF32> { using type = float; };
template <> struct ElementOf<ir::DType::kF64> { using type = double; };
template <ir::DType D>
using Element = typename ElementOf<D>::type;

// The DType whose elements are a T (any integer of a width and signedness: long and long long
// both read i64), or nullopt (std::byte, a struct: raw bytes).
template <typename T>
constexpr std::optional<ir::DType> dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return ir::DType::kBool;
  else if constexpr (std::is_same_v<U, Half>) return ir::DType::kF16;
  else if constexpr (std::is_same_v<U, BFloat16>) return ir::DType::kBF16;
  else if constexpr (std::is_same_v<U, float>) return ir::DType::kF32;
  else if constexpr (std::is_same_v<U, double>) return ir::DType::kF64;
  else if constexpr (std::is_integral_v<U> && !std::is_same_v<U, char>) {
    constexpr bool s = std::is_signed_v<U>;
    if constexpr (sizeof(U) == 1) return s ? ir::DType::kI8 : ir::DType::kU8;
    else if constexpr (sizeof(U) == 2) return s ? ir::DType::kI16 : ir::DType::kU16;
    else if constexpr (sizeof(U) == 4) return s ? ir::DType::kI32 : ir::DType::kU32;
    else if constexpr (sizeof(U) == 8) return s ? ir::DType::kI64 : ir::DType::kU64;
    else return std::nullopt;
  } else {
    return std::nullopt;
  }
}

// The RAL code of a type's elements, as in a memref's code `mNdT`: i1 (bool), i8 ui8 i16 ui16
// i32 ui32 i64 ui64, f16 bf16 f32 f64 (BladeDISC's codes; bf16 is kiln's).
constexpr std::string_view dtype_code(ir::DType type) {
  switch (type) {
    case ir::DType::kBool: return "i1";
    case ir::DType::kI8: return "i8";
    case ir::DType::kU8: return "ui8";
    case ir::DType::kI16: return "i16";
    case ir::DType::kU16: return "ui16";
    case ir::DType::kI32: return "i32";
    case ir::DType::kU32: return "ui32";
    case ir::DType::kI64: return "i64";
    case ir::DType::kU64: return "ui64";
    case ir::DType::kF16: return "f16";
    case ir::DType::kBF16: return "bf16";
    case ir::DType::kF32: return "f32";
    case ir::DType::kF64: return "f64";
  }
  return "?";
}

// The type of a code dtype_code() gives, or nullopt.
constexpr std::optional<ir::DType> dtype_from_code(std::string_view code) {
  for (ir::DType type : ir::kAllDTypes) {
    if (dtype_code(type) == code) return type;
  }
  return std::nullopt;
}

}  // namespace kiln::ral
