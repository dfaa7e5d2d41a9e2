#include "drivers/cuda/cu_image_builder.h"

#include <optional>

#include "base/sha256.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "kiln/base/log.h"

namespace kiln::cuda {

namespace {

// Also the cache entry's suffix, so that a directory listing says what each entry holds.
const char* kind_name(CudaImage kind) { return kind == CudaImage::kPtx ? "ptx" : "cubin"; }

// Where NVRTC's PTX names its version: after a few comment lines of compiler identification.
constexpr size_t kPtxHeadBytes = 4096;

// Whether a payload the cache verified is plausibly an image of `kind`. The cache's checksum only
// proves that the entry is what was stored under this key; this catches an entry stored by a
// faulty writer (or an older kiln) under the right key with the wrong contents, which the CUDA
// driver would otherwise reject at module load, far from the cause.
bool looks_like(CudaImage kind, std::string_view bytes) {
  if (kind == CudaImage::kCubin) return bytes.substr(0, 4) == std::string_view("\x7f" "ELF", 4);
  const std::string_view head = bytes.substr(0, kPtxHeadBytes);
  const size_t version = head.find(".version");
  return version != std::string_view::npos &&
         head.substr(0, version).find('\0') == std::string_view::npos;
}

}  // namespace

Result<ImageTarget> choose_image_target(int device_arch) {
  // Bounds the downward search below; real architectures are two or three digits.
  if (device_arch < 1 || device_arch > 999) {
    return invalid_argument_error("not a CUDA architecture: sm_" + std::to_string(device_arch));
  }
  ImageTarget target;
  const Status exact = check_cuda_arch(device_arch);
  if (exact.ok()) {
    target.kind = CudaImage::kCubin;
    target.arch = device_arch;
    return target;
  }
  // NVRTC missing (UNAVAILABLE) is not a matter of architecture.
  if (exact.code() != StatusCode::kInvalidArgument) return exact;
  for (int arch = device_arch - 1; arch > 0; --arch) {
    if (check_cuda_arch(arch).ok()) {
      target.kind = CudaImage::kPtx;
      target.arch = arch;
      return target;
    }
  }
  return unimplemented_error("no kernel image for sm_" + std::to_string(device_arch) +
                             ", which is older than every architecture NVRTC builds (" +
                             exact.message() + ")");
}

ImageBuilderStats ImageBuilder::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

Result<KernelImage> ImageBuilder::build(std::string_view source, int device_arch,
                                        std::string_view label) {
  KILN_ASSIGN_OR_RETURN(const ImageTarget target, choose_image_target(device_arch));
  KILN_ASSIGN_OR_RETURN(const std::string version, nvrtc_version());
  const char* kind = kind_name(target.kind);
  Sha256 hasher;
  hasher.update_field("kiln-cuda-image-v1");
  hasher.update_field(kKernelAbiText);  // NVRTC builds the ABI with the source
  hasher.update_field(source);
  hasher.update_field(nvrtc_options(target.arch, target.kind));
  hasher.update_field(version);
  hasher.update_field(std::to_string(target.arch));
  hasher.update_field(kind);
  const std::string key = hasher.hex_digest();

  KernelImage image;
  image.kind = target.kind;
  image.arch = target.arch;
  if (cache_.enabled()) {
    Result<std::optional<std::string>> hit = cache_.load(key, kind);
    if (!hit.ok()) {
      KILN_LOG(kWarn, "CUDA image cache lookup failed, rebuilding: " + hit.status().to_string());
    } else if (hit->has_value() && looks_like(target.kind, **hit)) {
      image.bytes = std::move(**hit);
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.disk_hits;
      return image;
    } else if (hit->has_value()) {
      // Rebuilt below, and the store replaces the entry.
      KILN_LOG(kWarn, "cached CUDA image " + cache_.entry_path(key, kind) + " is not a valid " +
                          kind + " image; rebuilding it");
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.rejected_entries;
    }
  }
  KILN_ASSIGN_OR_RETURN(image.bytes, nvrtc_compile(source, target.arch, target.kind, label));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.nvrtc_builds;
  }
  if (cache_.enabled()) {
    if (Result<std::string> stored = cache_.store(key, kind, image.bytes); !stored.ok()) {
      KILN_LOG(kWarn, "cannot store the CUDA image: " + stored.status().to_string());
    }
  }
  return image;
}

Result<CUmodule> load_module(const Api& api, const KernelImage& image, std::string_view what) {
  std::string bytes = image.bytes;
  if (image.kind == CudaImage::kPtx) bytes.push_back('\0');  // the JIT reads PTX up to its NUL
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(uintptr_t{sizeof log - 1})};
  CUmodule module = nullptr;
  const CUresult result = api.ModuleLoadDataEx(&module, bytes.data(), 2, options, values);
  if (result == CUDA_SUCCESS) return module;
  Result<std::string> nvrtc = nvrtc_version();
  Result<int> driver = driver_version();
  std::string context = std::string(what) + " (" + kind_name(image.kind) + " for " +
                        (image.kind == CudaImage::kPtx ? "compute_" : "sm_") + std::to_string(image.arch) +
                        " from NVRTC " + (nvrtc.ok() ? *nvrtc : std::string("?")) + ", CUDA driver " +
                        (driver.ok() ? cuda_version_text(*driver) : std::string("?")) + ")";
  Status status = cu_error("cuModuleLoadDataEx", result, context);
  if (log[0] != '\0') status = Status(status.code(), status.message() + ": " + log);
  return status;
}

}  // namespace kiln::cuda
