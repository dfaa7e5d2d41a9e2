// Buffer: a range of device memory. Subspans share the allocation of their parent.
//
// A caller may rely on: offsets and lengths out of range are INVALID_ARGUMENT, never a crash;
// zero-length buffers and ranges are valid; mapping needs host-visible memory and MAPPING usage;
// the allocation lives until the last buffer (or subspan, or queue action) that uses it is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kiln/base/status.h"

namespace kiln::hal {

// Where memory lives and how the host sees it (bits).
enum MemoryType : uint32_t {
  kMemoryDeviceLocal = 1u << 0,
  kMemoryHostVisible = 1u << 1,
  kMemoryHostCoherent = 1u << 2,
  kMemoryHostCached = 1u << 3,
};

// What a buffer may be used for (bits); checked by every queue operation and by map().
enum BufferUsage : uint32_t {
  kUsageTransferSource = 1u << 0,
  kUsageTransferTarget = 1u << 1,
  kUsageDispatchStorage = 1u << 2,
  kUsageMapping = 1u << 3,
  kUsageTransfer = kUsageTransferSource | kUsageTransferTarget,
  kUsageDefault = kUsageTransfer | kUsageDispatchStorage | kUsageMapping,
};

std::string memory_type_string(uint32_t type);
std::string buffer_usage_string(uint32_t usage);

enum class MapAccess : uint32_t { kRead = 1, kWrite = 2, kReadWrite = 3, kDiscardWrite = 6 };

// An allocation in its driver's own terms, for handing it to other libraries (DLPack).
struct NativeMemory {
  enum class Kind : uint8_t {
    kNone,    // the driver has no form of it to hand out
    kHost,    // host memory: `host` is byte 0
    kOpenCL,  // an OpenCL buffer: `handle` is its cl_mem
    kCuda,    // CUDA device memory: `device_address` is byte 0's CUdeviceptr
  };
  Kind kind = Kind::kNone;
  void* host = nullptr;
  void* handle = nullptr;
  uint64_t device_address = 0;
  // The device among its platform's: the CUDA device number; for OpenCL, kiln's ordinal of the
  // device ("opencl:N"); 0 for host memory.
  int32_t device = 0;
};

// The memory behind one allocation; implemented by each driver.
class BufferStorage {
 public:
  virtual ~BufferStorage() = default;
  // Host address of byte 0 when the memory is host-addressable (the CPU driver), else nullptr.
  virtual void* host_pointer() { return nullptr; }
  // The allocation as its driver names it; by default host memory where host_pointer() is set.
  virtual NativeMemory native_memory();
  // Whether the allocator returned the memory holding zeros (fresh pages from the kernel): the
  // owner of a new buffer that nothing has written may skip filling it with zeros.
  virtual bool zeroed_when_allocated() const { return false; }
  // Makes [offset, offset + length) of device memory visible to the host at *out.
  virtual Status map(size_t offset, size_t length, MapAccess access, void** out) = 0;
  // Ends a mapping; written bytes become visible to the device.
  virtual void unmap(size_t offset, size_t length, MapAccess access, void* mapped) = 0;
};

class Buffer;
using BufferRef = std::shared_ptr<Buffer>;

// A mapped range; unmaps when destroyed.
class Mapping {
 public:
  Mapping() = default;
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  ~Mapping();
  std::span<std::byte> bytes() const { return {static_cast<std::byte*>(data_), length_}; }
  void* data() const { return data_; }
  size_t size() const { return length_; }

 private:
  friend class Buffer;
  std::shared_ptr<BufferStorage> storage_;
  size_t offset_ = 0, length_ = 0;
  MapAccess access_ = MapAccess::kRead;
  void* data_ = nullptr;
};

class Buffer {
 public:
  Buffer(std::shared_ptr<BufferStorage> storage, const void* device_tag, uint32_t memory_type,
         uint32_t usage, size_t allocation_size, size_t offset, size_t length);

  size_t byte_length() const { return length_; }
  // Offset of this buffer inside its allocation.
  size_t byte_offset() const { return offset_; }
  size_t allocation_size() const { return allocation_size_; }
  uint32_t memory_type() const { return memory_type_; }
  uint32_t usage() const { return usage_; }
  // Identifies the device that allocated the memory; queues refuse buffers of other devices.
  const void* device_tag() const { return device_tag_; }
  const std::shared_ptr<BufferStorage>& storage() const { return storage_; }

  // A view of [offset, offset + length) of this buffer. kWholeBuffer length: to the end.
  static constexpr size_t kWholeBuffer = ~size_t{0};
  Result<BufferRef> subspan(size_t offset, size_t length) const;
  // Resolves kWholeBuffer and checks [offset, offset + length) against this buffer.
  Result<size_t> check_range(size_t offset, size_t length, const char* what) const;

  // Whether this buffer and `other` share a byte of one allocation (views of one buffer that do
  // not overlap do not: a routine's intermediates may be such views, ir::LoweredRoutine::shared).
  bool overlaps(const Buffer& other) const {
    return storage_ == other.storage_ && offset_ < other.offset_ + other.length_ && other.offset_ < offset_ + length_;
  }

  Result<Mapping> map(MapAccess access, size_t offset = 0, size_t length = kWholeBuffer);
  // Synchronous helpers through map(); the caller orders them against queue work.
  Status read_data(size_t offset, void* dst, size_t length);
  Status write_data(size_t offset, const void* src, size_t length);

 private:
  std::shared_ptr<BufferStorage> storage_;
  const void* device_tag_;
  uint32_t memory_type_, usage_;
  size_t allocation_size_, offset_, length_;
};

struct BufferParams {
  uint32_t memory_type = kMemoryDeviceLocal | kMemoryHostVisible | kMemoryHostCoherent;
  uint32_t usage = kUsageDefault;
};

// The checks every allocator makes first: INVALID_ARGUMENT unless the memory type and the usage
// are non-empty combinations of known bits.
Status check_buffer_params(const BufferParams& params);
// check_buffer_params, and for import_host a pointer unless `size` is 0.
Status check_import_host(const BufferParams& params, const void* ptr, size_t size);

// Called once when imported host memory is no longer used by kiln.
using HostReleaseFn = std::function<void(void* ptr)>;

// Allocates buffers of one device.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // RESOURCE_EXHAUSTED when the memory cannot be had; INVALID_ARGUMENT for unsupported types.
  virtual Result<BufferRef> allocate(const BufferParams& params, size_t size) = 0;
  // Wraps `size` bytes of host memory at `ptr`; `release` runs when the last user is gone.
  virtual Result<BufferRef> import_host(const BufferParams& params, void* ptr, size_t size,
                                        HostReleaseFn release) = 0;
};

}  // namespace kiln::hal
