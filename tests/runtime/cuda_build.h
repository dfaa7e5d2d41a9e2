// Building generated CUDA C without a GPU, for the tests: NVRTC (as the CUDA driver loads it)
// to PTX for sm_80 and sm_90, then ptxas to machine code, where the CUDA toolkit is present.
#pragma once

#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/loop/loop.h"

namespace kiln::e2e {

// The architectures generated kernels are built for: the H200's first (the device check runs
// there), then the A100's. Sanitizer builds build for the H200's alone: what they check is kiln's
// own code (the emitter, the NVRTC calls), which a second architecture does not exercise further,
// and NVRTC inside a sanitized process is slow.
#ifdef KILN_SANITIZED
inline constexpr int kCudaTestArchs[] = {90};
#else
inline constexpr int kCudaTestArchs[] = {90, 80};
#endif

// Of the programs a test of many builds, every kCudaBuildEvery-th goes through NVRTC and ptxas;
// the others' CUDA C is generated only. Sanitizer builds check kiln's code, the emitter, on every
// program, and sample the uninstrumented compiler, which takes most of the time. Of those built,
// every kCudaEveryArchEvery-th is built for every architecture, the others for the first: an
// sm_90-only construct shows in many programs, and NVRTC is most of the plain tests' time.
#ifdef KILN_SANITIZED
inline constexpr int kCudaBuildEvery = 4;
#else
inline constexpr int kCudaBuildEvery = 1;
#endif
inline constexpr int kCudaEveryArchEvery = 4;

// OK when NVRTC loads and ptxas is found (on PATH, or where CMake found the toolkit); else why
// not, for a skip message.
Status cuda_toolchain_available();

// The CUDA C that the cuda device's compiler gets for `lowered`.
Result<std::string> cuda_source_of(const ir::LoweredProgram& lowered);

// Generates the CUDA C of `lowered`, builds it with NVRTC for each of kCudaTestArchs (the first
// only, unless `every_arch`) and assembles the PTX with ptxas, warnings as errors. The error
// names the step and the architecture, with the log and the source.
Status check_cuda_builds(const ir::LoweredProgram& lowered, std::string_view label, bool every_arch = true);

// The same for CUDA C source as the driver's compiler takes it ("cuda-c": without the kernel
// ABI, which the build prepends), such as the library kernels.
Status check_cuda_source_builds(const std::string& source, std::string_view label, bool every_arch = true);

}  // namespace kiln::e2e
