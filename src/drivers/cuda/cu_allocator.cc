#include "drivers/cuda/cu_allocator.h"

#include <algorithm>
#include <optional>
#include <string>

#include "kiln/base/log.h"

namespace kiln::cuda {

CuStorage::~CuStorage() {
  // Every queue action using the buffer has completed (actions hold their buffers).
  const Api& api = context_->api();
  ContextScope scope(context_->target());
  if (!scope.status("freeing a buffer").ok()) return;  // no context to free it in: leak, do not crash
  if (host_) {
    if (void* start = context_->host_registrations().release(host_)) api.MemHostUnregister(start);
  } else if (pointer_) {
    if (exported_) {
      Status done = context_->synchronize_all("freeing device memory whose address was exported");
      if (!done.ok() && context_->lost().ok()) KILN_LOG(kWarn, done.to_string());
    }
    context_->free_device(pointer_);
  }
  if (release_) release_(imported_);
}

hal::NativeMemory CuStorage::native_memory() {
  exported_ = true;
  hal::NativeMemory native;
  native.kind = hal::NativeMemory::Kind::kCuda;
  native.device_address = pointer_;
  native.device = static_cast<int32_t>(context_->record().device);
  return native;
}

Status CuStorage::map(size_t offset, size_t length, hal::MapAccess access, void** out) {
  if (host_) {
    *out = static_cast<char*>(host_) + offset;
    return Status();
  }
  auto* staging = new (std::nothrow) char[length > 0 ? length : 1];
  if (!staging) return resource_exhausted_error("cannot map " + std::to_string(length) + " bytes: out of host memory");
  // Unmapping writes the whole range back, so a map for writing reads it first unless the
  // caller discards it: the bytes it does not write keep their values (OpenCL's CL_MAP_WRITE).
  if (access != hal::MapAccess::kDiscardWrite && length > 0) {
    Status copied = context_->copy_to_host(staging, pointer_ + offset, length);
    if (!copied.ok()) {
      delete[] staging;
      return copied;
    }
  }
  *out = staging;
  return Status();
}

void CuStorage::unmap(size_t offset, size_t length, hal::MapAccess access, void* mapped) {
  if (host_) return;
  // Unmapping is synchronous for the HAL: written bytes are visible to queue work after it.
  if (static_cast<uint32_t>(access) & static_cast<uint32_t>(hal::MapAccess::kWrite) && length > 0) {
    Status copied = context_->copy_to_device(pointer_ + offset, mapped, length);
    if (!copied.ok()) KILN_LOG(kError, copied.to_string());
  }
  delete[] static_cast<char*>(mapped);
}

Result<hal::BufferRef> CuAllocator::allocate(const hal::BufferParams& params, size_t size) {
  KILN_RETURN_IF_ERROR(hal::check_buffer_params(params));
  KILN_ASSIGN_OR_RETURN(CUdeviceptr pointer, context_->allocate_device(size, "a buffer"));
  auto storage = std::make_shared<CuStorage>(context_, pointer, nullptr, nullptr, nullptr);
  return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type,
                                       params.usage, size, 0, size);
}

Result<hal::BufferRef> CuAllocator::import_host(const hal::BufferParams& params, void* ptr, size_t size,
                                                hal::HostReleaseFn release) {
  KILN_RETURN_IF_ERROR(hal::check_import_host(params, ptr, size));
  if (size == 0) {
    // Nothing to register: a small device allocation stands for it.
    KILN_ASSIGN_OR_RETURN(CUdeviceptr pointer, context_->allocate_device(0, "an empty import"));
    auto storage = std::make_shared<CuStorage>(context_, pointer, nullptr, ptr, std::move(release));
    return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type, params.usage, 0, 0, 0);
  }
  if (!context_->record().can_map_host_memory) {
    return unimplemented_error(context_->record().info.name + " cannot map host memory, so it cannot import it");
  }
  const Api& api = context_->api();
  ContextScope scope(context_->target());
  KILN_RETURN_IF_ERROR(scope.status("import_host"));
  const std::string where = "importing " + std::to_string(size) + " host bytes";
  auto shared = [&](CUdeviceptr pointer) -> hal::BufferRef {
    auto storage = std::make_shared<CuStorage>(context_, pointer, ptr, ptr, std::move(release));
    return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type, params.usage, size, 0,
                                         size);
  };
  HostRegistrations& registrations = context_->host_registrations();
  if (std::optional<CUdeviceptr> pointer = registrations.share(ptr, size)) return shared(*pointer);
  CUresult result = api.MemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (result == CUDA_SUCCESS) {
    CUdeviceptr pointer = 0;
    result = api.MemHostGetDevicePointer(&pointer, ptr, 0);
    if (result != CUDA_SUCCESS) {
      api.MemHostUnregister(ptr);
      return cu_error("cuMemHostGetDevicePointer_v2", result, where);
    }
    registrations.add(ptr, size, pointer);
    return shared(pointer);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return cu_error("cuMemHostRegister_v2", result, where);
  // Never a silent copy: a device copy would miss the host's later writes and keep the device's
  // from the host. What CUDA refuses is used in place some other way, or refused.
  if (result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    // Another library pinned it: its mapping serves, where it covers the whole range in one piece
    // (the storage then registered nothing, so it unregisters nothing: release() finds no range).
    CUdeviceptr first = 0, last = 0;
    if (api.MemHostGetDevicePointer(&first, ptr, 0) == CUDA_SUCCESS &&
        api.MemHostGetDevicePointer(&last, static_cast<char*>(ptr) + size - 1, 0) == CUDA_SUCCESS &&
        last - first == size - 1) {
      return shared(first);
    }
    return failed_precondition_error(where + ": host memory registered with CUDA outside kiln covers part of it "
                                     "(cuMemHostRegister: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED); import a range "
                                     "that one registration covers whole, or copy it into a buffer");
  }
  // Read-only pages register only read-only: the device may read them in place (a kernel that
  // wrote them would fault, as a CPU that wrote them would).
  const CUresult read_only = api.MemHostRegister(
      ptr, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY);
  if (read_only == CUDA_SUCCESS) {
    CUdeviceptr pointer = 0;
    const CUresult mapped = api.MemHostGetDevicePointer(&pointer, ptr, 0);
    if (mapped != CUDA_SUCCESS) {
      api.MemHostUnregister(ptr);
      return cu_error("cuMemHostGetDevicePointer_v2", mapped, where);
    }
    KILN_LOG(kInfo, where + ": registered read-only (cuMemHostRegister refused it writable: " + error_name(result) + ")");
    registrations.add(ptr, size, pointer);
    return shared(pointer);
  }
  return invalid_argument_error(where + ": CUDA will not register it (cuMemHostRegister: " + error_name(result) +
                                "), so the device cannot use it in place; copy it into a buffer instead");
}

}  // namespace kiln::cuda
