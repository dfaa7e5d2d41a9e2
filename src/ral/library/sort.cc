// sort, argsort and topk on the CPU device: each row (the last axis) on its own, with the
// standard library's sorts, for every element type (f16 and bf16 ordered by their f32 values).
// The interp device has plain reference versions (reference.cc).
#include <algorithm>
#include <numeric>
#include <vector>

#include "kiln/ral/execution_context.h"
#include "ral/library/library.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// A row's elements as what they are ordered by: the row itself, or for f16 and bf16 their f32
// values, made once into `keys` (not at every comparison).
template <typename T>
const OrderKey<T>* keys_of(const T* row, int64_t n, std::vector<OrderKey<T>>& keys) {
  if constexpr (kNarrowFloat<T>) {
    keys.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = order_key(row[i]);
    return keys.data();
  } else {
    return row;
  }
}

template <typename T, int N>
Status sort_rows(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> y, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_rows("sort", x, "x", y, "y", true));
  const int64_t n = row_length(x);
  std::vector<OrderKey<T>> keys;
  std::vector<int32_t> order;
  std::vector<T> row;
  for (int64_t r = 0; r < row_count(x); ++r) {
    const T* in = x.data + r * n;
    T* out = y.data + r * n;
    if constexpr (kNarrowFloat<T>) {
      // By positions over the keys, then the elements themselves (x and y may be one array).
      const OrderKey<T>* key = keys_of(in, n, keys);
      row.assign(in, in + n);
      order.resize(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return before(key[a], key[b], descending != 0); });
      for (int64_t i = 0; i < n; ++i) out[i] = row[static_cast<size_t>(order[static_cast<size_t>(i)])];
    } else {
      std::copy(in, in + n, out);
      // Stable, so that elements that compare equal but differ (0 and -0) come out in the same
      // order on every device.
      std::stable_sort(out, out + n, [&](T a, T b) { return before(a, b, descending != 0); });
    }
  }
  return Status();
}

template <typename T, int N>
Status argsort_rows(ExecutionContext*, MemRef<T, N> x, MemRef<int32_t, N> idx, int64_t descending) {
  KILN_RETURN_IF_ERROR(check_argsort(x, idx));
  const int64_t n = row_length(x);
  std::vector<OrderKey<T>> keys;
  for (int64_t r = 0; r < row_count(x); ++r) {
    const OrderKey<T>* in = keys_of(x.data + r * n, n, keys);
    int32_t* out = idx.data + r * n;
    std::iota(out, out + n, 0);
    std::stable_sort(out, out + n, [&](int32_t a, int32_t b) { return before(in[a], in[b], descending != 0); });
  }
  return Status();
}

template <typename T, int N>
Status topk_rows(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> values, MemRef<int32_t, N> indices) {
  KILN_ASSIGN_OR_RETURN(const int64_t k, check_topk(x, values, indices));
  const int64_t n = row_length(x);
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::vector<OrderKey<T>> keys;
  for (int64_t r = 0; r < row_count(x); ++r) {
    const T* row = x.data + r * n;
    const OrderKey<T>* in = keys_of(row, n, keys);
    std::iota(order.begin(), order.end(), 0);
    // Ties: the lower position first, so the order is total and partial_sort is exact.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      if (before(in[a], in[b], true)) return true;
      if (before(in[b], in[a], true)) return false;
      return a < b;
    });
    for (int64_t i = 0; i < k; ++i) {
      values.data[r * k + i] = row[order[static_cast<size_t>(i)]];
      indices.data[r * k + i] = order[static_cast<size_t>(i)];
    }
  }
  return Status();
}

}  // namespace

namespace {

template <FixedString Device>
Status add_sorting(Registry& registry) {
  return for_each_element_type([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"sort", Device, &sort_rows<T, N>>()));
    KILN_RETURN_IF_ERROR(registry.add(make_function<"argsort", Device, &argsort_rows<T, N>>()));
    return registry.add(make_function<"topk", Device, &topk_rows<T, N>>());
  });
}

}  // namespace

Status register_cpu_sorting(Registry& registry) {
  KILN_RETURN_IF_ERROR(add_sorting<"cpu">(registry));
  return add_sorting<"opencl">(registry);
}

}  // namespace kiln::ral::library
