// conv2d's product with w's output channel last (WeightLayout::kOutputLast: w is [C/groups, KH, KW,
// O]) or in blocks of 16 output channels (kOutputBlocks), on a CPU with AVX-512F: register tiles
// along output channels, each point's input broadcast, so that small images (7 x 7, 14 x 14) lose
// no lanes to junk points or short panels.
#pragma once

#include <cstdint>

#include "kiln/base/status.h"
#include "ral/library/conv_shape.h"
#include "ral/library/host_threads.h"

namespace kiln::ral::library {

// One image's group: y's rows (stride OH · OW) = activation(bias + the product + z?), z (when
// given) laid out as y, the sum over rows k of the product in order from the bias. Point (i, j)
// reads row k at in[offsets[k] + i · width + j] (the phase planes of conv_planes.h, or the input
// itself); w is the group's first output channel in rows of ldw (O) weights, or in blocks
// (s.layout) the group's first block, which must start at an output channel that is a multiple
// of 16. `in_blocks`: the input is in blocks of 16 channels (conv2d_blocked), point (i, j) reading
// row k at in[offsets[k] + (i · width + j) · 16]. `out_blocks`: y and z are in blocks,
// [ceil(O/16), OH · OW, 16], the lanes past O written 0. RESOURCE_EXHAUSTED when a scratch buffer
// cannot be allocated. The parts are spread over `threads`.
Status channel_products(const HostThreads& threads, const ConvShape& s, const float* in, int64_t width,
                        const int64_t* offsets, const float* w, int64_t ldw, const float* bias, float* y,
                        const float* z, bool in_blocks = false, bool out_blocks = false);

}  // namespace kiln::ral::library
