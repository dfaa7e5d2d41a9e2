// Host memory in huge pages, and released mappings kept for reuse: a release is reused by the
// next request of its size (holding what it held, so not reported as zeros), the idle mappings
// stay within their cap, allocations asked for zeros get zeros from reused memory too, and
// threads never share a block. The idle mappings are the process's: counts are taken as deltas.
#include "kiln/base/host_memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace kiln {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostMemoryTest, AReleasedMappingServesTheNextRequestOfItsSize) {
  const size_t size = 6 * kMiB;
  bool zeroed = false;
  void* first = map_huge_pages(size, &zeroed);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kHugePage, 0u);
  std::memset(first, 0x5A, size);
  unmap_huge_pages(first, size);

  void* again = map_huge_pages(size, &zeroed);
  EXPECT_EQ(again, first) << "the idle mapping of that size is reused";
  EXPECT_FALSE(zeroed) << "reused memory holds what it held";
  // Another size is never served by it.
  void* other = map_huge_pages(size + kHugePage, &zeroed);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, again);
  unmap_huge_pages(other, size + kHugePage);
  unmap_huge_pages(again, size);
}

TEST(HostMemoryTest, IdleMappingsStayWithinTheirCap) {
  const size_t size = 100 * kMiB;  // never touched: address space only
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(map_huge_pages(size));
    ASSERT_NE(held.back(), nullptr);
  }
  for (void* p : held) unmap_huge_pages(p, size);
  EXPECT_LE(idle_huge_page_bytes(), kIdleHugePagesBytes);
  // The newest release is kept; the oldest went first.
  EXPECT_EQ(map_huge_pages(size), held.back());
  unmap_huge_pages(held.back(), size);

  // A mapping larger than the cap is not kept.
  const size_t before = idle_huge_page_bytes();
  void* huge = map_huge_pages(kIdleHugePagesBytes + kHugePage);
  ASSERT_NE(huge, nullptr);
  unmap_huge_pages(huge, kIdleHugePagesBytes + kHugePage);
  EXPECT_LE(idle_huge_page_bytes(), before);
}

TEST(HostMemoryTest, MemoryAskedForAsZerosIsZerosWhenReused) {
  for (size_t bytes : {size_t{1000}, 5 * kMiB}) {
    void* dirty = allocate_host_memory(bytes, false);
    ASSERT_NE(dirty, nullptr);
    std::memset(dirty, 0xFF, bytes);
    free_host_memory(dirty, bytes);
    auto* zeros = static_cast<unsigned char*>(allocate_host_memory(bytes, true));
    ASSERT_NE(zeros, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(zeros) % 64, 0u);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; ++i) nonzero += zeros[i] != 0;
    EXPECT_EQ(nonzero, 0u) << bytes << " bytes";
    free_host_memory(zeros, bytes);
  }
}

TEST(HostMemoryTest, HostMemoryBytesCopyTheirBytes) {
  std::vector<uint8_t> source(5 * kMiB + 3);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7);
  HostMemoryBytes bytes(source.data(), source.size());
  ASSERT_EQ(bytes.size(), source.size());
  EXPECT_EQ(std::memcmp(bytes.data(), source.data(), source.size()), 0);
  HostMemoryBytes copy = bytes;
  EXPECT_NE(copy.data(), bytes.data());
  EXPECT_EQ(std::memcmp(copy.data(), source.data(), source.size()), 0);
  HostMemoryBytes moved = std::move(copy);
  EXPECT_EQ(std::memcmp(moved.data(), source.data(), source.size()), 0);
  EXPECT_TRUE(HostMemoryBytes(nullptr, 0).empty());
}

// Threads taking and releasing blocks of two sizes at once: each writes its own mark over its
// block and finds it intact before the release (no block is handed to two holders).
TEST(HostMemoryTest, ThreadsNeverShareABlock) {
  std::atomic<int> clobbered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &clobbered] {
      for (int round = 0; round < 50; ++round) {
        const size_t size = (round % 2 ? 4 : 6) * kMiB;
        auto* block = static_cast<unsigned char*>(allocate_host_memory(size, false));
        if (!block) {
          clobbered.fetch_add(1);
          return;
        }
        const auto mark = static_cast<unsigned char>(t + 1);
        for (size_t i = 0; i < size; i += 4096) block[i] = mark;
        std::this_thread::yield();
        for (size_t i = 0; i < size; i += 4096) clobbered.fetch_add(block[i] != mark);
        free_host_memory(block, size);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clobbered.load(), 0);
}

}  // namespace
}  // namespace kiln
