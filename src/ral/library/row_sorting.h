// sort, argsort and topk as RAL functions of every element type and rank 1 to 4, over a device's
// row functions (the work on rows along the last axis, which does not depend on the rank): the
// function of each rank only passes the data pointers and the sizes to one function per element
// type, which checks the shapes and hands the row count and length to the row function, so that
// what sorts is compiled once per element type, not once per type and rank, and the
// registration once for every device that runs the same code.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/ral/memref.h"
#include "kiln/ral/registry.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

// Rows has, for each element type T, static member function templates over `rows` rows of `n`
// elements each:
//   void sort<T>(const T* x, T* y, int64_t rows, int64_t n, bool descending)  (x, y may be one array)
//   void argsort<T>(const T* x, int32_t* idx, int64_t rows, int64_t n, bool descending)
//   void topk<T>(const T* x, T* values, int32_t* indices, int64_t rows, int64_t n, int64_t k)
template <typename Rows>
struct RowSorting {
  template <typename T, int N>
  static Status sort(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> y, int64_t descending) {
    return sort_rows<T>(x.data, x.sizes, y.data, y.sizes, descending);
  }

  template <typename T, int N>
  static Status argsort(ExecutionContext*, MemRef<T, N> x, MemRef<int32_t, N> idx, int64_t descending) {
    return argsort_rows<T>(x.data, x.sizes, idx.data, idx.sizes, descending);
  }

  template <typename T, int N>
  static Status topk(ExecutionContext*, MemRef<T, N> x, MemRef<T, N> values, MemRef<int32_t, N> indices) {
    return topk_rows<T>(x.data, x.sizes, values.data, values.sizes, indices.data, indices.sizes);
  }

 private:
  using Sizes = std::span<const int64_t>;

  // All but the last axis.
  static int64_t rows_of(Sizes sizes) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < sizes.size(); ++d) rows *= sizes[d];
    return rows;
  }

  // The checks and Rows's functions, kept out of the functions of each rank: inlined there, they
  // would be compiled once per rank again.
  template <typename T>
  [[gnu::noinline]] static Status sort_rows(const T* x, Sizes x_sizes, T* y, Sizes y_sizes, int64_t descending) {
    KILN_RETURN_IF_ERROR(check_row_shapes("sort", x_sizes, "x", y_sizes, "y", true));
    Rows::template sort<T>(x, y, rows_of(x_sizes), x_sizes.back(), descending != 0);
    return Status();
  }

  template <typename T>
  [[gnu::noinline]] static Status argsort_rows(const T* x, Sizes x_sizes, int32_t* idx, Sizes idx_sizes,
                                               int64_t descending) {
    KILN_RETURN_IF_ERROR(check_argsort_shapes(x_sizes, idx_sizes));
    Rows::template argsort<T>(x, idx, rows_of(x_sizes), x_sizes.back(), descending != 0);
    return Status();
  }

  template <typename T>
  [[gnu::noinline]] static Status topk_rows(const T* x, Sizes x_sizes, T* values, Sizes values_sizes,
                                            int32_t* indices, Sizes indices_sizes) {
    KILN_ASSIGN_OR_RETURN(const int64_t k, check_topk_shapes(x_sizes, values_sizes, indices_sizes));
    Rows::template topk<T>(x, values, indices, rows_of(x_sizes), x_sizes.back(), k);
    return Status();
  }
};

// Registers Rows's sort, argsort and topk for `device`, of every element type and rank 1 to 4.
template <typename Rows>
Status add_row_sorting(Registry& registry, std::string_view device) {
  return for_each_element_type([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function_for<"sort", &RowSorting<Rows>::template sort<T, N>>(device)));
    KILN_RETURN_IF_ERROR(
        registry.add(make_function_for<"argsort", &RowSorting<Rows>::template argsort<T, N>>(device)));
    return registry.add(make_function_for<"topk", &RowSorting<Rows>::template topk<T, N>>(device));
  });
}

}  // namespace kiln::ral::library
