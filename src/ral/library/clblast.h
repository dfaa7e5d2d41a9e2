// CLBlast (Debian's libclblast1), loaded at run time like libOpenCL: the gemm that runs on the
// OpenCL device itself, over the buffers' cl_mem. A machine without it still runs gemm on
// opencl, on the host over mapped buffers, unless KILN_OPENCL_GEMM asks for CLBlast.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "ral/library/gemm_shape.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

// Where gemm runs (CLBlast is the library) for `c`, a buffer of an OpenCL device: KILN_OPENCL_GEMM (`clblast` or `host`)
// when set; else CLBlast on a device that is not the host's CPU and CLBlast loads, the host
// otherwise (on a CPU device, such as PoCL's, mapping is free and OpenBLAS is the faster library:
// CLBlast on PoCL runs a 512³ sgemm about 12× slower). INVALID_ARGUMENT naming the variable for
// another value or for a buffer that is not OpenCL memory; UNAVAILABLE saying why when `clblast`
// is asked for and the library cannot be loaded.
Result<GemmPlace> opencl_gemm(const hal::Buffer& c);

// c = alpha * op(a) @ op(b) + beta * c for each of the s.batch products, row-major, on the
// OpenCL device that holds the buffers, through CLBlast (one CLBlastXgemm per product, at the
// product's offsets); returns when all have finished. s.m, s.n, s.k > 0. INVALID_ARGUMENT for a
// buffer that is not OpenCL memory or not aligned to T; CLBlast's or OpenCL's error otherwise
// (naming the code).
template <typename T>
Status clblast_gemm(const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c, const GemmShape& s, T alpha,
                    T beta);

}  // namespace kiln::ral::library
