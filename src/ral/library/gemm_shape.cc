#include "ral/library/gemm_shape.h"

#include <algorithm>
#include <string>

#include "kiln/ir/gemm_groups.h"

namespace kiln::ral::library {

namespace {

std::string shape_text(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t d = 0; d < sizes.size(); ++d) s += (d ? ", " : "") + std::to_string(sizes[d]);
  return s + "]";
}

// The product of sizes[from, from + n).
int64_t block(std::span<const int64_t> sizes, int from, int n) {
  int64_t v = 1;
  for (int d = from; d < from + n; ++d) v *= sizes[static_cast<size_t>(d)];
  return v;
}

bool same_block(std::span<const int64_t> x, int x_from, std::span<const int64_t> y, int y_from, int n) {
  return std::equal(x.begin() + x_from, x.begin() + x_from + n, y.begin() + y_from);
}

}  // namespace

Result<GemmShape> gemm_shape(std::span<const int64_t> a, std::span<const int64_t> b, std::span<const int64_t> c,
                             int64_t transpose_a, int64_t transpose_b, int64_t batch) {
  if ((transpose_a != 0 && transpose_a != 1) || (transpose_b != 0 && transpose_b != 1)) {
    return invalid_argument_error("gemm: transpose_a and transpose_b are 0 or 1");
  }
  const std::string shapes = "a is " + shape_text(a) + ", b is " + shape_text(b) + " and c is " + shape_text(c);
  const std::optional<ir::GemmGroups> g = ir::gemm_groups(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()),
                                                          static_cast<int64_t>(c.size()), batch);
  if (!g) return invalid_argument_error("gemm: " + shapes + ": their ranks make no product with batch=" + std::to_string(batch));
  GemmShape s;
  s.transpose_a = transpose_a != 0;
  s.transpose_b = transpose_b != 0;
  const auto [a_rows, a_depth, b_depth, b_cols] = g->starts(s.transpose_a, s.transpose_b);
  s.batch = block(c, 0, g->batch);
  s.m = block(a, a_rows, g->rows);
  s.k = block(a, a_depth, g->depth);
  s.n = block(b, b_cols, g->cols);
  const bool agree = same_block(a, 0, c, 0, g->batch) && same_block(b, 0, c, 0, g->batch) &&
                     same_block(a, a_depth, b, b_depth, g->depth) && same_block(a, a_rows, c, g->batch, g->rows) &&
                     same_block(b, b_cols, c, g->batch + g->rows, g->cols);
  if (!agree) {
    return invalid_argument_error("gemm: op(a) is " + std::to_string(s.m) + "x" + std::to_string(s.k) + ", op(b) is " +
                                  std::to_string(block(b, b_depth, g->depth)) + "x" + std::to_string(s.n) + " and c is " +
                                  shape_text(c) + (a.size() + b.size() + c.size() > 6 ? " (" + shapes + ", batch=" + std::to_string(batch) + ")" : ""));
  }
  if (s.m > INT32_MAX || s.n > INT32_MAX || s.k > INT32_MAX) {
    return invalid_argument_error("gemm: dimensions above 2^31 - 1");
  }
  return s;
}

}  // namespace kiln::ral::library
