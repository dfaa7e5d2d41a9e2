// Products of bf16 operands into an f32 or bf16 c on Intel AMX (the tile registers and TDPBF16PS), on the
// device's host threads. Like oneDNN's AMX kernels (onednn.h), TDPBF16PS treats subnormal
// operands as zero and flushes subnormal sums, and adds each pair of products before it adds them
// to the f32 sum: the sums agree with f32 arithmetic in program order to within its rounding.
#pragma once

#include <cstdint>

#include "kiln/base/status.h"
#include "kiln/ral/element_types.h"
#include "ral/library/gemm_shape.h"

namespace kiln::ral {
class ExecutionContext;
}

namespace kiln::ral::library {

// Whether this process can run amx_gemm_bf16: the CPU has AMX-BF16, the kernel enables the tile
// state, and it granted this process the state's memory (arch_prctl ARCH_REQ_XCOMP_PERM, asked
// once). False elsewhere, including every CPU without AMX.
bool amx_bf16_ready();

// c = alpha * op(a) @ op(b) + beta * c for one product of `s` (s.batch is not read): a and b
// bf16 (their bits), row-major as GemmShape says, c f32 (beta 0 ignores c's values, as BLAS
// does). Spread over `context`'s host threads when the product is large (context may be null:
// the calling thread alone). Only where amx_bf16_ready(); RESOURCE_EXHAUSTED when the packed
// copy of b cannot be allocated.
Status amx_gemm_bf16(const ExecutionContext* context, const GemmShape& s, const uint16_t* a, const uint16_t* b,
                     float* c, float alpha, float beta);
// The same into a bf16 c: each element's f32 value rounded once, to nearest even (narrow_floats.h).
Status amx_gemm_bf16(const ExecutionContext* context, const GemmShape& s, const uint16_t* a, const uint16_t* b,
                     BFloat16* c, float alpha, float beta);

}  // namespace kiln::ral::library
