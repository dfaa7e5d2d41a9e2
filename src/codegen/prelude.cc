// The helper functions of generated code: the parts of the loop IR's semantics (ir/loop.h) that
// plain C operators do not give, written once in C syntax with the dialect's spellings. This file
// holds the set of helpers a file uses and the float helpers; prelude_halves.cc and
// prelude_integers.cc hold the others (prelude_texts.h).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "codegen/dialect.h"
#include "codegen/prelude_texts.h"

namespace kiln::codegen::internal {

namespace {

using ir::DType;

// In dependency order. `$Q` is the helper qualifier, `$f32` etc. type names (`$u16` / `$u32` /
// `$u64` the unsigned ones), `$I32MIN` etc. limits, `$expf` / `$exp` / `$sqrtf` / `$sqrt` math
// builtins, `$INF32` / `$NINF32` / `$NAN32` special floats.
const HelperText kFloatHelpers[] = {
    // 32-byte vectors of small inner loops (kernel_vectors.cc), loaded and stored through
    // memcpy: any alignment, no aliasing assumption.
    {"kiln_vf32", "", "", "typedef $f32 kiln_vf32 __attribute__((vector_size(32)));\n"},
    {"kiln_vld_f32", "", "kiln_vf32",
     "$Q kiln_vf32 kiln_vld_f32(const $f32* p) { kiln_vf32 v; __builtin_memcpy(&v, p, sizeof v); return v; }\n"},
    {"kiln_vst_f32", "", "kiln_vf32",
     "$Q void kiln_vst_f32($f32* p, kiln_vf32 v) { __builtin_memcpy(p, &v, sizeof v); }\n"},
    {"kiln_vf64", "", "", "typedef $f64 kiln_vf64 __attribute__((vector_size(32)));\n"},
    {"kiln_vld_f64", "", "kiln_vf64",
     "$Q kiln_vf64 kiln_vld_f64(const $f64* p) { kiln_vf64 v; __builtin_memcpy(&v, p, sizeof v); return v; }\n"},
    {"kiln_vst_f64", "", "kiln_vf64",
     "$Q void kiln_vst_f64($f64* p, kiln_vf64 v) { __builtin_memcpy(p, &v, sizeof v); }\n"},
    // b where `pick` is non-zero, else a: bits selected by a mask instead of a jump, so that a
    // loop of max / min / relu vectorizes (GCC needs if-conversion for `?:` on floats, which
    // the cpu driver turns off; see cpu_compiler.cc).
    {"kiln_pick_f32", "", "",
     "$Q $f32 kiln_pick_f32(int pick, $f32 a, $f32 b) {\n"
     "  union { $f32 f; $u32 u; } x, y;\n"
     "  x.f = a;\n"
     "  y.f = b;\n"
     "  const $u32 m = ($u32)0 - ($u32)(pick != 0);\n"
     "  x.u = (x.u & ~m) | (y.u & m);\n"
     "  return x.f;\n"
     "}\n"},
    {"kiln_pick_f64", "", "",
     "$Q $f64 kiln_pick_f64(int pick, $f64 a, $f64 b) {\n"
     "  union { $f64 f; $u64 u; } x, y;\n"
     "  x.f = a;\n"
     "  y.f = b;\n"
     "  const $u64 m = ($u64)0 - ($u64)(pick != 0);\n"
     "  x.u = (x.u & ~m) | (y.u & m);\n"
     "  return x.f;\n"
     "}\n"},
    // max / min: NaN if either operand is NaN (a if both are); otherwise like std::max /
    // std::min (a on a tie).
    {"kiln_max_f32", "", "kiln_pick_f32",
     "$Q $f32 kiln_max_f32($f32 a, $f32 b) { return kiln_pick_f32((a == a) & ((b != b) | (a < b)), a, b); }\n"},
    {"kiln_min_f32", "", "kiln_pick_f32",
     "$Q $f32 kiln_min_f32($f32 a, $f32 b) { return kiln_pick_f32((a == a) & ((b != b) | (b < a)), a, b); }\n"},
    {"kiln_max_f64", "", "kiln_pick_f64",
     "$Q $f64 kiln_max_f64($f64 a, $f64 b) { return kiln_pick_f64((a == a) & ((b != b) | (a < b)), a, b); }\n"},
    {"kiln_min_f64", "", "kiln_pick_f64",
     "$Q $f64 kiln_min_f64($f64 a, $f64 b) { return kiln_pick_f64((a == a) & ((b != b) | (b < a)), a, b); }\n"},
    // relu(x) = max(x, 0): NaN stays NaN, -0 becomes +0.
    {"kiln_relu_f32", "", "kiln_pick_f32",
     "$Q $f32 kiln_relu_f32($f32 x) { return kiln_pick_f32(x <= 0.0f, x, 0.0f); }\n"},
    {"kiln_relu_f64", "", "kiln_pick_f64",
     "$Q $f64 kiln_relu_f64($f64 x) { return kiln_pick_f64(x <= 0.0, x, 0.0); }\n"},
    // exp, log, tanh and erf of f32 for dialects with DialectSyntax::own_math_f32 (C), each within a
    // stated number of ulps of the correctly rounded value (tests/codegen/math_accuracy_test.cc
    // sweeps them against libm; docs/language.md), and exactly libm's value at the special
    // inputs. No jumps and no library calls, so that a loop of them vectorizes.
    //
    // exp(x) = 2^n exp(r) with
    // n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts, so r is exact), exp(r) by its
    // Taylor polynomial of degree 7 on |r| <= ln 2 / 2, and 2^n applied in two halves so that
    // subnormal results and n = 128 come out right. At most 1 ulp. NaN is clamped too (to -104),
    // so that no NaN is converted to an integer (undefined in C), and picked at the end.
    {"kiln_exp_f32", "", "kiln_pick_f32",
     "$Q $f32 kiln_exp_f32($f32 x) {\n"
     "  const $f32 c = kiln_pick_f32(!(x >= -104.0f), kiln_pick_f32(x > 89.0f, x, 89.0f), -104.0f);\n"
     "  const $f32 n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;\n"
     "  const $f32 r = (c - n * 0.693359375f) - n * -2.12194440e-4f;\n"
     "  $f32 p = 1.98412698e-4f;\n"
     "  p = p * r + 1.38888889e-3f;\n"
     "  p = p * r + 8.33333333e-3f;\n"
     "  p = p * r + 4.16666667e-2f;\n"
     "  p = p * r + 1.66666667e-1f;\n"
     "  p = p * r + 0.5f;\n"
     "  p = p * r + 1.0f;\n"
     "  p = p * r + 1.0f;\n"
     "  const $i32 k = ($i32)n, h = k / 2;\n"
     "  union { $u32 u; $f32 f; } s1, s2;\n"
     "  s1.u = ($u32)(h + 127) << 23;\n"
     "  s2.u = ($u32)(k - h + 127) << 23;\n"
     "  const $f32 y = p * s1.f * s2.f;\n"
     "  return kiln_pick_f32(x != x, kiln_pick_f32(x > 88.7228394f,\n"
     "                       kiln_pick_f32(x < -103.972084f, y, 0.0f), $INF32), x);\n"
     "}\n"},
    // log(x) = e ln 2 + log(m) with x = m 2^e, m in [sqrt(1/2), sqrt(2)) (subnormal x scaled by
    // 2^23 first), log(m) = log(1 + f) = 2 atanh(s) with s = f / (2 + f), by its series to s^11
    // (|s| < 0.172). At most 1 ulp.
    {"kiln_log_f32", "", "kiln_pick_f32",
     "$Q $f32 kiln_log_f32($f32 x) {\n"
     "  const $i32 sub = x < 1.17549435e-38f;\n"
     "  union { $f32 f; $u32 u; } b;\n"
     "  b.f = kiln_pick_f32(sub, x, x * 8388608.0f);\n"
     "  $i32 e = ($i32)((b.u >> 23) & 255u) - 127 - 23 * sub;\n"
     "  b.u = (b.u & 0x007fffffu) | 0x3f800000u;\n"
     "  const $i32 high = b.f > 1.41421356f;\n"
     "  e += high;\n"
     "  const $f32 m = kiln_pick_f32(high, b.f, b.f * 0.5f);\n"
     "  const $f32 f = m - 1.0f, s = f / (2.0f + f), z = s * s;\n"
     "  $f32 p = 1.0f / 11.0f;\n"
     "  p = p * z + 1.0f / 9.0f;\n"
     "  p = p * z + 1.0f / 7.0f;\n"
     "  p = p * z + 1.0f / 5.0f;\n"
     "  p = p * z + 1.0f / 3.0f;\n"
     "  const $f32 k = ($f32)e;\n"
     "  const $f32 l = k * 0.693359375f + ((f - s * (f - 2.0f * z * p)) + k * -2.12194440e-4f);\n"
     "  return kiln_pick_f32(x > 0.0f, kiln_pick_f32(x == 0.0f, kiln_pick_f32(x != x, $NAN32, x), $NINF32),\n"
     "                       kiln_pick_f32(x == $INF32, l, x));\n"
     "}\n"},
    // tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)) for |x| >= 0.55, and its odd Taylor polynomial
    // to x^19 below (where the first form would cancel). At most 2 ulp.
    {"kiln_tanh_f32", "", "kiln_pick_f32 kiln_exp_f32",
     "$Q $f32 kiln_tanh_f32($f32 x) {\n"
     "  const $f32 a = $fabsf(x), s = a * a;\n"
     "  $f32 p = -2.391291142e-4f;\n"
     "  p = p * s + 5.900274409e-4f;\n"
     "  p = p * s - 1.455834387e-3f;\n"
     "  p = p * s + 3.592128037e-3f;\n"
     "  p = p * s - 8.863235530e-3f;\n"
     "  p = p * s + 2.186948854e-2f;\n"
     "  p = p * s - 5.396825397e-2f;\n"
     "  p = p * s + 1.333333333e-1f;\n"
     "  p = p * s - 3.333333333e-1f;\n"
     "  const $f32 small = a + a * s * p;\n"
     "  const $f32 big = 1.0f - 2.0f / (kiln_exp_f32(2.0f * a) + 1.0f);\n"
     "  return $copysignf(kiln_pick_f32(a < 0.55f, big, small), x);\n"
     "}\n"},
    // erf(x) = x + x q(x^2) for |x| < 0.9, with q(s) = erf(sqrt s) / sqrt s - 1 by a polynomial of
    // degree 6 (the leading x is exact, so only q's small part rounds); above, erf(x) = sign(x)
    // (1 - exp(g(t))) with g(t) = log(erfc(t)) by a polynomial of degree 7 on t = min(|x|, 4) in
    // [0.9, 4] (erfc(4) < 2^-25, so 4 and beyond round to 1). Both fitted minimax in double and
    // rounded to f32. At most 1 ulp over every f32 (checked exhaustively, with and without fma).
    {"kiln_erf_f32", "", "kiln_pick_f32 kiln_exp_f32",
     "$Q $f32 kiln_erf_f32($f32 x) {\n"
     "  const $f32 a = $fabsf(x), s = x * x, t = kiln_pick_f32(a > 4.0f, a, 4.0f);\n"
     "  $f32 p = 8.538839029e-05f;\n"
     "  p = p * s - 8.181927260e-04f;\n"
     "  p = p * s + 5.204435904e-03f;\n"
     "  p = p * s - 2.686075307e-02f;\n"
     "  p = p * s + 1.128371954e-01f;\n"
     "  p = p * s - 3.761263490e-01f;\n"
     "  p = p * s + 1.283791661e-01f;\n"
     "  $f32 r = -2.090955604e-05f;\n"
     "  r = r * t + 4.323030007e-04f;\n"
     "  r = r * t - 4.160527140e-03f;\n"
     "  r = r * t + 2.509149723e-02f;\n"
     "  r = r * t - 1.082366183e-01f;\n"
     "  r = r * t - 6.333866715e-01f;\n"
     "  r = r * t - 1.129495144e+00f;\n"
     "  r = r * t + 1.705520262e-04f;\n"
     "  const $f32 small = x + x * p, big = 1.0f - kiln_exp_f32(r);\n"
     "  return kiln_pick_f32(a < 0.9f, $copysignf(big, x), small);\n"
     "}\n"},
    // sigmoid(x) = 1 / (1 + exp(-x)); rsqrt(x) = 1 / sqrt(x).
    {"kiln_sigmoid_f32", "", "",
     "$Q $f32 kiln_sigmoid_f32($f32 x) { return 1.0f / (1.0f + $expf(-x)); }\n"},
    {"kiln_sigmoid_f64", "", "",
     "$Q $f64 kiln_sigmoid_f64($f64 x) { return 1.0 / (1.0 + $exp(-x)); }\n"},
    {"kiln_rsqrt_f32", "", "", "$Q $f32 kiln_rsqrt_f32($f32 x) { return 1.0f / $sqrtf(x); }\n"},
    {"kiln_rsqrt_f64", "", "", "$Q $f64 kiln_rsqrt_f64($f64 x) { return 1.0 / $sqrt(x); }\n"},
};

// A float literal of 2^exponent (exact), with `suffix` ("f" for f32).
std::string power_of_two(int exponent, bool negative, std::string_view suffix) {
  char text[64];
  std::snprintf(text, sizeof text, "%s%.1f", negative ? "-" : "", std::ldexp(1.0, exponent));
  return text + std::string(suffix);
}

// The tokens of a typed helper of type `t` (see prelude_integers.cc), or none for "".
std::map<std::string, std::string, std::less<>> type_tokens(std::string_view name, const DialectSyntax& d) {
  std::map<std::string, std::string, std::less<>> tokens;
  if (name.empty()) return tokens;
  const DType t = *ir::dtype_from_name(name);
  tokens["t"] = std::string(name);
  tokens["T"] = std::string(d.type_name(t));
  tokens["U"] = std::string(d.unsigned_name(t));
  const int bits = ir::dtype_bits(t);
  tokens["BITS"] = std::to_string(bits);
  const std::string suffix(d.literal_suffix(t));
  if (!ir::is_integer_type(t)) return tokens;
  const int hi_exponent = ir::is_unsigned_type(t) ? bits : bits - 1;
  if (ir::is_unsigned_type(t)) {
    tokens["MIN"] = "0";
    tokens["MAX"] = (bits == 64 ? std::string("18446744073709551615") : std::to_string((uint64_t{1} << bits) - 1)) + suffix;
    tokens["LO"] = "0.0";
  } else {
    tokens["MIN"] = bits >= 32 ? d.int_limit(t, false) : std::to_string(-(int64_t{1} << (bits - 1)));
    tokens["MAX"] = bits >= 32 ? d.int_limit(t, true) : std::to_string((int64_t{1} << (bits - 1)) - 1);
    tokens["LO"] = power_of_two(bits - 1, true, "");
  }
  tokens["HI"] = power_of_two(hi_exponent, false, "");
  // The greatest double and float not above the type's largest value (2^hi_exponent - 1 where
  // that is exact, else the one below 2^hi_exponent), integers that print exactly.
  const double hi = std::ldexp(1.0, hi_exponent);
  char top[64];
  std::snprintf(top, sizeof top, "%.1f", hi_exponent <= 53 ? hi - 1 : std::nextafter(hi, 0.0));
  tokens["TOP"] = top;
  std::snprintf(top, sizeof top, "%.1ff",
                hi_exponent <= 24 ? hi - 1 : static_cast<double>(std::nextafter(static_cast<float>(hi), 0.0f)));
  tokens["TOPf"] = top;
  tokens["LOf"] = tokens["LO"] + "f";
  tokens["HIf"] = tokens["HI"] + "f";
  return tokens;
}

// `text` with its $tokens replaced: the dialect's, then those of the helper's type (if typed).
std::string substitute(std::string_view text, const DialectSyntax& d, std::string_view type = "") {
  std::map<std::string, std::string, std::less<>> tokens = {
      {"Q", std::string(d.helper_qualifier())},
      {"f32", std::string(d.type_name(DType::kF32))},
      {"f64", std::string(d.type_name(DType::kF64))},
      {"i32", std::string(d.type_name(DType::kI32))},
      {"i64", std::string(d.type_name(DType::kI64))},
      {"u16", std::string(d.type_name(DType::kU16))},
      {"u32", std::string(d.type_name(DType::kU32))},
      {"u64", std::string(d.type_name(DType::kU64))},
      {"I32MIN", d.int_limit(DType::kI32, false)},
      {"I32MAX", d.int_limit(DType::kI32, true)},
      {"I64MIN", d.int_limit(DType::kI64, false)},
      {"I64MAX", d.int_limit(DType::kI64, true)},
      {"expf", d.own_math_f32() ? "kiln_exp_f32" : d.math_function("exp", DType::kF32)},
      {"fabsf", d.math_function("fabs", DType::kF32)},
      {"copysignf", d.math_function("copysign", DType::kF32)},
      {"INF32", d.infinity(DType::kF32, false)},
      {"NINF32", d.infinity(DType::kF32, true)},
      {"NAN32", d.nan(DType::kF32)},
      {"exp", d.math_function("exp", DType::kF64)},
      {"sqrtf", d.math_function("sqrt", DType::kF32)},
      {"sqrt", d.math_function("sqrt", DType::kF64)},
  };
  tokens.merge(type_tokens(type, d));
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end]))) ++end;
    auto it = tokens.find(text.substr(i + 1, end - i - 1));
    if (it == tokens.end()) std::abort();  // a typo in kHelpers
    out += it->second;
    i = end;
  }
  return out;
}

}  // namespace

std::span<const HelperText> float_helpers() { return kFloatHelpers; }

HelperSet::HelperSet(const DialectSyntax& dialect) {
  auto add = [&](const HelperText& h, std::string_view type) {
    Helper helper;
    helper.name = substitute(h.name, dialect, type);
    std::string_view deps = h.deps;
    while (!deps.empty()) {
      size_t space = deps.find(' ');
      helper.deps.push_back(substitute(deps.substr(0, space), dialect, type));
      deps = space == std::string_view::npos ? std::string_view() : deps.substr(space + 1);
    }
    // A helper that calls exp of f32 calls kiln's own where the dialect has it.
    if (dialect.own_math_f32() && std::string_view(h.text).find("$expf(") != std::string_view::npos) {
      helper.deps.emplace_back("kiln_exp_f32");
    }
    helper.text = substitute(h.text, dialect, type);
    helpers_.push_back(std::move(helper));
  };
  for (std::span<const HelperText> list : {half_helpers(), float_helpers(), integer_helpers()}) {
    for (const HelperText& h : list) {
      std::string_view types = h.types;
      if (types.empty()) add(h, "");
      while (!types.empty()) {
        const size_t space = types.find(' ');
        add(h, types.substr(0, space));
        types = space == std::string_view::npos ? std::string_view() : types.substr(space + 1);
      }
    }
  }
}

HelperSet::Helper* HelperSet::find(std::string_view name) {
  for (Helper& h : helpers_) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

std::string HelperSet::use(std::string_view name) {
  Helper* helper = find(name);
  if (!helper) std::abort();  // the emitter asked for a helper that does not exist
  if (!helper->used) {
    helper->used = true;
    for (const std::string& dep : helper->deps) use(dep);
  }
  return helper->name;
}

bool HelperSet::empty() const {
  for (const Helper& h : helpers_) {
    if (h.used) return false;
  }
  return true;
}

void HelperSet::emit(Printer& out) const {
  for (const Helper& h : helpers_) {
    if (h.used) out.append(h.text);
  }
}

}  // namespace kiln::codegen::internal
