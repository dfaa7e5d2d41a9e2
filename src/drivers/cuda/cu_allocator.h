// CUDA memory: one device allocation per buffer (CuContext::allocate_device: in stream order where
// the device has memory pools), or imported host memory that is
// page-locked and mapped into the device's address space (cuMemHostRegister with DEVICEMAP), so
// that kernels and copies use it in place; memory already imported shares its registration
// (cu_host_registrations.h), memory another library registered shares that library's mapping,
// read-only pages are registered read-only, and memory CUDA will not register otherwise is
// refused: never a device copy, which later host writes would not reach. Subspans are (pointer, byte offset) pairs, as on
// OpenCL. Mapping device memory copies the range into host memory and back (on the context's
// mapping stream, synchronously); mapping imported memory is the memory itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "drivers/cuda/cu_context.h"
#include "kiln/hal/buffer.h"

namespace kiln::cuda {

class CuStorage final : public hal::BufferStorage {
 public:
  // `host`: the imported host memory behind `pointer` (registered), else null, and then
  // `pointer` is a device allocation. `release(imported)` runs when the storage goes, if set.
  CuStorage(std::shared_ptr<CuContext> context, CUdeviceptr pointer, void* host, void* imported,
            hal::HostReleaseFn release)
      : context_(std::move(context)), pointer_(pointer), host_(host), imported_(imported), release_(std::move(release)) {}
  ~CuStorage() override;

  void* host_pointer() override { return host_; }
  // The device address (for imported host memory, where the device sees it), on the CUDA device.
  // The address leaves kiln (DLPack, another library): from then on, freeing the memory first
  // waits for every stream of the context (CuContext::synchronize_all), since a consumer's work
  // queued on a stream of its own may still read it when the pool would hand it out again.
  hal::NativeMemory native_memory() override;
  Status map(size_t offset, size_t length, hal::MapAccess access, void** out) override;
  void unmap(size_t offset, size_t length, hal::MapAccess access, void* mapped) override;
  // The device address of byte 0.
  CUdeviceptr pointer() const { return pointer_; }
  const std::shared_ptr<CuContext>& context() const { return context_; }

 private:
  std::shared_ptr<CuContext> context_;
  CUdeviceptr pointer_;
  void* host_;
  void* imported_;  // what import_host was given (also for an empty import, which has no host_)
  hal::HostReleaseFn release_;
  std::atomic<bool> exported_{false};  // native_memory() was asked for
};

// The storage of `buffer` if it is CUDA memory, else null (for callers holding a buffer of an
// unknown device, such as the RAL's device-memory functions).
inline const CuStorage* cu_storage(const hal::Buffer& buffer) {
  return dynamic_cast<const CuStorage*>(buffer.storage().get());
}

// The device address of byte 0 of `buffer` (validation has checked its device).
inline CUdeviceptr buffer_pointer(const hal::Buffer& buffer) {
  return static_cast<const CuStorage*>(buffer.storage().get())->pointer() + buffer.byte_offset();
}

class CuAllocator final : public hal::Allocator {
 public:
  CuAllocator(std::shared_ptr<CuContext> context, const void* device_tag)
      : context_(std::move(context)), device_tag_(device_tag) {}

  // RESOURCE_EXHAUSTED when the device is out of memory (the size and the device named).
  Result<hal::BufferRef> allocate(const hal::BufferParams& params, size_t size) override;
  // UNIMPLEMENTED on a device that cannot map host memory. Memory another library registered is
  // used through its mapping where one registration covers all of it (else FAILED_PRECONDITION);
  // read-only pages are registered read-only; memory CUDA will not register otherwise is
  // INVALID_ARGUMENT naming CUDA's reason. Never a copy.
  Result<hal::BufferRef> import_host(const hal::BufferParams& params, void* ptr, size_t size,
                                     hal::HostReleaseFn release) override;

 private:
  std::shared_ptr<CuContext> context_;
  const void* device_tag_;
};

}  // namespace kiln::cuda
