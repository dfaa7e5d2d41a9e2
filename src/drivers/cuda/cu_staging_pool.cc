#include "drivers/cuda/cu_staging_pool.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <string>
#include <utility>

#include "kiln/base/log.h"

namespace kiln::cuda {

// --- The driver's ops --------------------------------------------------------------------------

namespace {

Status allocate_pinned(void* user, size_t bytes, void** out) {
  return call_in_context(
      *static_cast<const ContextTarget*>(user), "cuMemHostAlloc", "staging pool",
      [&](const Api& api) { return api.MemHostAlloc(out, bytes, CU_MEMHOSTALLOC_PORTABLE); });
}

void free_pinned(void* user, void* block) {
  // Nothing can be done about a failure here: the block is gone from the pool either way.
  Status freed =
      call_in_context(*static_cast<const ContextTarget*>(user), "cuMemFreeHost", "staging pool",
                      [&](const Api& api) { return api.MemFreeHost(block); });
  if (!freed.ok()) KILN_LOG(kWarn, freed.message());
}

}  // namespace

StagingOps cuda_staging_ops(const ContextTarget* target) {
  StagingOps ops;
  ops.allocate = allocate_pinned;
  ops.free = free_pinned;
  ops.user = const_cast<ContextTarget*>(target);
  return ops;
}

// --- StagingBlock ------------------------------------------------------------------------------

void StagingBlock::reset() {
  StagingPool* pool = pool_;
  pool_ = nullptr;
  if (pool) pool->recycle(std::exchange(data_, nullptr), std::exchange(size_, 0), class_);
}

// --- StagingPool -------------------------------------------------------------------------------

StagingPool::StagingPool(StagingOps ops, StagingPoolOptions options, size_t class_count)
    : ops_(ops), options_(options), idle_(class_count), class_blocks_(class_count, 0) {}

Result<std::unique_ptr<StagingPool>> StagingPool::create(StagingOps ops,
                                                         StagingPoolOptions options) {
  if (!ops.allocate || !ops.free) {
    return invalid_argument_error("staging pool: ops without allocate or free");
  }
  if (!std::has_single_bit(options.min_block_bytes) ||
      !std::has_single_bit(options.max_block_bytes) ||
      options.min_block_bytes > options.max_block_bytes) {
    return invalid_argument_error(
        "staging pool: block sizes " + std::to_string(options.min_block_bytes) + " to " +
        std::to_string(options.max_block_bytes) + " are not powers of two with min <= max");
  }
  int max_shift = std::countr_zero(options.max_block_bytes);
  size_t classes = static_cast<size_t>(max_shift - std::countr_zero(options.min_block_bytes)) + 1;
  return std::unique_ptr<StagingPool>(new StagingPool(ops, options, classes));
}

StagingPool::~StagingPool() {
  Status status = shutdown();
  if (!status.ok()) {
    KILN_LOG(kError, status.message());
    assert(false && "StagingPool destroyed with blocks still out");
  }
}

Result<StagingBlock> StagingPool::acquire(size_t bytes) {
  if (bytes == 0) return invalid_argument_error("staging pool: acquire of 0 bytes");
  uint32_t size_class = kOneOff;
  size_t size = bytes;
  if (bytes <= options_.max_block_bytes) {
    size = std::max(std::bit_ceil(bytes), options_.min_block_bytes);
    size_class =
        static_cast<uint32_t>(std::countr_zero(size) - std::countr_zero(options_.min_block_bytes));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return failed_precondition_error("staging pool: acquire after shutdown");
    ++outstanding_;
    if (size_class != kOneOff && !idle_[size_class].empty()) {
      void* data = idle_[size_class].back();  // the most recently returned: likeliest in cache
      idle_[size_class].pop_back();
      --cached_blocks_;
      cached_bytes_ -= size;
      return StagingBlock(this, data, size, size_class);
    }
  }
  // Counted as out meanwhile, so that shutdown() waits for the allocation.
  void* data = nullptr;
  Status allocated = ops_.allocate(ops_.user, size, &data);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!allocated.ok()) {
    --outstanding_;
    return allocated;
  }
  ++allocated_;
  if (size_class != kOneOff) idle_[size_class].reserve(++class_blocks_[size_class]);
  return StagingBlock(this, data, size, size_class);
}

void StagingPool::recycle(void* data, size_t size, uint32_t size_class) {
  std::vector<void*> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (size_class == kOneOff || size > options_.max_cached_bytes) {
      doomed.push_back(data);
      if (size_class != kOneOff) --class_blocks_[size_class];
    } else {
      // Make room: the largest class first, its oldest block first.
      for (size_t k = idle_.size(); cached_bytes_ + size > options_.max_cached_bytes;) {
        while (idle_[k - 1].empty()) --k;
        doomed.push_back(idle_[k - 1].front());
        idle_[k - 1].erase(idle_[k - 1].begin());
        --class_blocks_[k - 1];
        --cached_blocks_;
        cached_bytes_ -= class_size(static_cast<uint32_t>(k - 1));
      }
      idle_[size_class].push_back(data);  // never reallocates: reserved for every block
      ++cached_blocks_;
      cached_bytes_ += size;
    }
    if (doomed.empty()) {
      --outstanding_;
      return;
    }
  }
  // The release stays counted as out until its frees finish, so that shutdown() waits for them.
  for (void* block : doomed) ops_.free(ops_.user, block);
  std::lock_guard<std::mutex> lock(mutex_);
  allocated_ -= doomed.size();
  --outstanding_;
}

Status StagingPool::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Status();
  if (outstanding_ > 0) {
    return failed_precondition_error("staging pool: " + std::to_string(outstanding_) +
                                     " blocks are still out");
  }
  for (std::vector<void*>& blocks : idle_) {
    for (void* block : blocks) ops_.free(ops_.user, block);
    blocks.clear();
  }
  std::fill(class_blocks_.begin(), class_blocks_.end(), 0);
  allocated_ = cached_blocks_ = cached_bytes_ = 0;
  shut_down_ = true;
  return Status();
}

size_t StagingPool::allocated_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

size_t StagingPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outstanding_;
}

size_t StagingPool::cached_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_blocks_;
}

size_t StagingPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

}  // namespace kiln::cuda
