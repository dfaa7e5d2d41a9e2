#include "kiln/base/host_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <deque>
#include <mutex>
#include <new>
#include <utility>

namespace kiln {

namespace {

void* map_fresh(size_t size) {
  const size_t padded = size + kHugePage;
  // Not MAP_NORESERVE: the kernel's overcommit check then refuses a size the machine could never
  // hold (a 4 TiB host copy), as calloc would, instead of a process killed when it is written.
  void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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

// Released mappings, oldest first. Never destroyed: buffers may be released during exit.
struct IdleMappings {
  std::mutex mutex;
  std::deque<std::pair<void*, size_t>> idle;  // guarded by mutex
  size_t bytes = 0;                           // guarded by mutex
};

IdleMappings& idle_mappings() {
  static auto* idle = new IdleMappings();
  return *idle;
}

}  // namespace

void* map_huge_pages(size_t size, bool* zeroed) {
  IdleMappings& m = idle_mappings();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    // The newest of that size: its pages are the likeliest to be still in the caches.
    for (auto it = m.idle.rbegin(); it != m.idle.rend(); ++it) {
      if (it->second != size) continue;
      void* data = it->first;
      m.idle.erase(std::next(it).base());
      m.bytes -= size;
      if (zeroed) *zeroed = false;
      return data;
    }
  }
  if (zeroed) *zeroed = true;
  return map_fresh(size);
}

void unmap_huge_pages(void* data, size_t size) {
  if (!data) return;
  if (size > kIdleHugePagesBytes) {
    ::munmap(data, size);
    return;
  }
  // The kernel may take the pages back lazily; until it does, reusing them costs no fault.
  (void)::madvise(data, size, MADV_FREE);
  std::deque<std::pair<void*, size_t>> evicted;
  IdleMappings& m = idle_mappings();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.idle.emplace_back(data, size);
    m.bytes += size;
    while (m.bytes > kIdleHugePagesBytes) {
      evicted.push_back(m.idle.front());
      m.bytes -= m.idle.front().second;
      m.idle.pop_front();
    }
  }
  for (const auto& [old, bytes] : evicted) ::munmap(old, bytes);
}

void* allocate_host_memory(size_t bytes, bool zero, bool* zeroed) {
  constexpr size_t kAlignment = 64;
  bool fresh = false;
  void* data = bytes >= kHugePageMinimum
                   ? map_huge_pages(huge_page_bytes(bytes), &fresh)
                   : std::aligned_alloc(kAlignment, (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment);
  if (data && zero && !fresh) std::memset(data, 0, bytes);
  if (zeroed) *zeroed = data && (zero || fresh);
  return data;
}

void free_host_memory(void* data, size_t bytes) {
  if (bytes >= kHugePageMinimum) {
    unmap_huge_pages(data, huge_page_bytes(bytes));
  } else {
    std::free(data);
  }
}

HostMemoryBytes::HostMemoryBytes(const void* bytes, size_t size) : size_(size) {
  if (size == 0) return;
  data_ = static_cast<uint8_t*>(allocate_host_memory(size, false));
  if (!data_) throw std::bad_alloc();
  std::memcpy(data_, bytes, size);
}

HostMemoryBytes::~HostMemoryBytes() {
  if (data_) free_host_memory(data_, size_);
}

size_t idle_huge_page_bytes() {
  IdleMappings& m = idle_mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.bytes;
}

}  // namespace kiln
