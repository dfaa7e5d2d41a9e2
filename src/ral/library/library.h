// The built-in library functions, registered per device by register_builtins (ral/builtins.h).
// Tensors of rank 1 to 4; f32, f64 and (for sorting) i32. docs/ral.md lists the signatures.
#pragma once

#include "kiln/base/status.h"
#include "kiln/ral/registry.h"

namespace kiln::ral::library {

// sort, argsort, topk with the standard library's sorts, for "cpu" and "opencl" (which runs
// them on the host over mapped buffers; docs/ral.md).
Status register_cpu_sorting(Registry& registry);
// The same functions written plainly (a merge sort), for "interp": the reference the others are
// tested against.
Status register_reference_sorting(Registry& registry);
// gemm through OpenBLAS's cblas for "cpu"; CLBlast on the device for "opencl" and cuBLAS for
// "cuda" (each with OpenBLAS over mapped buffers as the fallback); a plain triple loop for
// "interp".
Status register_gemm(Registry& registry);
// conv2d over NCHW f32 and f64 tensors: im2col and a gemm (oneDNN, OpenBLAS) for "cpu" (and over mapped
// buffers for "opencl" and "cuda"), the direct loops for "interp" (conv.cc).
Status register_conv(Registry& registry);
// gemm of bf16/f16 operands into f32 or their own type, and of i8 into i32, and qgemm
// (gemm_narrow.cc).
Status register_narrow_gemm(Registry& registry);
// random_uniform, random_normal: the same numbers on "cpu", "opencl" and "interp".
Status register_random(Registry& registry);
// allreduce, allgather, reduce_scatter, broadcast, rank and world_size through the process's
// World (kiln/ral/world.h), for "cpu", "interp" and "opencl" (over mapped host memory).
Status register_collectives(Registry& registry);
// sort, argsort, topk, random_uniform and random_normal for "cuda", as kernels on the device
// (cuda_library.h).
Status register_cuda_library(Registry& registry);

}  // namespace kiln::ral::library
