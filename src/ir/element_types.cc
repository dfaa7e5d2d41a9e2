// The element types of the IR (language version 3): names, sizes, kinds, promotion and the
// types reductions accumulate in (kiln/ir/program.h). Their values' semantics are
// kiln/loop/op_eval.h's.
#include <cmath>
#include <optional>
#include <string_view>

#include "kiln/ir/program.h"

namespace kiln::ir {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
};

// In the order of kAllDTypes.
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "bool", 1}, {DType::kI8, "i8", 8},    {DType::kU8, "u8", 8},
    {DType::kI16, "i16", 16},  {DType::kU16, "u16", 16}, {DType::kI32, "i32", 32},
    {DType::kU32, "u32", 32},  {DType::kI64, "i64", 64}, {DType::kU64, "u64", 64},
    {DType::kF16, "f16", 16},  {DType::kBF16, "bf16", 16}, {DType::kF32, "f32", 32},
    {DType::kF64, "f64", 64},
};

const DTypeInfo* info(DType type) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.type == type) return &i;
  }
  return nullptr;
}

}  // namespace

std::string_view dtype_name(DType type) {
  const DTypeInfo* i = info(type);
  return i ? i->name : "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

std::string_view dtype_list() { return "bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64"; }

int dtype_bits(DType type) {
  const DTypeInfo* i = info(type);
  return i ? i->bits : 0;
}

size_t dtype_size(DType type) {
  const int bits = dtype_bits(type);
  return bits == 1 ? 1 : static_cast<size_t>(bits / 8);
}

bool is_float_type(DType type) {
  return type == DType::kF16 || type == DType::kBF16 || type == DType::kF32 || type == DType::kF64;
}
bool is_narrow_float(DType type) { return type == DType::kF16 || type == DType::kBF16; }
bool is_unsigned_type(DType type) {
  return type == DType::kU8 || type == DType::kU16 || type == DType::kU32 || type == DType::kU64;
}
bool is_integer_type(DType type) { return !is_float_type(type) && type != DType::kBool; }

namespace {

DType signed_of_bits(int bits) {
  return bits <= 8 ? DType::kI8 : bits <= 16 ? DType::kI16 : bits <= 32 ? DType::kI32 : DType::kI64;
}

}  // namespace

std::optional<DType> promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  const bool fa = is_float_type(a), fb = is_float_type(b);
  if (fa != fb) return fa ? a : b;  // an integer with a float gives the float
  if (fa) {
    if (is_narrow_float(a) && is_narrow_float(b)) return DType::kF32;  // f16 with bf16
    return dtype_bits(a) >= dtype_bits(b) ? a : b;
  }
  if (is_unsigned_type(a) == is_unsigned_type(b)) return dtype_bits(a) >= dtype_bits(b) ? a : b;
  if (a == DType::kU64 || b == DType::kU64) return std::nullopt;
  if (dtype_bits(a) != dtype_bits(b)) return dtype_bits(a) > dtype_bits(b) ? a : b;
  return signed_of_bits(dtype_bits(a) * 2);
}

DType promote(DType a, DType b) {
  if (std::optional<DType> t = promote_types(a, b)) return *t;
  return DType::kU64;
}

bool integer_value_fits(DType type, double value) {
  if (value != std::trunc(value)) return false;
  if (type == DType::kBool) return value == 0 || value == 1;
  const int bits = dtype_bits(type);
  if (is_unsigned_type(type)) return value >= 0 && value < std::ldexp(1.0, bits);
  return value >= -std::ldexp(1.0, bits - 1) && value < std::ldexp(1.0, bits - 1);
}

DType accumulation_type(Reduce reduce, DType arg) {
  const bool sums = reduce == Reduce::kSum || reduce == Reduce::kProd;
  if (!sums && reduce != Reduce::kMean) return arg;
  if (is_narrow_float(arg)) return DType::kF32;
  if (is_float_type(arg)) return arg;
  if (reduce == Reduce::kMean) return DType::kF64;
  return is_unsigned_type(arg) ? DType::kU64 : DType::kI64;
}

}  // namespace kiln::ir
