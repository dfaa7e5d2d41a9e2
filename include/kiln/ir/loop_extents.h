// How far the loops of a statement run. An index runs over [0, extent) by its meaning
// (docs/language.md), but a reduced index bounded by `where` may be bounded far beyond any point
// that counts: points where a subscript of the right side falls outside its dimension contribute
// nothing to a reduction, so such an index stops where every point beyond has a subscript out of
// range. `p[y, x] = max(img[2*y + dy, 2*x + dx]) where dy < 2, dx < 4294967296` over a 16-wide
// image runs dx over 16 values, not 2^32, with the same results.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir {

// The extent each loop of `s` runs over, by index number: the index's extent, or less for a
// reduced index as above (never below 1). `mean` still divides by the indices' own extents.
std::vector<int64_t> loop_extents(const Assignment& s, const std::vector<TensorNode>& nodes);

// The number of points those loops visit, or nullopt when it is past INT64_MAX (no device's
// 64-bit loop counters can count it).
std::optional<int64_t> loop_trip_count(const std::vector<int64_t>& extents);

}  // namespace kiln::ir
