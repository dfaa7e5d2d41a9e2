// OpenCL memory: one cl_mem per allocation. Subspans are (cl_mem, byte offset) pairs: the queue
// passes the offset to copies and to kernels (as an argument), so no sub-buffer alignment rules
// apply. Host mapping is a blocking clEnqueueMapBuffer on the context's host queue, one map or
// unmap of a cl_mem at a time, and mappings for reading share one OpenCL mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "drivers/opencl/cl_context.h"
#include "kiln/hal/buffer.h"

namespace kiln::opencl {

class ClStorage final : public hal::BufferStorage {
 public:
  ClStorage(std::shared_ptr<ClContext> context, cl_mem mem, void* host, hal::HostReleaseFn release)
      : context_(std::move(context)), mem_(mem), host_(host), release_(std::move(release)) {}
  ~ClStorage() override;

  // Safe from any number of threads at once (two streams' library calls map a shared parameter
  // together). OpenCL ends a mapping by its host address alone, and PoCL gives every mapping of
  // a cl_mem the same address: an unmap could end another thread's mapping while that thread's
  // clEnqueueMapBuffer was still waiting for the host queue, which then returned an address
  // read from the freed record (a crash in the gemm over mapped buffers). So each cl_mem is
  // mapped and unmapped by one thread at a time, and a mapping for reading inside a range
  // already mapped for reading shares that mapping, counted, unmapped when its last user ends.
  // Mappings that write are never shared: unmapping one still makes its bytes visible at once.
  Status map(size_t offset, size_t length, hal::MapAccess access, void** out) override;
  void unmap(size_t offset, size_t length, hal::MapAccess access, void* mapped) override;
  // The cl_mem, on the device of kiln's ordinal (imported host memory too: kernels use the cl_mem).
  hal::NativeMemory native_memory() override;
  cl_mem mem() const { return mem_; }
  const std::shared_ptr<ClContext>& context() const { return context_; }

 private:
  // One clEnqueueMapBuffer's mapping of [offset, offset + length) at `host`, and how many
  // hal::Mappings use it.
  struct ClMapping {
    size_t offset, length;
    cl_map_flags flags;
    char* host;
    size_t users;
  };
  // The mapping holding `mapped` for [offset, offset + length) with `flags`, or null.
  ClMapping* find_mapping(size_t offset, size_t length, cl_map_flags flags, const void* mapped);

  std::shared_ptr<ClContext> context_;
  cl_mem mem_;
  void* host_;                  // imported host memory, else null
  hal::HostReleaseFn release_;  // for imported memory
  std::mutex map_mutex_;        // held through each OpenCL map and unmap of mem_
  std::vector<ClMapping> mappings_;  // guarded by map_mutex_
};

// The cl_mem behind a buffer of an OpenCL device (validation has checked the device).
inline cl_mem buffer_mem(const hal::Buffer& buffer) {
  return static_cast<ClStorage*>(buffer.storage().get())->mem();
}

// The storage of `buffer` if it is OpenCL memory, else null (for callers that hold a buffer of
// an unknown device: the RAL's device-memory functions).
inline const ClStorage* cl_storage(const hal::Buffer& buffer) {
  return dynamic_cast<const ClStorage*>(buffer.storage().get());
}

class ClAllocator final : public hal::Allocator {
 public:
  ClAllocator(std::shared_ptr<ClContext> context, const void* device_tag)
      : context_(std::move(context)), device_tag_(device_tag) {}

  // Sizes above CL_DEVICE_MAX_MEM_ALLOC_SIZE are RESOURCE_EXHAUSTED without calling OpenCL.
  Result<hal::BufferRef> allocate(const hal::BufferParams& params, size_t size) override;
  Result<hal::BufferRef> import_host(const hal::BufferParams& params, void* ptr, size_t size,
                                     hal::HostReleaseFn release) override;

 private:
  std::shared_ptr<ClContext> context_;
  const void* device_tag_;
};

}  // namespace kiln::opencl
