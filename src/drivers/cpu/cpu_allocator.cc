#include "drivers/cpu/cpu_allocator.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "kiln/base/host_memory.h"

namespace kiln::cpu {

namespace {

class HostStorage final : public hal::BufferStorage {
 public:
  HostStorage(void* data, hal::HostReleaseFn release, bool zeroed = false)
      : data_(data), release_(std::move(release)), zeroed_(zeroed) {}
  ~HostStorage() override {
    if (release_) release_(data_);
  }
  void* host_pointer() override { return data_; }
  bool zeroed_when_allocated() const override { return zeroed_; }
  Status map(size_t offset, size_t, hal::MapAccess, void** out) override {
    *out = static_cast<uint8_t*>(data_) + offset;
    return Status();
  }
  void unmap(size_t, size_t, hal::MapAccess, void*) override {}

 private:
  void* data_;
  hal::HostReleaseFn release_;
  const bool zeroed_;
};

}  // namespace

Result<hal::BufferRef> CpuAllocator::allocate(const hal::BufferParams& params, size_t size) {
  KILN_RETURN_IF_ERROR(hal::check_buffer_params(params));
  if (size > max_allocation_size_) {
    return resource_exhausted_error("cannot allocate " + std::to_string(size) +
                                    " bytes: the CPU device allows at most " +
                                    std::to_string(max_allocation_size_) + " per buffer");
  }
  std::shared_ptr<HostStorage> storage;
  if (size > 0) {
    // Large buffers in huge pages, zeros where they are fresh (kiln/base/host_memory.h).
    bool zeroed = false;
    if (void* data = allocate_host_memory(size, false, &zeroed)) {
      storage = std::make_shared<HostStorage>(data, [size](void* p) { free_host_memory(p, size); }, zeroed);
    }
  } else {
    storage = std::make_shared<HostStorage>(nullptr, nullptr);
  }
  if (!storage) return resource_exhausted_error("cannot allocate " + std::to_string(size) + " bytes of host memory");
  return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type,
                                       params.usage, size, 0, size);
}

Result<hal::BufferRef> CpuAllocator::import_host(const hal::BufferParams& params, void* ptr,
                                                 size_t size, hal::HostReleaseFn release) {
  KILN_RETURN_IF_ERROR(hal::check_import_host(params, ptr, size));
  auto storage = std::make_shared<HostStorage>(ptr, std::move(release));
  return std::make_shared<hal::Buffer>(std::move(storage), device_tag_, params.memory_type,
                                       params.usage, size, 0, size);
}

}  // namespace kiln::cpu
