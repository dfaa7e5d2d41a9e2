// RAL name mangling: the full name of a registered function, derived at compile time from its
// C++ type, as NAME___DEVICE___ARGCODES___RETCODES (codes joined by "_"):
//
//     Status sort(ExecutionContext*, MemRef<float, 2>, MemRef<float, 2>, int64_t)
//     registered as ("sort", "cpu")  →  "sort___cpu___pvoid_m2df32_m2df32_i64___void"
//
// Type codes: i1 (bool), i8 i16 i32 i64, ui8 ui16 ui32 ui64, f32 f64, pvoid (any object pointer
// that is not a tensor: the context first of all), p + code for a pointer to a scalar (pf32),
// f16 and bf16 for Half and BFloat16 (element_types.h), mNdT for MemRef<T, N> (m2df32; m0df64
// for rank 0; T is dtype_code() of the element type), buf for kiln_ral_buffer_t, and void for no
// result (a function returning Status or void). A Result<T> return has T's code. docs/ral.md
// lists them with examples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "kiln/base/status.h"
#include "kiln/ral/abi.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/memref.h"

namespace kiln::ral {

// A string usable at compile time and as a template argument (KILN_RAL_API's name and device).
template <size_t N>
struct FixedString {
  char chars[N + 1] = {};
  constexpr FixedString() = default;
  constexpr FixedString(const char (&s)[N + 1]) {  // NOLINT: from a literal, by design
    for (size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  constexpr std::string_view view() const { return {chars, N}; }
  static constexpr size_t length = N;
};
template <size_t N>
FixedString(const char (&)[N]) -> FixedString<N - 1>;

template <size_t A, size_t B>
constexpr FixedString<A + B> operator+(const FixedString<A>& a, const FixedString<B>& b) {
  FixedString<A + B> out;
  for (size_t i = 0; i < A; ++i) out.chars[i] = a.chars[i];
  for (size_t i = 0; i < B; ++i) out.chars[A + i] = b.chars[i];
  return out;
}

namespace mangle_detail {

template <typename T>
struct IsResult : std::false_type {};
template <typename T>
struct IsResult<Result<T>> : std::true_type {
  using Value = T;
};

template <typename T>
struct IsMemRef : std::false_type {};
template <typename T, int N>
struct IsMemRef<MemRef<T, N>> : std::true_type {
  using Element = T;
  static constexpr int rank = N;
};

// Integers by width and signedness, so that int64_t, long and long long all read i64. (sizeof is
// asked of integers only: Clang refuses sizeof(void) even where it is never used.)
template <typename T>
constexpr auto integer_code() {
  if constexpr (std::is_signed_v<T> && sizeof(T) == 1) return FixedString("i8");
  else if constexpr (std::is_signed_v<T> && sizeof(T) == 2) return FixedString("i16");
  else if constexpr (std::is_signed_v<T> && sizeof(T) == 4) return FixedString("i32");
  else if constexpr (std::is_signed_v<T> && sizeof(T) == 8) return FixedString("i64");
  else if constexpr (sizeof(T) == 1) return FixedString("ui8");
  else if constexpr (sizeof(T) == 2) return FixedString("ui16");
  else if constexpr (sizeof(T) == 4) return FixedString("ui32");
  else if constexpr (sizeof(T) == 8) return FixedString("ui64");
  else static_assert(sizeof(T) == 0, "this integer has no RAL code: see kiln/ral/mangle.h");
}

template <typename T>
constexpr auto scalar_code() {
  if constexpr (std::is_same_v<T, bool>) return FixedString("i1");
  else if constexpr (std::is_same_v<T, Half>) return FixedString("f16");
  else if constexpr (std::is_same_v<T, BFloat16>) return FixedString("bf16");
  else if constexpr (std::is_same_v<T, float>) return FixedString("f32");
  else if constexpr (std::is_same_v<T, double>) return FixedString("f64");
  else if constexpr (std::is_integral_v<T>) return integer_code<T>();
  else static_assert(sizeof(T) == 0, "this type has no RAL code: see kiln/ral/mangle.h");
}

template <typename T>
constexpr bool has_scalar_code() {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return true;
  }
  else if constexpr (std::is_integral_v<T>) return sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8;
  else return false;
}

}  // namespace mangle_detail

// The code of one argument or result type.
template <typename T>
constexpr auto type_code() {
  using U = std::remove_cvref_t<T>;
  if constexpr (mangle_detail::IsMemRef<U>::value) {
    using Info = mangle_detail::IsMemRef<U>;
    constexpr char digit[2] = {static_cast<char>('0' + Info::rank), '\0'};
    return FixedString("m") + FixedString<1>(digit) + FixedString("d") +
           mangle_detail::scalar_code<std::remove_cv_t<typename Info::Element>>();
  } else if constexpr (std::is_same_v<U, kiln_ral_buffer_t>) {
    return FixedString("buf");
  } else if constexpr (std::is_pointer_v<U>) {
    using P = std::remove_cv_t<std::remove_pointer_t<U>>;
    if constexpr (mangle_detail::has_scalar_code<P>()) return FixedString("p") + mangle_detail::scalar_code<P>();
    else return FixedString("pvoid");
  } else {
    return mangle_detail::scalar_code<U>();
  }
}

// The code of a result: void for void and Status (the status travels through the call's return
// value, not through the arguments), T's code for Result<T> and T.
template <typename R>
constexpr auto result_code() {
  if constexpr (std::is_void_v<R> || std::is_same_v<R, Status>) return FixedString("void");
  else if constexpr (mangle_detail::IsResult<R>::value) return type_code<typename mangle_detail::IsResult<R>::Value>();
  else return type_code<R>();
}

template <typename First, typename... Rest>
constexpr auto join_codes() {
  if constexpr (sizeof...(Rest) == 0) return type_code<First>();
  else return type_code<First>() + FixedString("_") + join_codes<Rest...>();
}

template <typename F>
struct Signature;
template <typename R, typename... A>
struct Signature<R (*)(A...)> {
  static_assert(sizeof...(A) >= 1, "a RAL function takes the execution context first");
  static constexpr auto codes = join_codes<A...>() + FixedString("___") + result_code<R>();
};

// NAME___DEVICE___ARGCODES___RETCODES for the function pointer type F.
template <FixedString Name, FixedString Device, typename F>
constexpr auto mangled_name() {
  return Name + FixedString("___") + Device + FixedString("___") + Signature<F>::codes;
}

// The parts of a full name; false when it does not have the NAME___DEVICE___ARGS___RESULTS form.
struct NameParts {
  std::string_view nickname, device, arguments, results;
};
bool split_mangled_name(std::string_view full_name, NameParts* parts);

}  // namespace kiln::ral
