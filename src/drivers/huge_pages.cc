#include "drivers/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace kiln::drivers {

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

void unmap_huge_pages(void* data, size_t size) { ::munmap(data, size); }

}  // namespace kiln::drivers
