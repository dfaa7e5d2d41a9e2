// A depthwise convolution (one channel in and out per group: MobileNet's) of f32 tensors on a CPU
// with AVX-512F, read straight from the input rows: each vector of 16 output points of a row
// summed over the taps in registers, each tap's 16 inputs one masked load from the input row (the
// padding's lanes masked to 0; at column stride 2 the even lanes of two loads). Copying each
// channel into its phase planes first (conv_avx512.cc's depthwise, for what this does not run)
// cost more than the taps' sums on the small images of MobileNet's depthwise layers (576
// channels of 14 x 14 at stride 2: 0.10-0.12 ms that way, 0.045 ms this way, ONNX Runtime's
// single node 0.04 ms), and even on 56 x 56 (0.19, 0.18). The channels are spread over the
// device's host threads.
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

}  // namespace kiln::ral::library
