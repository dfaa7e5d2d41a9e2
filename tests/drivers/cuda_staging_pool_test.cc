// The CUDA staging pool with counting StagingOps backed by real heap memory (no GPU): blocks
// reused rather than reallocated, size classes, the cap on idle bytes, one-off blocks above the
// largest class, failed allocations, shutdown with blocks out, data surviving in a block, and
// several threads acquiring and releasing at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "drivers/cuda/cu_staging_pool.h"

namespace kiln {
namespace {

using cuda::StagingBlock;
using cuda::StagingPool;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

// StagingOps over malloc and free, counted; `fail_at` makes the allocation of that number
// (counting from 0) fail as cuMemHostAlloc out of memory does.
struct CountingHostMemory {
  std::mutex mutex;
  uint64_t allocations = 0;  // successful
  uint64_t frees = 0;
  uint64_t bad_frees = 0;  // of a block not live
  int64_t fail_at = -1;
  uint64_t attempts = 0;
  std::map<void*, size_t> live;  // block → bytes

  cuda::StagingOps ops() {
    cuda::StagingOps o;
    o.allocate = [](void* user, size_t bytes, void** out) -> Status {
      auto& self = *static_cast<CountingHostMemory*>(user);
      std::lock_guard<std::mutex> lock(self.mutex);
      if (static_cast<int64_t>(self.attempts++) == self.fail_at) {
        return resource_exhausted_error(
            "staging pool: cuMemHostAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
      }
      void* block = std::malloc(bytes);
      if (!block) return resource_exhausted_error("malloc failed");
      ++self.allocations;
      self.live[block] = bytes;
      *out = block;
      return Status();
    };
    o.free = [](void* user, void* block) {
      auto& self = *static_cast<CountingHostMemory*>(user);
      std::lock_guard<std::mutex> lock(self.mutex);
      if (self.live.erase(block) == 1) {
        ++self.frees;
        std::free(block);
      } else {
        ++self.bad_frees;
      }
    };
    o.user = this;
    return o;
  }

  uint64_t allocated() {
    std::lock_guard<std::mutex> lock(mutex);
    return allocations;
  }
  uint64_t freed() {
    std::lock_guard<std::mutex> lock(mutex);
    return frees;
  }
  size_t live_bytes(void* block) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(block);
    return it == live.end() ? 0 : it->second;
  }
};

class CudaStagingPoolTest : public ::testing::Test {
 protected:
  // Makes pool_ over memory_'s ops; false (and a failure) if it cannot.
  bool make(size_t max_cached_bytes = size_t{256} << 20,
            size_t max_block_bytes = size_t{64} << 20) {
    cuda::StagingPoolOptions options;
    options.max_block_bytes = max_block_bytes;
    options.max_cached_bytes = max_cached_bytes;
    Result<std::unique_ptr<StagingPool>> pool = StagingPool::create(memory_.ops(), options);
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (pool.ok()) pool_ = std::move(*pool);
    return pool.ok();
  }
  StagingBlock acquire(size_t bytes) {
    Result<StagingBlock> block = pool_->acquire(bytes);
    EXPECT_TRUE(block.ok()) << block.status();
    return block.ok() ? std::move(*block) : StagingBlock();
  }
  // After the pool is gone: every block allocated was freed exactly once, `made` of them.
  void expect_all_freed(uint64_t made) {
    EXPECT_EQ(memory_.allocated(), made);
    EXPECT_EQ(memory_.freed(), made);
    EXPECT_EQ(memory_.bad_frees, 0u);
    EXPECT_TRUE(memory_.live.empty());
  }

  CountingHostMemory memory_;
  std::unique_ptr<StagingPool> pool_;
};

TEST_F(CudaStagingPoolTest, ReleasedBlockComesBack) {
  ASSERT_TRUE(make());
  void* first = nullptr;
  for (int round = 0; round < 10; ++round) {
    StagingBlock block = acquire(1000);
    ASSERT_TRUE(block);
    EXPECT_EQ(block.size(), 64 * kKiB) << "the smallest class";
    if (round == 0) first = block.data();
    EXPECT_EQ(block.data(), first) << "round " << round;
    EXPECT_EQ(pool_->outstanding(), 1u);
  }
  EXPECT_EQ(memory_.allocated(), 1u);
  EXPECT_EQ(pool_->allocated_blocks(), 1u);
  EXPECT_EQ(pool_->cached_blocks(), 1u);
  EXPECT_EQ(pool_->cached_bytes(), 64 * kKiB);
  pool_.reset();
  expect_all_freed(1);
}

TEST_F(CudaStagingPoolTest, SizeClassesArePowersOfTwo) {
  ASSERT_TRUE(make());
  StagingBlock a = acquire(100 * kKiB);
  EXPECT_EQ(a.size(), 128 * kKiB);
  EXPECT_EQ(memory_.live_bytes(a.data()), 128 * kKiB);
  EXPECT_EQ(acquire(128 * kKiB).size(), 128 * kKiB);  // exact powers stay
  EXPECT_EQ(acquire(128 * kKiB + 1).size(), 256 * kKiB);
  EXPECT_EQ(acquire(64 * kMiB).size(), 64 * kMiB);  // the largest class
  void* data = a.data();
  a.reset();
  EXPECT_FALSE(a);
  StagingBlock smaller = acquire(65 * kKiB);  // same class, smaller request: reused
  EXPECT_EQ(smaller.data(), data);
  EXPECT_EQ(smaller.size(), 128 * kKiB);
  StagingBlock other = acquire(64 * kKiB);  // the class below: a new block
  EXPECT_NE(other.data(), data);
  EXPECT_EQ(memory_.allocated(), 5u);
}

TEST_F(CudaStagingPoolTest, MovedBlockReturnsOnce) {
  ASSERT_TRUE(make());
  StagingBlock a = acquire(1);
  void* data = a.data();
  StagingBlock b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from block is empty
  EXPECT_EQ(b.data(), data);
  StagingBlock c;
  c = std::move(b);
  EXPECT_EQ(pool_->outstanding(), 1u);
  c = StagingBlock();
  EXPECT_EQ(pool_->outstanding(), 0u);
  EXPECT_EQ(pool_->cached_blocks(), 1u);
}

TEST_F(CudaStagingPoolTest, DataWrittenIntoABlockStaysIntact) {
  ASSERT_TRUE(make());
  std::vector<StagingBlock> blocks;
  for (size_t i = 0; i < 4; ++i) {
    blocks.push_back(acquire(100 * kKiB));
    std::memset(blocks.back().data(), static_cast<int>(0x10 + i), blocks.back().size());
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(blocks[i].data());
    for (size_t j = 0; j < blocks[i].size(); j += 4093) {
      ASSERT_EQ(bytes[j], 0x10 + i) << "block " << i << " byte " << j;
    }
    EXPECT_EQ(bytes[blocks[i].size() - 1], 0x10 + i);
  }
  // A recycled block keeps what was written: the pool does not clear or move it.
  void* data = blocks[2].data();
  blocks[2].reset();
  StagingBlock again = acquire(128 * kKiB);
  ASSERT_EQ(again.data(), data);
  EXPECT_EQ(static_cast<const unsigned char*>(again.data())[77], 0x12);
}

TEST_F(CudaStagingPoolTest, IdleBytesAreCapped) {
  ASSERT_TRUE(make(512 * kKiB));
  {
    std::vector<StagingBlock> held;
    for (int i = 0; i < 3; ++i) held.push_back(acquire(256 * kKiB));
  }  // the first two fill the cap; the third frees the oldest
  EXPECT_EQ(memory_.allocated(), 3u);
  EXPECT_EQ(memory_.freed(), 1u);
  EXPECT_EQ(pool_->cached_bytes(), 512 * kKiB);
  EXPECT_EQ(pool_->allocated_blocks(), 2u);
  // A small block evicts the largest class to fit.
  acquire(64 * kKiB);
  EXPECT_EQ(memory_.freed(), 2u);
  EXPECT_EQ(pool_->cached_blocks(), 2u);
  EXPECT_EQ(pool_->cached_bytes(), 320 * kKiB);
  // A block larger than the cap is freed on release, leaving the idle ones.
  acquire(1 * kMiB);
  EXPECT_EQ(memory_.freed(), 3u);
  EXPECT_EQ(pool_->cached_bytes(), 320 * kKiB);
  EXPECT_EQ(pool_->outstanding(), 0u);
  pool_.reset();
  expect_all_freed(5);
}

TEST_F(CudaStagingPoolTest, NoCacheFreesEveryRelease) {
  ASSERT_TRUE(make(0));
  for (int i = 0; i < 3; ++i) acquire(10);
  EXPECT_EQ(memory_.allocated(), 3u);
  EXPECT_EQ(memory_.freed(), 3u);
  EXPECT_EQ(pool_->allocated_blocks(), 0u);
}

TEST_F(CudaStagingPoolTest, OversizeRequestsGetOneOffBlocks) {
  ASSERT_TRUE(make(256 * kMiB, 1 * kMiB));
  StagingBlock big = acquire(3 * kMiB + 5);
  EXPECT_EQ(big.size(), 3 * kMiB + 5) << "served in full, not rounded";
  EXPECT_EQ(memory_.live_bytes(big.data()), 3 * kMiB + 5);
  std::memset(big.data(), 0xab, big.size());
  EXPECT_EQ(pool_->outstanding(), 1u);
  big.reset();
  EXPECT_EQ(memory_.freed(), 1u) << "never cached";
  EXPECT_EQ(pool_->cached_blocks(), 0u);
  EXPECT_EQ(pool_->allocated_blocks(), 0u);
  acquire(1 * kMiB + 1);
  EXPECT_EQ(memory_.allocated(), 2u);
  EXPECT_EQ(memory_.freed(), 2u);
}

TEST_F(CudaStagingPoolTest, FailedAllocationChangesNothing) {
  ASSERT_TRUE(make());
  StagingBlock a = acquire(1);
  memory_.fail_at = 1;
  Result<StagingBlock> b = pool_->acquire(1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted) << b.status();
  EXPECT_NE(b.status().message().find("cuMemHostAlloc"), std::string::npos) << b.status();
  EXPECT_EQ(pool_->outstanding(), 1u);
  EXPECT_EQ(pool_->allocated_blocks(), 1u);
  EXPECT_EQ(memory_.allocated(), 1u);
  StagingBlock c = acquire(1);  // the next try allocates
  EXPECT_TRUE(c);
  EXPECT_NE(c.data(), a.data());
  a.reset();
  c.reset();
  EXPECT_EQ(pool_->cached_blocks(), 2u);
  pool_.reset();
  expect_all_freed(2);
}

TEST_F(CudaStagingPoolTest, BadArguments) {
  ASSERT_TRUE(make());
  EXPECT_EQ(pool_->acquire(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(memory_.allocated(), 0u);
  cuda::StagingOps none;
  cuda::StagingPoolOptions options;
  EXPECT_EQ(StagingPool::create(none, options).status().code(), StatusCode::kInvalidArgument);
  options.min_block_bytes = 3000;
  EXPECT_EQ(StagingPool::create(memory_.ops(), options).status().code(),
            StatusCode::kInvalidArgument);
  options.min_block_bytes = 2 * kMiB;
  options.max_block_bytes = 1 * kMiB;
  EXPECT_EQ(StagingPool::create(memory_.ops(), options).status().code(),
            StatusCode::kInvalidArgument);
  options.max_block_bytes = 2 * kMiB;  // a single class
  Result<std::unique_ptr<StagingPool>> single = StagingPool::create(memory_.ops(), options);
  ASSERT_TRUE(single.ok()) << single.status();
  Result<StagingBlock> block = (*single)->acquire(1);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->size(), 2 * kMiB);
}

TEST_F(CudaStagingPoolTest, ShutdownWaitsForEveryBlock) {
  ASSERT_TRUE(make());
  StagingBlock held = acquire(1);
  StagingBlock idle = acquire(200 * kKiB);
  idle.reset();
  Status early = pool_->shutdown();
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition) << early;
  EXPECT_NE(early.message().find("1 blocks are still out"), std::string::npos) << early;
  EXPECT_EQ(memory_.freed(), 0u);
  StagingBlock again = acquire(200 * kKiB);  // still open
  held.reset();
  again.reset();
  EXPECT_TRUE(pool_->shutdown().ok());
  EXPECT_EQ(memory_.freed(), 2u);
  EXPECT_EQ(pool_->allocated_blocks(), 0u);
  EXPECT_EQ(pool_->acquire(1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(pool_->shutdown().ok());
  pool_.reset();  // the destructor frees nothing twice
  expect_all_freed(2);
}

TEST_F(CudaStagingPoolTest, ConcurrentHoldersNeverShareABlock) {
  ASSERT_TRUE(make(1 * kMiB));  // small enough that releases also evict
  std::atomic<int> failures{0}, corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        size_t bytes = (size_t{1} + static_cast<size_t>((i * 7 + t) % 5)) * 60 * kKiB;
        Result<StagingBlock> block = pool_->acquire(bytes);
        if (!block.ok() || block->size() < bytes) {
          failures.fetch_add(1);
          continue;
        }
        // A block shared with another thread would see that thread's bytes.
        auto tag = static_cast<unsigned char>(t * 64 + i % 64);
        std::memset(block->data(), tag, bytes);
        const auto* data = static_cast<const unsigned char*>(block->data());
        for (size_t j = 0; j < bytes; j += 1021) {
          if (data[j] != tag) {
            corrupted.fetch_add(1);
            break;
          }
        }
        StagingBlock moved = std::move(*block);
        if (i % 3 == 0) std::thread([b = std::move(moved)]() mutable { b.reset(); }).join();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(pool_->outstanding(), 0u);
  EXPECT_LE(pool_->cached_bytes(), 1 * kMiB);
  EXPECT_EQ(pool_->allocated_blocks(), pool_->cached_blocks());
  EXPECT_EQ(memory_.allocated() - memory_.freed(), pool_->allocated_blocks());
  EXPECT_TRUE(pool_->shutdown().ok());
  EXPECT_EQ(memory_.freed(), memory_.allocated());
  EXPECT_EQ(memory_.bad_frees, 0u);
}

// The driver's ops through a fake Api table: the context is pushed around each call and popped
// again, and CUDA's out of memory becomes RESOURCE_EXHAUSTED naming cuMemHostAlloc.
struct FakeDriver {
  static inline int depth = 0, pushes = 0;
  static inline unsigned int flags = 0;
  static inline bool out_of_memory = false;
  static inline char memory[64];
};

TEST(CudaStagingOpsTest, CallsWithTheContextPushed) {
  cuda::Api api{};
  api.CtxPushCurrent = [](cuda::CUcontext) {
    ++FakeDriver::pushes;
    ++FakeDriver::depth;
    return cuda::CUDA_SUCCESS;
  };
  api.CtxPopCurrent = [](cuda::CUcontext*) {
    --FakeDriver::depth;
    return cuda::CUDA_SUCCESS;
  };
  api.MemHostAlloc = [](void** out, size_t, unsigned int flags) {
    if (FakeDriver::depth != 1) return cuda::CUDA_ERROR_INVALID_CONTEXT;
    if (FakeDriver::out_of_memory) return cuda::CUDA_ERROR_OUT_OF_MEMORY;
    FakeDriver::flags = flags;
    *out = FakeDriver::memory;
    return cuda::CUDA_SUCCESS;
  };
  api.MemFreeHost = [](void* block) {
    return FakeDriver::depth == 1 && block == FakeDriver::memory ? cuda::CUDA_SUCCESS
                                                                 : cuda::CUDA_ERROR_INVALID_VALUE;
  };
  cuda::ContextTarget target;
  target.api = &api;
  cuda::StagingOps ops = cuda::cuda_staging_ops(&target);
  void* block = nullptr;
  ASSERT_TRUE(ops.allocate(ops.user, 4096, &block).ok());
  EXPECT_EQ(block, FakeDriver::memory);
  EXPECT_EQ(FakeDriver::flags, cuda::CU_MEMHOSTALLOC_PORTABLE);
  ops.free(ops.user, block);
  FakeDriver::out_of_memory = true;
  Status failed = ops.allocate(ops.user, 4096, &block);
  EXPECT_EQ(failed.code(), StatusCode::kResourceExhausted) << failed;
  EXPECT_NE(failed.message().find("cuMemHostAlloc"), std::string::npos) << failed;
  EXPECT_EQ(FakeDriver::pushes, 3);
  EXPECT_EQ(FakeDriver::depth, 0) << "every push popped";
}

}  // namespace
}  // namespace kiln
