// The CUDA entries of kiln/drivers/drivers.h: ahead-of-time builds with NVRTC alone.
#include "drivers/cuda/nvrtc.h"
#include "kiln/drivers/drivers.h"

namespace kiln::drivers {

Status check_cuda_arch(int arch) { return cuda::check_cuda_arch(arch); }

Result<std::string> compile_cuda_ptx(std::string_view source, int arch, std::string_view label) {
  return cuda::nvrtc_compile(source, arch, cuda::CudaImage::kPtx, label);
}

}  // namespace kiln::drivers
