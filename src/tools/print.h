// How the command line prints what it computed: tensors (`kiln run --print`) and times
// (`--repeat`).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "kiln/ir/program.h"

namespace kiln::tools {

// A tensor of `node`'s type and shape held in `bytes`, on standard output: every value when there
// are at most 64 (a row per line), else the first 8 and the minimum, maximum and mean. NaN prints
// as `nan`, and no line ends in a space.
void print_tensor(const ir::TensorNode& node, std::span<const std::byte> bytes);

// A time in milliseconds as `kiln run --repeat` prints it: at least three significant digits,
// never an exponent (0.000812, not 0.001 or 8.12e-04).
std::string milliseconds_text(double ms);

}  // namespace kiln::tools
