#include "drivers/opencl/cl_allocator.h"

#include <string>

#include "kiln/base/host_memory.h"
#include "kiln/base/log.h"

namespace kiln::opencl {

namespace {

// OpenCL has no zero-sized buffers; an empty allocation still gets a small cl_mem so that every
// buffer has one (no command ever touches its bytes).
constexpr size_t kMinimumBytes = 16;

cl_map_flags map_flags(hal::MapAccess access) {
  if (access == hal::MapAccess::kDiscardWrite) return CL_MAP_WRITE_INVALIDATE_REGION;
  cl_map_flags flags = 0;
  if (static_cast<uint32_t>(access) & static_cast<uint32_t>(hal::MapAccess::kRead)) flags |= CL_MAP_READ;
  if (static_cast<uint32_t>(access) & static_cast<uint32_t>(hal::MapAccess::kWrite)) flags |= CL_MAP_WRITE;
  return flags;
}

}  // namespace

ClStorage::~ClStorage() {
  // Every queue action using the buffer has completed (actions hold their buffers), so the
  // device no longer touches imported host memory once the cl_mem is released.
  if (mem_) context_->api().ReleaseMemObject(mem_);
  if (release_) release_(host_);
}

hal::NativeMemory ClStorage::native_memory() {
  hal::NativeMemory native;
  native.kind = hal::NativeMemory::Kind::kOpenCL;
  native.handle = mem_;
  native.device = static_cast<int32_t>(context_->record().info.ordinal);
  return native;
}

ClStorage::ClMapping* ClStorage::find_mapping(size_t offset, size_t length, cl_map_flags flags,
                                              const void* mapped) {
  for (ClMapping& m : mappings_) {
    if (m.flags == flags && m.offset <= offset && offset + length <= m.offset + m.length &&
        (!mapped || m.host + (offset - m.offset) == mapped)) {
      return &m;
    }
  }
  return nullptr;
}

Status ClStorage::map(size_t offset, size_t length, hal::MapAccess access, void** out) {
  const cl_map_flags flags = map_flags(access);
  std::lock_guard<std::mutex> lock(map_mutex_);
  if (flags == CL_MAP_READ) {
    if (ClMapping* shared = find_mapping(offset, length, flags, nullptr)) {
      ++shared->users;
      *out = shared->host + (offset - shared->offset);
      return Status();
    }
  }
  cl_int err = CL_SUCCESS;
  void* data = context_->api().EnqueueMapBuffer(context_->host_queue(), mem_, CL_TRUE, flags,
                                                offset, length, 0, nullptr, nullptr, &err);
  if (!data || err != CL_SUCCESS) return cl_error("clEnqueueMapBuffer", err, "map");
  mappings_.push_back({offset, length, flags, static_cast<char*>(data), 1});
  *out = data;
  return Status();
}

void ClStorage::unmap(size_t offset, size_t length, hal::MapAccess access, void* mapped) {
  std::lock_guard<std::mutex> lock(map_mutex_);
  ClMapping* m = find_mapping(offset, length, map_flags(access), mapped);
  if (!m) {
    KILN_LOG(kError, "unmap: no mapping of this OpenCL buffer holds the address given");
    return;
  }
  if (--m->users > 0) return;
  const Api& api = context_->api();
  cl_event done = nullptr;
  cl_int err = api.EnqueueUnmapMemObject(context_->host_queue(), mem_, m->host, 0, nullptr, &done);
  // Unmapping is synchronous for the HAL: written bytes are visible to queue work after it.
  if (err == CL_SUCCESS) err = api.WaitForEvents(1, &done);
  if (done) api.ReleaseEvent(done);
  if (err != CL_SUCCESS) KILN_LOG(kError, cl_error("clEnqueueUnmapMemObject", err, "unmap").to_string());
  mappings_.erase(mappings_.begin() + (m - mappings_.data()));
}

Result<hal::BufferRef> ClAllocator::allocate(const hal::BufferParams& params, size_t size) {
  KILN_RETURN_IF_ERROR(hal::check_buffer_params(params));
  const uint64_t max = context_->record().info.capabilities.max_allocation_size;
  if (size > max) {
    return resource_exhausted_error("cannot allocate " + std::to_string(size) + " bytes on " +
                                    context_->record().info.name +
                                    ": CL_DEVICE_MAX_MEM_ALLOC_SIZE is " + std::to_string(max));
  }
  if (context_->record().cpu && size >= kHugePageMinimum) {
    // A CPU device's memory is the host's: large buffers live in huge pages of our own, which
    // PoCL uses in place. With PoCL's own (small) pages a row sum of 16 MiB took 1.4x as long,
    // missing the TLB on every 4 KiB row.
    const size_t rounded = huge_page_bytes(size);
    if (void* host = map_huge_pages(rounded)) {
      cl_int err = CL_SUCCESS;
      cl_mem mem = context_->api().CreateBuffer(context_->context(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                                size, host, &err);
      if (mem && err == CL_SUCCESS) {
        auto storage = std::make_shared<ClStorage>(context_, mem, host,
                                                   [rounded](void* p) { unmap_huge_pages(p, rounded); });
        return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type, params.usage, size,
                                             0, size);
      }
      unmap_huge_pages(host, rounded);  // the runtime's own allocation below says why not
    }
  }
  cl_mem_flags flags = CL_MEM_READ_WRITE;
  // Host-visible memory in host-allocated pages makes mapping cheap on discrete devices.
  if (params.memory_type & hal::kMemoryHostVisible) flags |= CL_MEM_ALLOC_HOST_PTR;
  cl_int err = CL_SUCCESS;
  cl_mem mem = context_->api().CreateBuffer(context_->context(), flags,
                                            std::max(size, kMinimumBytes), nullptr, &err);
  if (!mem || err != CL_SUCCESS) {
    return cl_error("clCreateBuffer", err, "allocating " + std::to_string(size) + " bytes");
  }
  auto storage = std::make_shared<ClStorage>(context_, mem, nullptr, nullptr);
  return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type,
                                       params.usage, size, 0, size);
}

Result<hal::BufferRef> ClAllocator::import_host(const hal::BufferParams& params, void* ptr,
                                                size_t size, hal::HostReleaseFn release) {
  KILN_RETURN_IF_ERROR(hal::check_import_host(params, ptr, size));
  cl_int err = CL_SUCCESS;
  cl_mem mem = size > 0 ? context_->api().CreateBuffer(context_->context(),
                                                        CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                                        size, ptr, &err)
                        : context_->api().CreateBuffer(context_->context(), CL_MEM_READ_WRITE,
                                                       kMinimumBytes, nullptr, &err);
  if (!mem || err != CL_SUCCESS) {
    return cl_error("clCreateBuffer", err, "importing " + std::to_string(size) + " host bytes");
  }
  auto storage = std::make_shared<ClStorage>(context_, mem, ptr, std::move(release));
  return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type,
                                       params.usage, size, 0, size);
}

}  // namespace kiln::opencl
