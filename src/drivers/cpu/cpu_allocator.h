// CPU memory: buffers are host memory, so every memory type is host-addressable; the types are
// still recorded and enforced (a device-local-only buffer cannot be mapped), so that code tested
// on the CPU behaves the same on a discrete device.
#pragma once

#include <cstdint>

#include "kiln/hal/buffer.h"

namespace kiln::cpu {

class CpuAllocator final : public hal::Allocator {
 public:
  CpuAllocator(const void* device_tag, uint64_t max_allocation_size)
      : device_tag_(device_tag), max_allocation_size_(max_allocation_size) {}

  Result<hal::BufferRef> allocate(const hal::BufferParams& params, size_t size) override;
  Result<hal::BufferRef> import_host(const hal::BufferParams& params, void* ptr, size_t size,
                                     hal::HostReleaseFn release) override;

 private:
  const void* device_tag_;
  uint64_t max_allocation_size_;
};

// The host address of byte `offset` of a CPU buffer.
inline uint8_t* host_address(const hal::Buffer& buffer, size_t offset) {
  auto* base = static_cast<uint8_t*>(buffer.storage()->host_pointer());
  return base ? base + buffer.byte_offset() + offset : nullptr;
}

}  // namespace kiln::cpu
