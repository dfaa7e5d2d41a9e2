// The initial value of a node, as host bytes: its initializer (random ones seeded by the node's
// name, so that every device and run agrees) or zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::runtime {

// RESOURCE_EXHAUSTED, naming the node and its byte size, when the host cannot hold the bytes.
Status fill_initial_value(const ir::TensorNode& node, uint64_t seed, std::vector<std::byte>& bytes);

}  // namespace kiln::runtime
