// Large host memory: buffers on 2 MiB boundaries with transparent huge pages asked for (the cpu
// device's buffers, the host memory behind the buffers of an OpenCL CPU device, Python's large
// output arrays), and allocators that take large blocks from them (host copies of nodes, the
// bytes an `update` captures).
//
// Released mappings are kept for reuse, up to kIdleHugePagesBytes in all: the first touch of
// fresh pages (a fault and the kernel zeroing each page) made the first run of a program in a new
// context 5x a warm run, where the pages of the context before could have served it. An idle
// mapping is handed back with MADV_FREE, so the kernel may still reclaim it under memory pressure
// (its pages then read as zeros), and reused only for a request of exactly its size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace kiln {

// Blocks of at least kHugePageMinimum bytes are worth huge pages: a 1 GiB buffer's first touch
// takes 512 page faults instead of 262,144, and a kernel reading a 16 MiB array row by row
// misses the TLB once per 2 MiB instead of once per 4 KiB row.
inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kHugePageMinimum = size_t{4} << 20;
// The most bytes of released mappings kept for reuse, in all (the oldest go first); a mapping
// larger than this is unmapped when released.
inline constexpr size_t kIdleHugePagesBytes = size_t{256} << 20;

// `size` rounded up to a whole number of huge pages.
inline size_t huge_page_bytes(size_t size) { return (size + kHugePage - 1) / kHugePage * kHugePage; }

// `size` bytes (a multiple of kHugePage) starting on a kHugePage boundary, with transparent huge
// pages asked for: a released mapping of that size when one is idle (its contents whatever they
// were), else fresh zero pages from the kernel; nullptr when there is no room. `*zeroed` (when
// given) says whether the memory is known to hold zeros. Released with unmap_huge_pages(data,
// size), which keeps it for reuse or unmaps it. Thread-safe.
void* map_huge_pages(size_t size, bool* zeroed = nullptr);
void unmap_huge_pages(void* data, size_t size);

// Bytes of released mappings kept for reuse now (for tests).
size_t idle_huge_page_bytes();

// `bytes` of host memory, 64-byte aligned: huge pages (map_huge_pages) from kHugePageMinimum up,
// else the C heap; zeros when `zero`. `*zeroed` (when given) says whether it holds zeros (asked
// for, or fresh pages). nullptr when there is no room. Freed with free_host_memory(data, bytes),
// the same `bytes`.
void* allocate_host_memory(size_t bytes, bool zero, bool* zeroed = nullptr);
void free_host_memory(void* data, size_t bytes);

// A standard allocator over allocate_host_memory. Value-initialization writes nothing: the memory
// comes as zeros when `zero` (the default), else as whatever it held, for a vector whose bytes
// stand for zeros by other means or are all written before they are read (a reused mapping then
// costs no pass over it). Memory of one allocator may be freed by any other.
template <typename T>
struct HostMemoryAllocator {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>,
                "value-initialization writes nothing: for bytes and numbers only");
  using value_type = T;
  using is_always_equal = std::true_type;
  HostMemoryAllocator() = default;
  explicit HostMemoryAllocator(bool zero_memory) : zero(zero_memory) {}
  template <typename U>
  HostMemoryAllocator(const HostMemoryAllocator<U>& other) noexcept : zero(other.zero) {}
  T* allocate(size_t n) {
    if (n == 0) return nullptr;
    void* p = allocate_host_memory(n * sizeof(T), zero);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (p) free_host_memory(p, n * sizeof(T));
  }
  // Value-initialization only; construction from values is allocator_traits' own.
  template <typename U>
  void construct(U*) noexcept {}
  friend bool operator==(const HostMemoryAllocator&, const HostMemoryAllocator&) { return true; }

  bool zero = true;
};

// A copy of host bytes in memory of allocate_host_memory (large ones in reused huge pages),
// copied with memcpy (a vector with an allocator of its own copies element by element).
class HostMemoryBytes {
 public:
  HostMemoryBytes() = default;
  // A copy of `size` bytes at `bytes`; std::bad_alloc when there is no room.
  HostMemoryBytes(const void* bytes, size_t size);
  HostMemoryBytes(const HostMemoryBytes& other) : HostMemoryBytes(other.data_, other.size_) {}
  HostMemoryBytes(HostMemoryBytes&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  HostMemoryBytes& operator=(HostMemoryBytes other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~HostMemoryBytes();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
