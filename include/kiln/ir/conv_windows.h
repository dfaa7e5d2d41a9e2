// How many windows conv2d's output has along one dimension (docs/language.md, "Calls"): the
// input's extent with its pads, less the dilated window, over the stride, rounded down, plus 1.
// The parser's checks and the library functions both count through conv_windows.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln::ir {

// nullopt where the dilated window is larger than the padded extent (no window fits) or a
// stride or dilation is below 1. The sum is taken in 128 bits, so no extent overflows.
constexpr std::optional<int64_t> conv_windows(int64_t extent, int64_t pad_begin, int64_t pad_end, int64_t window,
                                              int64_t stride, int64_t dilation) {
  if (stride < 1 || dilation < 1) return std::nullopt;
  const __int128 span = __int128{extent} + pad_begin + pad_end - __int128{dilation} * (window - 1) - 1;
  if (span < 0) return std::nullopt;
  return static_cast<int64_t>(span / stride + 1);
}

}  // namespace kiln::ir
