// Transfers between the host and devices and between contexts, scheduled on streams with the
// same per-node synchronization as routines. Each returns at once with whether there was
// anything to move.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/hal/buffer.h"
#include "kiln/runtime/context.h"

namespace kiln::runtime {

// Host copy → the context tree's array of `node`, on the context's stream. The bytes are taken
// when it is scheduled (later host writes do not change what it uploads). false when the array
// already holds the host's data (nothing stale). NOT_FOUND when the tree has no array for it.
Result<bool> from_host(const ContextRef& context, std::string_view node);

// The context tree's array → the host copy, on the context's stream. false when the host copy
// is already current. HostTensor::read waits for it.
Result<bool> to_host(const ContextRef& context, std::string_view node);

// The context tree's array of `node` as host memory, for zero-copy exchange with host code
// (NumPy and DLPack in the Python package): on devices whose memory is host memory (cpu,
// interp) the array itself. Before returning it uploads a newer host copy, waits until no
// scheduled action reads or writes the array, and records the array as newer than the host
// copy, so that HostTensor::read copies back what was written through the view. The bytes stay
// valid while `keep_alive` lives; the caller orders its accesses against later routines (a
// stream's await). UNIMPLEMENTED when the device's memory is not host-addressable; the failure
// of the array's last writer if it failed.
struct HostView {
  std::span<std::byte> bytes;
  std::shared_ptr<void> keep_alive;
  bool bound = false;  // the memory is a caller's, bound as the array (kiln/runtime/bind.h)
};
Result<HostView> host_view(const ContextRef& context, std::string_view node,
                           Timeout timeout = Timeout::infinite());

// The context tree's array of `node` as its driver's own memory, for handing it to another
// library (DLPack in the Python package): host memory on cpu and interp, a cl_mem on OpenCL, a
// CUdeviceptr on CUDA (hal::NativeMemory), the node starting `offset` bytes into it. Ordered as
// host_view is: a newer host copy is uploaded first, it returns once no scheduled action reads or
// writes the array (so the other library may read it on any queue or stream of its own), and the
// array counts as newer than the host copy (the other library may write it; HostTensor::read
// copies back). The other library orders its own work against later routines (a data race
// otherwise, as with a view). The memory stays valid while `keep_alive` lives. UNIMPLEMENTED
// where the driver hands out no form of its memory.
struct DeviceMemory {
  hal::NativeMemory native;
  size_t offset = 0;
  size_t bytes = 0;
  std::shared_ptr<void> keep_alive;
  bool bound = false;  // the memory is a caller's, bound as the array (kiln/runtime/bind.h)
};
Result<DeviceMemory> device_memory(const ContextRef& context, std::string_view node,
                                   Timeout timeout = Timeout::infinite());

enum class MergeMode {
  kNo,         // into dst's own array of the node
  kCopy,       // into dst's stream's merge buffer (grown as needed)
  kStreaming,  // dst's routines read src's array directly (same device); else like kCopy
};

// src's array of `node` → dst (see MergeMode), scheduled on dst's stream after src's last
// writer. Across devices the data is staged through host memory. false when dst and src share
// one array (kNo): nothing to move. NOT_FOUND when either tree lacks the node.
Result<bool> device_to_device(std::string_view node, MergeMode into_merge_buffer,
                              const ContextRef& dst, const ContextRef& src);

}  // namespace kiln::runtime
