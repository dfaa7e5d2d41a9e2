// The part of the CUDA driver's compiler that needs no GPU: a "cuda-c" source (generated CUDA C,
// without the kernel ABI, which NVRTC's build prepends) becomes a loadable image for one device
// architecture, built by NVRTC and kept in the disk cache.
//
// Image policy, for a device of architecture sm_NN (`arch` = NN):
//   - a cubin for sm_NN when this NVRTC builds that exact architecture (check_cuda_arch): machine
//     code, loaded without a JIT step;
//   - else PTX for compute_MM, MM the newest architecture NVRTC builds that is not above NN: the
//     CUDA driver JIT-compiles PTX forward to any later device (a device newer than NVRTC);
//   - else (the device is older than every architecture NVRTC builds) UNIMPLEMENTED, naming the
//     architectures it builds.
//
// Cache key: SHA-256 over the format tag "kiln-cuda-image-v1", the kernel ABI text, the source,
// nvrtc_options() of the chosen image, NVRTC's version, the chosen architecture and image kind.
// A caller may rely on: equal inputs under one NVRTC give byte-identical images, from the cache or
// not; a warm build does not call NVRTC; an entry that fails DiskCache's checks, or whose payload
// does not look like the image kind it is stored as (a cubin without the ELF magic, PTX without
// ".version" in its opening text), is rebuilt and overwritten, never returned; a cache that
// cannot be read or written only costs a rebuild (logged), never a failed build. NVRTC is needed
// even for a warm build, since its version is part of the key.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "base/disk_cache.h"
#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/base/status.h"

namespace kiln::cuda {

// What to build for one device: the image kind and the architecture it is built for (sm_NN for a
// cubin, compute_NN for PTX).
struct ImageTarget {
  CudaImage kind = CudaImage::kCubin;
  int arch = 0;
};

// The policy above for a device of sm_`device_arch`. UNAVAILABLE without NVRTC; INVALID_ARGUMENT
// for an architecture number outside 1..999.
Result<ImageTarget> choose_image_target(int device_arch);

struct KernelImage {
  std::string bytes;  // cubin (ELF) bytes or PTX text without a terminating NUL
  CudaImage kind = CudaImage::kCubin;
  int arch = 0;       // as in ImageTarget
};

struct ImageBuilderStats {
  uint64_t nvrtc_builds = 0;      // images NVRTC built (successful builds only)
  uint64_t disk_hits = 0;         // images returned from the disk cache
  uint64_t rejected_entries = 0;  // cache payloads that were not an image of their kind
};

// Thread-safe; builds of one key that race may both call NVRTC (the cache's writes are atomic, so
// either result stands).
class ImageBuilder {
 public:
  // A disabled cache (empty directory) builds every time.
  explicit ImageBuilder(DiskCache cache) : cache_(std::move(cache)) {}

  // The image of `source` for a device of sm_`device_arch`. INVALID_ARGUMENT with NVRTC's log
  // when the source does not compile; UNAVAILABLE without NVRTC. `label` names the source in
  // messages.
  Result<KernelImage> build(std::string_view source, int device_arch, std::string_view label);
  ImageBuilderStats stats() const;

 private:
  DiskCache cache_;
  mutable std::mutex mutex_;
  ImageBuilderStats stats_;  // guarded by mutex_
};

// Loads `image` as a module into the current context (the caller has pushed it), with
// cuModuleLoadDataEx: PTX through the driver's JIT, a cubin as it is. A refusal names `what`, the
// image's kind and architecture, NVRTC's and the driver's CUDA versions and the JIT's error log,
// since the usual causes are a PTX version the driver does not know (an NVRTC newer than the
// driver) or an architecture the device cannot run.
Result<CUmodule> load_module(const Api& api, const KernelImage& image, std::string_view what);

}  // namespace kiln::cuda
