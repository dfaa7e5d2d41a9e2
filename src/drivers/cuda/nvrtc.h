// NVRTC, NVIDIA's run-time compiler of CUDA C++, loaded with dlopen (libnvrtc.so.13, .12, ...)
// so that kiln builds and runs without it. It turns a "cuda-c" source, behind kiln's CUDA kernel
// ABI (cuda_kernel_abi.h), into PTX or a cubin for one architecture, with no GPU and no CUDA
// driver present: the CUDA driver builds its executables with it, and `kiln compile --target
// cuda:sm_NN` uses it ahead of time.
#pragma once

#include <string>
#include <string_view>

#include "kiln/base/status.h"

namespace kiln::cuda {

// What NVRTC produces: PTX (text, loaded by the driver's JIT for any later device) or a cubin
// (machine code for one architecture).
enum class CudaImage { kPtx, kCubin };

// Whether NVRTC loads here; UNAVAILABLE naming each library tried when it does not.
Status nvrtc_available();
// NVRTC's version, "13.0"; part of every cache key of built kernels.
Result<std::string> nvrtc_version();
// OK when NVRTC can build for sm_`arch` (80 for sm_80); INVALID_ARGUMENT listing the
// architectures it supports when it cannot.
Status check_cuda_arch(int arch);

// The options every build uses: C++17, no fused multiply-add contraction (a*b+c rounds twice,
// as on every other kiln device; kiln writes fma where it means one), IEEE division and sqrt.
std::string nvrtc_options(int arch, CudaImage image);

// Builds `source` (generated CUDA C, without the ABI, which is prepended here) for sm_`arch`.
// The image is PTX text or cubin bytes. INVALID_ARGUMENT with NVRTC's log when the source does
// not compile; `label` names the source in messages.
Result<std::string> nvrtc_compile(std::string_view source, int arch, CudaImage image,
                                  std::string_view label);

}  // namespace kiln::cuda
