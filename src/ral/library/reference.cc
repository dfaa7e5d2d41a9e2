// The interp device's sort, argsort and topk: one plain stable merge sort of positions, written
// out rather than taken from the standard library, so that it is an independent reference for
// the other devices' versions.
#include <algorithm>
#include <vector>

#include "ral/library/library.h"
#include "ral/library/row_sorting.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// Positions 0..n-1 of `row`, stably ordered by `before` (descending or not; NaNs last).
template <typename T>
std::vector<int64_t> stable_order(const T* row, int64_t n, bool descending) {
  std::vector<int64_t> order(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      int64_t a = lo, b = mid, out = lo;
      while (a < mid && b < hi) {
        // Take from the right only when strictly before: equal elements keep their order.
        if (before(row[order[static_cast<size_t>(b)]], row[order[static_cast<size_t>(a)]], descending)) {
          scratch[static_cast<size_t>(out++)] = order[static_cast<size_t>(b++)];
        } else {
          scratch[static_cast<size_t>(out++)] = order[static_cast<size_t>(a++)];
        }
      }
      while (a < mid) scratch[static_cast<size_t>(out++)] = order[static_cast<size_t>(a++)];
      while (b < hi) scratch[static_cast<size_t>(out++)] = order[static_cast<size_t>(b++)];
    }
    order.swap(scratch);
  }
  return order;
}

// The row functions of RowSorting (row_sorting.h).
struct ReferenceRows {
  template <typename T>
  static void sort(const T* x, T* y, int64_t rows, int64_t n, bool descending) {
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> order = stable_order(x + r * n, n, descending);
      std::vector<T> row(x + r * n, x + (r + 1) * n);  // x and y may be the same memory
      for (int64_t i = 0; i < n; ++i) y[r * n + i] = row[static_cast<size_t>(order[static_cast<size_t>(i)])];
    }
  }

  template <typename T>
  static void argsort(const T* x, int32_t* idx, int64_t rows, int64_t n, bool descending) {
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> order = stable_order(x + r * n, n, descending);
      for (int64_t i = 0; i < n; ++i) idx[r * n + i] = static_cast<int32_t>(order[static_cast<size_t>(i)]);
    }
  }

  template <typename T>
  static void topk(const T* x, T* values, int32_t* indices, int64_t rows, int64_t n, int64_t k) {
    for (int64_t r = 0; r < rows; ++r) {
      // A stable descending order puts the lower position first among equal elements.
      std::vector<int64_t> order = stable_order(x + r * n, n, true);
      for (int64_t i = 0; i < k; ++i) {
        const int64_t at = order[static_cast<size_t>(i)];
        values[r * k + i] = x[r * n + at];
        indices[r * k + i] = static_cast<int32_t>(at);
      }
    }
  }
};

}  // namespace

Status register_reference_sorting(Registry& registry) { return add_row_sorting<ReferenceRows>(registry, "interp"); }

}  // namespace kiln::ral::library
