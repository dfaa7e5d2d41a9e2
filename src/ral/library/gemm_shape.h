// gemm's tensors as matrices: a, b and c of rank 2 to 4, their dimensions grouped as
// kiln/ir/gemm_groups.h says, are `batch` independent row-major products, each op(a) (m x k) @
// op(b) (k x n) into c (m x n), one after another in each tensor's memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "kiln/base/status.h"
#include "kiln/ral/memref.h"

namespace kiln::ral::library {

struct GemmShape {
  int64_t batch = 1;  // the number of products
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;

  // The row lengths of one product's a, b and c as stored (at least 1, as BLAS requires even of
  // an empty matrix).
  int64_t lda() const { return std::max<int64_t>(transpose_a ? m : k, 1); }
  int64_t ldb() const { return std::max<int64_t>(transpose_b ? k : n, 1); }
  int64_t ldc() const { return std::max<int64_t>(n, 1); }
  // Elements from one product's a, b and c to the next's.
  int64_t stride_a() const { return m * k; }
  int64_t stride_b() const { return k * n; }
  int64_t stride_c() const { return m * n; }
};

// The shape of gemm(a, b) -> c with these sizes and attributes. INVALID_ARGUMENT naming the
// shapes when a flag is not 0 or 1, the ranks make no product with `batch`, the grouped
// dimensions disagree, or m, n or k is above 2^31 - 1.
Result<GemmShape> gemm_shape(std::span<const int64_t> a, std::span<const int64_t> b, std::span<const int64_t> c,
                             int64_t transpose_a, int64_t transpose_b, int64_t batch);

template <typename T, int RA, int RB, int RC>
Result<GemmShape> check_gemm(const MemRef<T, RA>& a, const MemRef<T, RB>& b, const MemRef<T, RC>& c,
                             int64_t transpose_a, int64_t transpose_b, int64_t batch) {
  return gemm_shape(a.sizes, b.sizes, c.sizes, transpose_a, transpose_b, batch);
}

}  // namespace kiln::ral::library
