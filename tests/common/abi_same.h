// Whether kiln's own declaration of a C library's function passes its arguments the same way as
// the library's header: for the static_asserts that check kiln's dlopen tables (the CUDA driver
// API, cuBLAS) against the real headers where they are installed.
#pragma once

#include <type_traits>

namespace kiln::test {

// Two types pass the same way in a call: identical, or both enums or integers of one size and
// alignment, at least one an enum (the headers' enums have no fixed underlying type; kiln
// declares them as int or as enums of int).
template <class A, class B>
struct AbiSame {
  static constexpr bool check() {
    if constexpr (std::is_same_v<A, B>) {
      return true;
    } else if constexpr ((std::is_enum_v<A> || std::is_enum_v<B>) && (std::is_enum_v<A> || std::is_integral_v<A>) &&
                         (std::is_enum_v<B> || std::is_integral_v<B>)) {
      return sizeof(A) == sizeof(B) && alignof(A) == alignof(B);
    } else {
      return false;
    }
  }
  static constexpr bool value = check();
};

// Pointers pass alike when what they point to does (CUjit_option* against kiln's own enum).
template <class A, class B>
struct AbiSame<A*, B*> {
  static constexpr bool value = std::is_same_v<A, B> || AbiSame<A, B>::value;
};

template <class R1, class... A1, class R2, class... A2>
struct AbiSame<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool check() {
    if constexpr (sizeof...(A1) != sizeof...(A2)) {
      return false;
    } else {
      return AbiSame<R1, R2>::value && (AbiSame<A1, A2>::value && ...);
    }
  }
  static constexpr bool value = check();
};

}  // namespace kiln::test
