// check_declaration (kiln/ir/statement.h): the rules of one tensor declaration.
#include <cmath>
#include <string>

#include "kiln/ir/printer.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

namespace {
std::string number_text(double v) { return format_number(v, false); }
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
  if (node.dtype == DType::kI64) error(at, "i64 is internal; declare f32, f64 or i32");
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
  // A value may be inf, -inf or nan (not for i32, below); a random initializer's numbers are finite.
  if (init.kind != Init::Kind::kValue && (!std::isfinite(init.a) || !std::isfinite(init.b))) {
    error(init_at, "the initializer of " + name + " must be finite");
    return;
  }
  if (init.kind == Init::Kind::kValue && node.dtype == DType::kI32 &&
      (init.a != std::trunc(init.a) || init.a < -2147483648.0 || init.a > 2147483647.0)) {
    error(init_at, "i32 " + name + " cannot be initialized with " + number_text(init.a) +
                       "; use an integer in the i32 range");
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
