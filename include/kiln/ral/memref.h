// The C++ view of a tensor passed through the RAL ABI: a data pointer and its sizes, laid out as
// kiln_ral_memref(N) in kiln/ral/abi.h (rank 0: the pointer alone). Registered functions take
// and return MemRef<T, N> by value; the registry's name mangling gives them the code `mNdT`.
#pragma once

#include <array>
#include <cstdint>
#include <cstddef>

#include "kiln/ral/abi.h"

namespace kiln::ral {

template <typename T, int N>
struct MemRef {
  static_assert(N >= 1 && N <= 8, "memrefs of rank 1 to 8 (rank 0 is MemRef<T, 0>)");
  T* data = nullptr;
  std::array<int64_t, N> sizes{};

  int64_t size(int axis) const { return sizes[static_cast<size_t>(axis)]; }
  int64_t element_count() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

template <typename T>
struct MemRef<T, 0> {
  T* data = nullptr;
  int64_t element_count() const { return 1; }
};

// The ABI layout is the C struct's: a pointer, then N int64 sizes, no padding.
static_assert(sizeof(MemRef<float, 2>) == sizeof(void*) + 2 * sizeof(int64_t));
using MemRefF32x3 = MemRef<float, 3>;
static_assert(offsetof(MemRefF32x3, sizes) == sizeof(void*));
static_assert(sizeof(MemRef<double, 0>) == sizeof(void*));

}  // namespace kiln::ral
