// The texts of the prelude's helper functions (prelude.cc prints those a file uses), in C syntax
// with $tokens for the dialect's spellings. Internal to codegen.
#pragma once

#include <span>

namespace kiln::codegen::internal {

// One helper, or one per type of `types` (a typed helper: `name`, `deps` and `text` then hold
// `$t`, the type's name, and the type's own tokens, see prelude.cc's substitute()).
struct HelperText {
  const char* name;
  const char* types;  // space-separated dtype names; "" for an untyped helper
  const char* deps;   // space-separated helper names
  const char* text;
};

// Each list is in dependency order; prelude.cc prints them in this order: halves, floats,
// integers (whose conversions from floats select with the float helpers' kiln_pick_f32/f64).
// f16 and bf16 to and from float and double (prelude_halves.cc).
std::span<const HelperText> half_helpers();
// Integer arithmetic, shifts and conversions from floats, per integer type (prelude_integers.cc).
std::span<const HelperText> integer_helpers();
// Float selection, max / min / relu, kiln's own exp / log / tanh / erf, 32-byte vectors
// (prelude.cc).
std::span<const HelperText> float_helpers();

}  // namespace kiln::codegen::internal
