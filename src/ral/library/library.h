// The built-in library functions, registered per device by register_builtins (ral/builtins.h).
// Tensors of rank 1 to 4; f32, f64 and (for sorting) i32. docs/ral.md lists the signatures.
#pragma once

#include "kiln/base/status.h"
#include "kiln/ral/registry.h"

namespace kiln::ral::library {

// sort, argsort, topk with the standard library's sorts, for "cpu", "opencl" and "cuda" (which
// run them on the host over mapped buffers; docs/ral.md).
Status register_cpu_sorting(Registry& registry);
// The same functions written plainly (a merge sort), for "interp": the reference the others are
// tested against.
Status register_reference_sorting(Registry& registry);
// gemm through OpenBLAS's cblas for "cpu" and, on the host over mapped buffers, "cuda"; CLBlast
// on the device for "opencl"; a plain triple loop for "interp".
Status register_gemm(Registry& registry);
// random_uniform, random_normal: the same numbers on "cpu", "opencl", "cuda" and "interp".
Status register_random(Registry& registry);

}  // namespace kiln::ral::library
