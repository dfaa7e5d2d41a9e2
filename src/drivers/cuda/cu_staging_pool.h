// StagingPool: page-locked (pinned) host blocks, recycled, through which a queue stages reads
// and writes between pageable user memory and device memory (cuMemcpyHtoDAsync and
// cuMemcpyDtoHAsync are asynchronous only from pinned memory). Pinning is slow:
// cuMemHostAlloc maps pages and cuMemFreeHost can synchronize the device.
//
// A caller may rely on:
//  - every block is allocated by StagingOps::allocate (the production ops: cuMemHostAlloc with
//    CU_MEMHOSTALLOC_PORTABLE, so any context may copy from it) and freed by StagingOps::free;
//  - blocks come in power-of-two size classes from `min_block_bytes` to `max_block_bytes`:
//    acquire(bytes) hands out a block of the smallest class that holds `bytes` (100 KiB → a
//    128 KiB block), the most recently returned one of that class when any is idle, else a new
//    one. A request above `max_block_bytes` is served in full by a one-off block of exactly
//    `bytes`, freed on release rather than cached (slow: callers that stage huge transfers
//    should chunk them, as the queue does, at max_block_bytes());
//  - acquire(0) is INVALID_ARGUMENT: a zero-byte transfer needs no staging;
//  - a failed allocation returns the ops' status (RESOURCE_EXHAUSTED for CUDA out of memory, as
//    cu_error maps it) and leaves the pool as it was;
//  - a StagingBlock is move-only; destroying or reset() returns its block to the pool. At most
//    `max_cached_bytes` stay idle: a release that would exceed it frees idle blocks, the largest
//    class first and the oldest of a class first, until the returned block fits, and frees the
//    returned block itself only when it alone exceeds the cap (so the size in use now stays);
//  - allocation and freeing run outside the pool's lock; a release that frees nothing and an
//    acquire served from an idle block allocate nothing;
//  - every member is thread-safe, and StagingBlocks may be released on any thread;
//  - shutdown() is FAILED_PRECONDITION, changing nothing, while any block is out (including one
//    being allocated or freed); once it succeeds, every idle block is freed and acquire() is
//    FAILED_PRECONDITION. The pool must outlive its blocks: the destructor shuts down, and with
//    blocks still out it logs an error, asserts in debug builds, and leaves those blocks to
//    their holders (undefined behaviour once they are released), because freeing memory a copy
//    may still be reading is worse.
//
// The pool does not know about streams: a block must not be released before the copies that use
// it have completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/cu_context_scope.h"

namespace kiln::cuda {

// How the pool allocates and frees pinned blocks: function pointers and their argument, so that
// tests count calls without a GPU. `allocate` returns a status naming the failed call.
struct StagingOps {
  Status (*allocate)(void* user, size_t bytes, void** out) = nullptr;
  void (*free)(void* user, void* block) = nullptr;
  void* user = nullptr;
};

// The ops the driver uses: cuMemHostAlloc(CU_MEMHOSTALLOC_PORTABLE) and cuMemFreeHost with
// `target->context` pushed as the calling thread's current context for the call. `target` must
// outlive every pool using the ops.
StagingOps cuda_staging_ops(const ContextTarget* target);

struct StagingPoolOptions {
  size_t min_block_bytes = size_t{64} << 10;    // the smallest class; a power of two
  size_t max_block_bytes = size_t{64} << 20;    // the largest class; a power of two, >= min
  size_t max_cached_bytes = size_t{256} << 20;  // idle bytes kept at most (0: none)
};

class StagingPool;

// A pinned block held by one owner (empty when default-constructed or moved from).
class StagingBlock {
 public:
  StagingBlock() = default;
  StagingBlock(StagingBlock&& other) noexcept { swap(other); }
  StagingBlock& operator=(StagingBlock&& other) noexcept {
    StagingBlock(std::move(other)).swap(*this);
    return *this;
  }
  ~StagingBlock() { reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }  // at least the bytes acquired
  explicit operator bool() const { return data_ != nullptr; }
  // Returns the block to its pool.
  void reset();

 private:
  friend class StagingPool;
  StagingBlock(StagingPool* pool, void* data, size_t size, uint32_t size_class)
      : pool_(pool), data_(data), size_(size), class_(size_class) {}
  void swap(StagingBlock& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(class_, other.class_);
  }

  StagingPool* pool_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
  uint32_t class_ = 0;
};

class StagingPool {
 public:
  // INVALID_ARGUMENT for ops without allocate or free, or sizes that are not powers of two with
  // min <= max. Allocates nothing up front.
  static Result<std::unique_ptr<StagingPool>> create(StagingOps ops, StagingPoolOptions options);
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool();

  // A block of at least `bytes`; see the header comment.
  Result<StagingBlock> acquire(size_t bytes);
  // See the header comment.
  Status shutdown();

  // The largest block a pooled class holds: transfers above it are staged in chunks of this size.
  size_t max_block_bytes() const { return options_.max_block_bytes; }
  size_t allocated_blocks() const;  // blocks allocated and not freed, out or idle
  size_t outstanding() const;       // blocks held by StagingBlocks (or being allocated or freed)
  size_t cached_blocks() const;     // idle blocks
  size_t cached_bytes() const;      // their bytes

 private:
  friend class StagingBlock;
  StagingPool(StagingOps ops, StagingPoolOptions options, size_t class_count);
  size_t class_size(uint32_t size_class) const { return options_.min_block_bytes << size_class; }
  void recycle(void* data, size_t size, uint32_t size_class);

  // The class of one-off blocks, above max_block_bytes.
  static constexpr uint32_t kOneOff = UINT32_MAX;

  const StagingOps ops_;
  const StagingPoolOptions options_;
  mutable std::mutex mutex_;
  // Idle blocks per class, oldest first; each has room for every block of its class, so a
  // release that frees nothing never allocates.
  std::vector<std::vector<void*>> idle_;  // guarded by mutex_
  std::vector<size_t> class_blocks_;      // blocks of each class allocated; guarded by mutex_
  size_t allocated_ = 0;                  // guarded by mutex_
  size_t outstanding_ = 0;                // guarded by mutex_
  size_t cached_blocks_ = 0;              // guarded by mutex_
  size_t cached_bytes_ = 0;               // guarded by mutex_
  bool shut_down_ = false;                // guarded by mutex_
};

}  // namespace kiln::cuda
