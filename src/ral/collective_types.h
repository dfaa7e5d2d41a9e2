// How allreduce and reduce_scatter combine each element type (docs/distributed.md, "Element
// types"), shared by the MPI world and the world of one so that one rank and many give the same
// numbers:
//  - f32, f64 and the integers combine in their own type (integers wrap); mean is the sum
//    divided by the ranks, in the type for f32 and f64;
//  - f16 and bf16 combine in f32 and are rounded back (to nearest even) at the end;
//  - mean of an integer type is the sum in f64 divided by the ranks, converted back as the
//    language converts f64 to integers (toward zero, saturating);
//  - bool combines as bytes of 0 and 1: sum, mean and max are a logical or, min a logical and
//    (the sum or the mean converted to bool, which is `!= 0`).
// Private to kiln_ral.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ral/world.h"

namespace kiln::ral::internal {

struct Combination {
  ir::DType type = ir::DType::kF32;  // what the ranks' values are combined in
  CollectiveOp op = CollectiveOp::kSum;  // how (mean: the sum, divided at the end)
  bool staged = false;  // whether values are converted into `type` first and back at the end
};

// For an allreduce or a reduce_scatter (the others move bytes and combine nothing).
Combination combination_of(const Collective& c);

// `count` elements at `in`, of `from`, as elements of `to` at `out` (dtype_size(to) each).
void convert_elements(ir::DType from, ir::DType to, const void* in, void* out, int64_t count);

// Memory for `count` elements of `type`: RESOURCE_EXHAUSTED naming the collective when the host
// has none.
Result<std::vector<std::byte>> staging_buffer(const Collective& c, ir::DType type, int64_t count);

// The end of a combination over `ranks` ranks: `combined` holds c.count elements of the
// combination's type (c.out itself where it is not staged); they become c.out's elements, divided
// by the ranks for a mean.
void finish_combination(const Collective& c, const Combination& how, void* combined, int ranks);

}  // namespace kiln::ral::internal
