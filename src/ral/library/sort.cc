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

// What a row is sorted as: its elements themselves, the f32 keys of f16 and bf16 (made once per
// row), and bool as u8 (false and true order as the bytes 0 and 1 do). The standard library's
// sorts below are instantiated once per such type (10), not per element type and rank, and they
// are the bulk of this file's compile time.
template <typename T>
using SortKey = std::conditional_t<std::is_same_v<T, bool>, uint8_t, OrderKey<T>>;

// A row's elements as what they are ordered by: the row itself, or for f16 and bf16 their f32
// values, made once into `keys` (not at every comparison).
template <typename T>
const SortKey<T>* keys_of(const T* row, int64_t n, std::vector<SortKey<T>>& keys) {
  if constexpr (kNarrowFloat<T>) {
    keys.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = order_key(row[i]);
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
        stable_sort_row(reinterpret_cast<SortKey<T>*>(y + r * n), n, descending);
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
      top_positions(keys_of(row, n, keys), order.data(), n, k);
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
