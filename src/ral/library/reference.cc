// The interp device's sort, argsort and topk: one plain stable merge sort of positions, written
// out rather than taken from the standard library, so that it is an independent reference for
// the other devices' versions.
#include <vector>

#include "kiln/ral/execution_context.h"
#include "ral/library/library.h"
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

template <typename T, int N>
Status sort_rows(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> y, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_rows("sort", x, "x", y, "y", true));
  const int64_t n = row_length(x);
  for (int64_t r = 0; r < row_count(x); ++r) {
    std::vector<int64_t> order = stable_order(x.data + r * n, n, descending != 0);
    std::vector<T> row(x.data + r * n, x.data + (r + 1) * n);  // x and y may be the same memory
    for (int64_t i = 0; i < n; ++i) y.data[r * n + i] = row[static_cast<size_t>(order[static_cast<size_t>(i)])];
  }
  return Status();
}

template <typename T, int N>
Status argsort_rows(ExecutionContext*, MemRef<T, N> x, MemRef<int32_t, N> idx, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_argsort(x, idx));
  const int64_t n = row_length(x);
  for (int64_t r = 0; r < row_count(x); ++r) {
    std::vector<int64_t> order = stable_order(x.data + r * n, n, descending != 0);
    for (int64_t i = 0; i < n; ++i) idx.data[r * n + i] = static_cast<int32_t>(order[static_cast<size_t>(i)]);
  }
  return Status();
}

template <typename T, int N>
Status topk_rows(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> values, MemRef<int32_t, N> indices) {
  KILN_ASSIGN_OR_RETURN(const int64_t k, check_topk(x, values, indices));
  const int64_t n = row_length(x);
  for (int64_t r = 0; r < row_count(x); ++r) {
    // A stable descending order puts the lower position first among equal elements.
    std::vector<int64_t> order = stable_order(x.data + r * n, n, true);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = order[static_cast<size_t>(i)];
      values.data[r * k + i] = x.data[r * n + at];
      indices.data[r * k + i] = static_cast<int32_t>(at);
    }
  }
  return Status();
}

}  // namespace

Status register_reference_sorting(Registry& registry) {
  return for_each_element_type([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"sort", "interp", &sort_rows<T, N>>()));
    KILN_RETURN_IF_ERROR(registry.add(make_function<"argsort", "interp", &argsort_rows<T, N>>()));
    return registry.add(make_function<"topk", "interp", &topk_rows<T, N>>());
  });
}

}  // namespace kiln::ral::library
