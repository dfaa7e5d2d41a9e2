// The initial value of a node, as host bytes: its initializer (random ones seeded by the node's
// name, so that every device and run agrees) or zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/runtime/node_table.h"

namespace kiln::runtime {

// Whether the initial value is all zero bytes (no initializer, or a constant +0).
bool initial_value_is_zero(const ir::TensorNode& node);

// RESOURCE_EXHAUSTED, naming the node and its byte size, when the host cannot hold the bytes.
// Zeros are not written: HostBytes are zeros when made; with `zeros_reserved`, an initial value
// of zeros is only reserved, its bytes whatever the memory held (for a node table, whose
// host_zeros flag stands for them until the copy is written: writing them would put every page
// of every intermediate's host copy into memory).
Status fill_initial_value(const ir::TensorNode& node, uint64_t seed, HostBytes& bytes, bool zeros_reserved = false);

}  // namespace kiln::runtime
