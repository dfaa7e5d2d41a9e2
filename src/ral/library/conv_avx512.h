// conv2d of f32 tensors on a CPU with AVX-512F, kiln's own product: no library packs the weights
// again at every call (OpenBLAS's and oneDNN's gemm do, and at batch 1 that reading and writing
// of every weight is much of a network's time). Per image and group, the input points are copied
// once into panels of 32 output points (im2col, laid out as the product reads them), and a
// register tile of 8 output channels by 32 points sums each panel against the weights as they
// are stored; the bias starts the sums and the ReLU is applied as they are written. The panels
// and the output channels are spread over the device's host threads
// (ExecutionContext::host_parallel: the cpu device's workgroup threads).
#pragma once

#include "ral/library/conv_shape.h"

namespace kiln::ral {
class ExecutionContext;
}

namespace kiln::ral::library {

// Whether this processor runs conv_avx512.
bool conv_avx512_supported();

// y = relu?(b + conv(x, w)) for every image and group of `s`. Sums run in order of (channel,
// window row, window column), starting from the bias.
// RESOURCE_EXHAUSTED when the packed columns' buffer cannot be allocated.
Status conv_avx512(const ExecutionContext& context, const ConvShape& s, const float* x, const float* w, const float* b,
                   float* y);

}  // namespace kiln::ral::library
