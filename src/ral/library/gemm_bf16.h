// kiln's own kernels for products of bf16 operands into an f32 or bf16 c, on the device's host
// threads: Intel AMX (the tile registers and TDPBF16PS), and AVX-512 BF16 (VDPBF16PS on zmm
// registers). Both read b packed into pairs of rows, each column's two k values side by side, and
// both treat subnormal operands as zero and flush subnormal sums (as oneDNN's bf16 kernels do,
// onednn.h), adding each pair of products before they add them to the f32 sum: the sums agree
// with f32 arithmetic in program order to within its rounding. Into an f32 c with alpha 1 and
// beta 1 (c += a @ b) the sums start from c's values.
#pragma once

#include <cstdint>

#include "kiln/base/status.h"
#include "kiln/ral/element_types.h"
#include "ral/library/gemm_shape.h"

namespace kiln::ral {
class ExecutionContext;
}

namespace kiln::ral::library {

enum class Bf16Kernel {
  kNone,
  kAmx,     // AMX-BF16: 32 x 32 blocks of c in four tiles
  kAvx512,  // AVX-512 BF16: 14 x 32 blocks of c in 28 zmm registers
};
const char* bf16_kernel_name(Bf16Kernel kernel);

// Whether this process can run `kernel`: the CPU has its instructions and the kernel (Linux) saves
// their registers; for AMX, it also granted this process the tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once). kNone: false.
bool bf16_kernel_runs(Bf16Kernel kernel);

// The kernel bf16 products run on here: AMX where it runs; else AVX-512 BF16 on AMD's CPUs, whose
// VDPBF16PS issues twice the arithmetic of an f32 FMA a cycle (Zen 4: 234 against 117 GFLOPS a
// core, 2026-12-01), but not on Intel's, where it issues half (85 against 170 on a Sapphire
// Rapids without AMX, 2026-11-30) and f32 products over widened copies are faster; else kNone.
// Fixed for the process: one machine computes every product the same way.
Bf16Kernel bf16_kernel();

// c = alpha * op(a) @ op(b) + beta * c for one product of `s` (s.batch is not read) on `kernel`,
// which must run here: a and b bf16 (their bits), row-major as GemmShape says, c f32 (beta 0
// ignores c's values, as BLAS does). Spread over `context`'s host threads when the product is
// large (context may be null: the calling thread alone). RESOURCE_EXHAUSTED when the packed copy
// of b or of a's rows cannot be allocated.
Status gemm_bf16(Bf16Kernel kernel, const ExecutionContext* context, const GemmShape& s, const uint16_t* a,
                 const uint16_t* b, float* c, float alpha, float beta);
// The same into a bf16 c: each element's f32 value rounded once, to nearest even (narrow_floats.h).
Status gemm_bf16(Bf16Kernel kernel, const ExecutionContext* context, const GemmShape& s, const uint16_t* a,
                 const uint16_t* b, BFloat16* c, float alpha, float beta);

}  // namespace kiln::ral::library
