#include "drivers/cpu/cpu_allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace kiln::cpu {

namespace {

constexpr size_t kAlignment = 64;
// Buffers of at least kHugePageMinimum are fresh pages from mmap (zeros, so that a new array
// needs no fill), start on a 2 MiB boundary and ask for transparent huge pages (as NumPy does
// for its arrays): where the kernel grants them, a 1 GiB buffer's first touch takes 512 page
// faults instead of 262,144, which otherwise cost more than the work.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageMinimum = size_t{4} << 20;

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

// `size` bytes (a multiple of kHugePage) of fresh zero pages from the kernel, starting on a
// kHugePage boundary, with transparent huge pages asked for; nullptr when there is no room.
void* map_huge_pages(size_t size) {
  const size_t padded = size + kHugePage;
  void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const uintptr_t end = start + padded; end > aligned + size) {
    ::munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  }
  // Advice only: a kernel without transparent huge pages keeps small ones.
  (void)::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

Result<hal::BufferRef> CpuAllocator::allocate(const hal::BufferParams& params, size_t size) {
  KILN_RETURN_IF_ERROR(hal::check_buffer_params(params));
  if (size > max_allocation_size_) {
    return resource_exhausted_error("cannot allocate " + std::to_string(size) +
                                    " bytes: the CPU device allows at most " +
                                    std::to_string(max_allocation_size_) + " per buffer");
  }
  void* data = nullptr;
  std::shared_ptr<HostStorage> storage;
  if (size >= kHugePageMinimum) {
    const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
    data = map_huge_pages(rounded);
    if (data) storage = std::make_shared<HostStorage>(data, [rounded](void* p) { ::munmap(p, rounded); }, true);
  } else if (size > 0) {
    data = std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
    if (data) storage = std::make_shared<HostStorage>(data, [](void* p) { std::free(p); });
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
