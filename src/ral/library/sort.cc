// sort, argsort and topk on the CPU device: each row (the last axis) on its own, with the
// standard library's sorts, for every element type (f16 and bf16 ordered by their f32 values).
// The interp device has plain reference versions (reference.cc).
#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ral/library/library.h"
#include "ral/library/row_sorting.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// What a row is sorted as: f16 and bf16 as their f32 values, signed integers as unsigned ones
// with the sign bit flipped (which keeps their order), bool as u8 (false and true order as the
// bytes 0 and 1 do), the rest as themselves. The standard library's stable sorts below are
// instantiated once per such key (u8, u16, u32, u64, f32, f64), not per element type and rank:
// they are the bulk of this file's compile time. (Floats keep their own order: NaNs last both
// ways.)
template <typename T>
struct SortKeyOf {
  using type = OrderKey<T>;
};
template <> struct SortKeyOf<bool> { using type = uint8_t; };
template <> struct SortKeyOf<int8_t> { using type = uint8_t; };
template <> struct SortKeyOf<int16_t> { using type = uint16_t; };
template <> struct SortKeyOf<int32_t> { using type = uint32_t; };
template <> struct SortKeyOf<int64_t> { using type = uint64_t; };
template <typename T>
using SortKey = typename SortKeyOf<T>::type;

template <typename T>
inline constexpr bool kSignedInteger = std::is_integral_v<T> && std::is_signed_v<T>;

// A signed integer's bits with the sign bit flipped: unsigned keys in the integers' order. Its
// own inverse.
template <typename K>
K flip_sign(K bits) {
  return static_cast<K>(bits ^ (K{1} << (8 * sizeof(K) - 1)));
}

// A row's elements as what they are ordered by: the row itself, or its keys made once into
// `keys` (not at every comparison) for f16, bf16 and signed integers.
template <typename T>
const SortKey<T>* keys_of(const T* row, int64_t n, std::vector<SortKey<T>>& keys) {
  if constexpr (kNarrowFloat<T> || kSignedInteger<T>) {
    keys.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kNarrowFloat<T>) keys[static_cast<size_t>(i)] = order_key(row[i]);
      else keys[static_cast<size_t>(i)] = flip_sign(static_cast<SortKey<T>>(row[i]));
    }
    return keys.data();
  } else {
    return reinterpret_cast<const SortKey<T>*>(row);
  }
}

// Positions 0..n-1 into `order`, stably ordered by their keys.
template <typename K>
void stable_order(const K* keys, int32_t* order, int64_t n, bool descending) {
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [&](int32_t a, int32_t b) { return before(keys[a], keys[b], descending); });
}

// Stable, so that elements that compare equal but differ (0 and -0) come out in the same order on
// every device.
template <typename K>
void stable_sort_row(K* row, int64_t n, bool descending) {
  std::stable_sort(row, row + n, [&](K a, K b) { return before(a, b, descending); });
}

// The positions of the k greatest keys, in order, into order[0..k) (order holds n).
template <typename K>
void top_positions(const K* keys, int32_t* order, int64_t n, int64_t k) {
  std::iota(order, order + n, 0);
  // Ties: the lower position first, so the order is total and partial_sort is exact.
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    if (before(keys[a], keys[b], true)) return true;
    if (before(keys[b], keys[a], true)) return false;
    return a < b;
  });
}

// The row functions of RowSorting (row_sorting.h).
struct LibraryRows {
  template <typename T>
  static void sort(const T* x, T* y, int64_t rows, int64_t n, bool descending) {
    if constexpr (kNarrowFloat<T>) {
      // By positions over the keys, then the elements themselves (x and y may be one array).
      std::vector<SortKey<T>> keys;
      std::vector<int32_t> order(static_cast<size_t>(n));
      std::vector<T> row;
      for (int64_t r = 0; r < rows; ++r) {
        const T* in = x + r * n;
        T* out = y + r * n;
        const SortKey<T>* key = keys_of(in, n, keys);
        row.assign(in, in + n);
        stable_order(key, order.data(), n, descending);
        for (int64_t i = 0; i < n; ++i) out[i] = row[static_cast<size_t>(order[static_cast<size_t>(i)])];
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        std::copy(x + r * n, x + (r + 1) * n, y + r * n);
        // In place as keys (a signed integer and its unsigned type may alias).
        SortKey<T>* keys = reinterpret_cast<SortKey<T>*>(y + r * n);
        if constexpr (kSignedInteger<T>) std::transform(keys, keys + n, keys, flip_sign<SortKey<T>>);
        stable_sort_row(keys, n, descending);
        if constexpr (kSignedInteger<T>) std::transform(keys, keys + n, keys, flip_sign<SortKey<T>>);
      }
    }
  }

  template <typename T>
  static void argsort(const T* x, int32_t* idx, int64_t rows, int64_t n, bool descending) {
    std::vector<SortKey<T>> keys;
    for (int64_t r = 0; r < rows; ++r) stable_order(keys_of(x + r * n, n, keys), idx + r * n, n, descending);
  }

  template <typename T>
  static void topk(const T* x, T* values, int32_t* indices, int64_t rows, int64_t n, int64_t k) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::vector<SortKey<T>> keys;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * n;
      // Signed integers by themselves: making their keys costs topk (about n log k) some 15%.
      if constexpr (kSignedInteger<T>) top_positions(row, order.data(), n, k);
      else top_positions(keys_of(row, n, keys), order.data(), n, k);
      for (int64_t i = 0; i < k; ++i) {
        values[r * k + i] = row[order[static_cast<size_t>(i)]];
        indices[r * k + i] = order[static_cast<size_t>(i)];
      }
    }
  }
};

}  // namespace

Status register_cpu_sorting(Registry& registry) {
  KILN_RETURN_IF_ERROR(add_row_sorting<LibraryRows>(registry, "cpu"));
  return add_row_sorting<LibraryRows>(registry, "opencl");
}

}  // namespace kiln::ral::library
