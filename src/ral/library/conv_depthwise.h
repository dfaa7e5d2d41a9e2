// A depthwise convolution (one channel in and out per group: MobileNet's) of f32 tensors on a CPU
// with AVX-512F, read straight from the input rows: each vector of 16 output points of a row
// summed over the taps in registers, each tap's 16 inputs one masked load from the input row (the
// padding's lanes masked to 0; at column stride 2 the even lanes of two loads). Copying each
// channel into its phase planes first (conv_avx512.cc's depthwise, for what this does not run)
// cost more than the taps' sums on the small images of MobileNet's depthwise layers (576
// channels of 14 x 14 at stride 2: 0.10-0.12 ms that way, 0.045 ms this way, ONNX Runtime's
// single node 0.04 ms), and even on 56 x 56 (0.19, 0.18). The channels are spread over the
// device's host threads. Also the depthwise convolutions over data in blocks of 16 channels
// (conv2d_blocked), each point's 16 channels one vector.
#pragma once

#include "kiln/base/status.h"
#include "ral/library/conv_shape.h"

namespace kiln::ral {
class ExecutionContext;
}

namespace kiln::ral::library {

// Whether depthwise_direct runs this depthwise convolution: columns at stride 1 or 2, no dilation.
bool reads_depthwise_directly(const ConvShape& s);

// y = activation(b + the taps' sum + z?) for every image and channel of a depthwise convolution
// that reads_depthwise_directly, w as [O, 1, KH, KW], z (y's shape) optional. Each sum runs over
// its taps in order (window row, then column) from the bias; z is added to the finished sum.
Status depthwise_direct(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                        const float* bias, const float* z, float* y);

// y = activation(b + the taps' sum + z?) of a depthwise convolution (a group per channel, one
// output each) over data in blocks of 16 channels (conv2d_blocked): x [N, ceil(C/16), H, W, 16],
// z (optional) and y [N, ceil(C/16), OH, OW, 16], w in blocks ([ceil(C/16), 1, KH, 16 · KW]: a
// tap's 16 weights consecutive); x's lanes past C are not read, y's are written 0. Per image and
// block (spread over the device's threads), each output row in tiles of up to 8 points. On rows
// of 28 points or more the tiles read the block where it is, over the taps whose input rows are
// inside the image, and the points at a row's ends, whose taps reach into the columns of padding,
// go one at a time over the taps inside: phase planes (a padded copy of each block) cost
// MobileNet-V2 8% of its time at batch 1 in the copy alone, and a 3x3 at stride 2 over 112 x 112
// took 2.3x the time with them. On shorter rows those lone points cost more than the copy, which
// stays in the L1 cache: the tiles read the block's phase planes. RESOURCE_EXHAUSTED when the
// planes cannot be allocated.
Status depthwise_blocked(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w,
                         const float* b, const float* z, float* y);

}  // namespace kiln::ral::library
