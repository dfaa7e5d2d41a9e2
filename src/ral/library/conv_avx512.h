// conv2d of f32 tensors on a CPU with AVX-512F, kiln's own product: no library packs the weights
// again at every call (OpenBLAS's and oneDNN's gemm do, and at batch 1 that reading and writing
// of every weight is much of a network's time). Per image and group, the input is copied once
// into phase planes (the padded input, split by the strides), and a register tile of 12 output
// channels by 32 points sums 32 consecutive points of the planes against the weights as they are
// stored; the bias starts the sums, and a residual z and the ReLU are applied as they are
// written. A depthwise convolution (one channel in and out per group) sums each channel's taps
// in registers, reading the input rows themselves at column strides 1 and 2 (conv_depthwise.h).
// The points and the output channels are spread over the device's host threads
// (ExecutionContext::host_parallel: the cpu device's workgroup threads).
#pragma once

#include "ral/library/conv_shape.h"

namespace kiln::ral {
class ExecutionContext;
}

namespace kiln::ral::library {

// Whether this processor runs conv_avx512.
bool conv_avx512_supported();

// y = relu?(b + conv(x, w) + z?) for every image and group of `s`, z (y's shape) optional. Sums
// run in order of (channel, window row, window column), starting from the bias; z is added to
// the finished sum. With w's output channel last or in blocks of 16 (ConvShape::layout) the tiles
// run along output channels instead of points (conv_channel_tiles.h); blocks need each group's
// output channels to start a block (groups of a multiple of 16, or one group). A depthwise
// convolution must come with w as [O, 1, KH, KW] (INVALID_ARGUMENT otherwise: conv.cc turns such
// weights back first). RESOURCE_EXHAUSTED when a scratch buffer cannot be allocated.
Status conv_avx512(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w, const float* b,
                   const float* z, float* y);

// conv2d_blocked's convolution (z and y in blocks of 16 channels: [N, ceil(O/16), OH, OW, 16]; x
// so too where x_blocked, else NCHW), one group, w in blocks of 16 output channels: the tiles
// along output channels over x's phase planes, each point's input broadcast and each tile's sums
// stored as they lie (no transpose). A depthwise convolution with x in blocks sums each point's
// 16 channels in a vector over the taps instead. x's lanes past C are not read; y's past O are
// written 0. INVALID_ARGUMENT for other groups or another weight layout (conv.cc runs those
// through NCHW).
Status conv_avx512_blocked(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                           const float* b, const float* z, float* y, bool x_blocked);

}  // namespace kiln::ral::library
