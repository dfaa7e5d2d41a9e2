// check_declaration (kiln/ir/statement.h): the rules of one tensor declaration.
#include <cmath>
#include <cstdint>
#include <string>

#include "kiln/ir/printer.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

namespace {

std::string number_text(double v) { return format_number(v, false); }

// "0 to 255", "-128 to 127": the values of an integer type.
std::string integer_range(DType type) {
  const int bits = dtype_bits(type);
  if (is_unsigned_type(type)) {
    return "0 to " + std::to_string(bits == 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1);
  }
  const int64_t max = bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
  return std::to_string(-max - 1) + " to " + std::to_string(max);
}

// Whether a finite value rounds to infinity in the float type (round to nearest even): from
// (2 - 2^-p) * 2^emax on, for p significand bits and largest exponent emax.
bool rounds_to_infinity(DType type, double value) {
  double limit;
  switch (type) {
    case DType::kF16: limit = std::ldexp(2 - std::ldexp(1.0, -11), 15); break;
    case DType::kBF16: limit = std::ldexp(2 - std::ldexp(1.0, -8), 127); break;
    case DType::kF32: limit = std::ldexp(2 - std::ldexp(1.0, -24), 127); break;
    default: return false;
  }
  return std::isfinite(value) && std::fabs(value) >= limit;
}

}  // namespace

void check_declaration(const TensorNode& node, std::vector<Diagnostic>* diagnostics,
                       std::optional<SourceLoc> init_loc) {
  auto error = [&](SourceLoc loc, std::string message) {
    diagnostics->push_back(Diagnostic{loc, std::move(message)});
  };
  const SourceLoc at = node.loc;
  const SourceLoc init_at = init_loc.value_or(node.loc);
  const std::string name = "'" + node.name + "'";
  if (is_keyword(node.name)) {
    error(at, name + " is a keyword and cannot be used as a name");
  } else if (!is_identifier(node.name)) {
    error(at, name + " is not a valid name: use letters, digits and '_', not starting with a digit");
  }
  for (int64_t d : node.dims) {
    if (d <= 0) {
      error(at, "dimension sizes must be positive integers, but " + name + " has a dimension of " +
                    std::to_string(d));
    }
  }
  // Bytes, not elements: 2^62 f32 elements pass an element limit but their 2^64 bytes wrap to 0.
  if (node.byte_size() >= kMaxTensorBytes) {
    error(at, name + " is too large: it needs 2^62 or more bytes (" +
                  std::string(dtype_name(node.dtype)) + " elements are " +
                  std::to_string(dtype_size(node.dtype)) + " bytes each)");
  }
  const Init& init = node.init;
  const bool has_init = init.kind != Init::Kind::kNone;
  const std::string role(role_name(node.role));
  if (node.role == Role::kInput && has_init) {
    error(init_at, "input " + name +
                       " cannot have an initializer: inputs are supplied by the host (declare it "
                       "as a param to give it an initial value)");
  } else if (node.role == Role::kOutput && has_init) {
    error(init_at, "output " + name +
                       " cannot have an initializer: outputs are computed by routines (declare it "
                       "as a param to give it an initial value)");
  } else if (node.role == Role::kConst && init.kind == Init::Kind::kNone) {
    error(at, "const " + name + " needs a value, like `const " + node.name + " : " +
                  std::string(dtype_name(node.dtype)) + " = 1`");
  } else if (node.role == Role::kConst && init.kind != Init::Kind::kValue) {
    error(init_at, "const " + name + " must be initialized with a number, not a random initializer "
                   "(declare it as a param or tensor for random values)");
  }
  if (!has_init) return;
  // A value may be inf, -inf or nan (not for integers, below); a random initializer's numbers are finite.
  if (init.kind != Init::Kind::kValue && (!std::isfinite(init.a) || !std::isfinite(init.b))) {
    error(init_at, "the initializer of " + name + " must be finite");
    return;
  }
  const std::string type(dtype_name(node.dtype));
  const bool integral = !is_float_type(node.dtype);  // integers and bool
  if (init.kind == Init::Kind::kValue && integral && !integer_value_fits(node.dtype, init.a)) {
    error(init_at, type + " " + name + " cannot be initialized with " + number_text(init.a) +
                       (node.dtype == DType::kBool ? "; use true, false, 1 or 0"
                                                   : "; use an integer in the " + type + " range (" +
                                                         integer_range(node.dtype) + ")"));
  }
  if (init.kind == Init::Kind::kValue && rounds_to_infinity(node.dtype, init.a)) {
    error(init_at, type + " " + name + " cannot be initialized with " + number_text(init.a) +
                       ": it is beyond the " + type + " range and would be infinite (write inf if that is meant)");
  }
  // Version 1 draws i32 values (rounded down); the other integer types and bool have no random
  // initializer (a draw of bools or of bytes would need a meaning of its own).
  if ((init.kind == Init::Kind::kUniform || init.kind == Init::Kind::kNormal) && integral &&
      node.dtype != DType::kI32) {
    error(init_at, std::string(init.kind == Init::Kind::kUniform ? "uniform" : "normal") +
                       "(...) cannot initialize " + type + " " + name +
                       ": random initializers are for float types and i32 (draw into a float tensor and convert "
                       "it with " + type + "(...) in a routine)");
  }
  if (init.kind == Init::Kind::kUniform && !(init.a <= init.b)) {
    error(init_at, "uniform(LO, HI) needs LO <= HI, but " + number_text(init.a) + " > " +
                       number_text(init.b));
  }
  if (init.kind == Init::Kind::kNormal && !(init.b >= 0)) {
    error(init_at, "normal(MEAN, STD) needs STD >= 0, but STD is " + number_text(init.b));
  }
}

}  // namespace kiln::ir
