// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0): the arrays of
// `kiln run --input/--output`. Only little-endian f4, f8 and i4 in C order are accepted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::tools {

struct NpyArray {
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::string data;            // raw little-endian elements, C order
};

// "f32 [3, 4]", the way messages name what a file holds or a tensor expects.
std::string describe(ir::DType dtype, const std::vector<int64_t>& shape);

// Parses the bytes of a .npy file. `name` (the path) appears in every message, which says what
// the file holds when that is the problem: "x.npy: dtype '>f4' (big-endian) is not supported".
Result<NpyArray> parse_npy(std::string_view bytes, std::string_view name);
Result<NpyArray> read_npy(const std::string& path);
std::string format_npy(const NpyArray& array);
Status write_npy(const std::string& path, const NpyArray& array);

}  // namespace kiln::tools
