// The shape checks of the library's row functions (rows.h), on the sizes alone.
#include "ral/library/rows.h"

namespace kiln::ral::library {

std::string shape_string(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t d = 0; d < sizes.size(); ++d) s += (d ? ", " : "") + std::to_string(sizes[d]);
  return s + "]";
}

Status check_row_shapes(const char* function, std::span<const int64_t> a, const char* a_name,
                        std::span<const int64_t> b, const char* b_name, bool last_too) {
  for (size_t d = 0; d < a.size(); ++d) {
    if ((d + 1 < a.size() || last_too) && a[d] != b[d]) {
      return invalid_argument_error(std::string(function) + ": " + b_name + " has shape " + shape_string(b) + ", " +
                                    a_name + " has shape " + shape_string(a));
    }
  }
  return Status();
}

Result<int64_t> check_topk_shapes(std::span<const int64_t> x, std::span<const int64_t> values,
                                  std::span<const int64_t> indices) {
  KILN_RETURN_IF_ERROR(check_row_shapes("topk", x, "x", values, "values", false));
  KILN_RETURN_IF_ERROR(check_row_shapes("topk", values, "values", indices, "indices", true));
  const int64_t n = x.back(), k = values.back();
  if (k > n) {
    return invalid_argument_error("topk: k = " + std::to_string(k) + " is larger than the row length " +
                                  std::to_string(n));
  }
  if (n > INT32_MAX) return invalid_argument_error("topk: rows longer than 2^31 - 1");
  return k;
}

Status check_argsort_shapes(std::span<const int64_t> x, std::span<const int64_t> idx) {
  KILN_RETURN_IF_ERROR(check_row_shapes("argsort", x, "x", idx, "idx", true));
  if (x.back() > INT32_MAX) return invalid_argument_error("argsort: rows longer than 2^31 - 1");
  return Status();
}

}  // namespace kiln::ral::library
