#include "kiln/ral/library_versions.h"

#include "drivers/cuda/nvrtc.h"
#include "ral/library/cublas.h"

namespace kiln::ral {

std::vector<std::string> library_versions(const std::string& driver) {
  if (driver != "cuda") return {};
  std::vector<std::string> out;
  Result<std::string> nvrtc = cuda::nvrtc_version();
  out.push_back(nvrtc.ok() ? "NVRTC " + *nvrtc : "NVRTC: " + nvrtc.status().message());
  const library::Cublas& blas = library::cublas();
  out.push_back(blas.status.ok() ? "cuBLAS " + blas.version : "cuBLAS: " + blas.status.message());
  return out;
}

}  // namespace kiln::ral
