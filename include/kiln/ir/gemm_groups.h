// How gemm's tensors, of rank 2 to 4, are matrices (docs/language.md, "Calls"): their dimensions
// fall into blocks of consecutive dimensions, each block flattened in row-major order,
//     a: [batch..., rows..., depth...]   (transpose_a=1: [batch..., depth..., rows...])
//     b: [batch..., depth..., cols...]   (transpose_b=1: [batch..., cols..., depth...])
//     c: [batch..., rows..., cols...]
// so that each of the ∏batch products is an M×K by K×N matrix product, M = ∏rows, K = ∏depth,
// N = ∏cols, over the tensors' own memory. `batch` is the call's attribute; the other block
// lengths follow from the three ranks. The parser's checks, the automatic calls and the library
// functions all group dimensions through gemm_groups.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln::ir {

// The largest rank gemm takes (and the smallest: 2).
inline constexpr int kGemmMaxRank = 4;

// Where a's and b's blocks start (their first dimension), as the transposes place them.
struct GemmBlockStarts {
  int a_rows = 0, a_depth = 0, b_depth = 0, b_cols = 0;
};

struct GemmGroups {
  int batch = 0, rows = 0, depth = 0, cols = 0;  // block lengths, in dimensions

  constexpr GemmBlockStarts starts(bool transpose_a, bool transpose_b) const {
    return GemmBlockStarts{batch + (transpose_a ? depth : 0), batch + (transpose_a ? 0 : rows),
                           batch + (transpose_b ? cols : 0), batch + (transpose_b ? 0 : depth)};
  }
};

// The blocks of gemm(a, b) -> c for these ranks and `batch` leading batch dimensions, or nullopt
// when the ranks do not make a product: every block but batch has at least one dimension, and
// ranks are 2 to kGemmMaxRank.
constexpr std::optional<GemmGroups> gemm_groups(int64_t rank_a, int64_t rank_b, int64_t rank_c, int64_t batch) {
  for (int64_t r : {rank_a, rank_b, rank_c}) {
    if (r < 2 || r > kGemmMaxRank) return std::nullopt;
  }
  if (batch < 0) return std::nullopt;
  const int64_t a = rank_a - batch, b = rank_b - batch, c = rank_c - batch;
  // a = rows + depth, b = depth + cols, c = rows + cols.
  if ((a + b - c) % 2 != 0) return std::nullopt;
  const int64_t depth = (a + b - c) / 2, rows = a - depth, cols = b - depth;
  if (depth < 1 || rows < 1 || cols < 1) return std::nullopt;
  return GemmGroups{static_cast<int>(batch), static_cast<int>(rows), static_cast<int>(depth), static_cast<int>(cols)};
}

// Whether some batch makes these ranks a product: the rank combinations gemm is registered for.
constexpr bool gemm_ranks_possible(int rank_a, int rank_b, int rank_c) {
  for (int batch = 0; batch < kGemmMaxRank; ++batch) {
    if (gemm_groups(rank_a, rank_b, rank_c, batch)) return true;
  }
  return false;
}

}  // namespace kiln::ir
