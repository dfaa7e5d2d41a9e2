// Status slots: where the kernels of an action record its first failure (the CUDA kernel ABI's
// KILN_FAIL). The ring is device memory, so the check every kernel makes at entry (KILN_ENTRY,
// once per thread) is a read of the GPU's own memory, not of host memory across PCIe (which cost
// a 2^24-element kernel 18 ms at 540K threads on an H200). The queue copies an action's slot into
// a pinned host mirror after its work (copy_to_host), and the host reads the mirror once the
// action is over. Unlike OpenCL's status ring, a slot is held by reference: by its action until it
// completes, and by every wait gate that will read it (a later action's device-side wait on this
// one), so no other action reuses it before they have all read it. One StatusSlots serves every
// queue of a context.
//
// A caller may rely on:
//  - acquire() hands out a slot no other holder has, as the (ring, tag) pair the ABI takes: the
//    kernels compute the slot as ring + (tag % KILN_STATUS_SLOTS) * 8, and `tag` is never 0 and
//    differs from whatever tag the slot held before, so a stale failure (in the device slot or
//    in the mirror) never reads as new;
//  - a slot returns when its last reference goes; the StatusSlots must outlive every reference;
//  - thread-safe; arenas of kStatusSlots slots are added as needed and never freed before the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "drivers/cuda/cu_context_scope.h"

namespace kiln::cuda {

struct StatusSlot {
  CUdeviceptr ring = 0;       // the arena's device address (the kernels' kiln_status_ring)
  uint32_t tag = 0;           // the kernels' kiln_tag
  CUdeviceptr device = 0;     // the slot's kStatusWords words on the device
  volatile uint32_t* words = nullptr;  // their pinned host mirror, current after copy_to_host
  uint32_t arena = 0, index = 0;
};

// Where the rings' device memory comes from: the context's allocator (stream-ordered where the
// device has memory pools, CuContext::allocate_device), so that a new arena does not wait for the
// whole device. The pinned mirrors are cuMemHostAlloc, one per 256 slots in flight, made once.
struct DeviceMemoryOps {
  std::function<Result<CUdeviceptr>(size_t bytes)> allocate;
  std::function<void(CUdeviceptr)> free;
  // Zeroes what allocate gave, in stream order after it, before it returns.
  std::function<Status(CUdeviceptr, size_t bytes)> zero;
};

class StatusSlots {
 public:
  StatusSlots(ContextTarget target, DeviceMemoryOps memory) : target_(target), memory_(std::move(memory)) {}
  ~StatusSlots();
  StatusSlots(const StatusSlots&) = delete;
  StatusSlots& operator=(const StatusSlots&) = delete;

  Result<std::shared_ptr<const StatusSlot>> acquire();
  // A slot that no action holds and no kernel writes, acquired on first use and kept: what the
  // kernels of an action that reads no status back (none of them can fail) get as theirs, whose
  // entry check finds no failure there.
  Result<const StatusSlot*> quiet();
  // Queues the copy of the slot's words into its mirror on `stream`, after the work that may
  // write them (the caller has the context pushed).
  static CUresult copy_to_host(const Api& api, const StatusSlot& slot, CUstream stream);
  // Whether the slot's action failed on the device, once its copy_to_host has completed: its
  // first word holds its tag.
  static bool failed(const StatusSlot& slot) { return slot.words[0] == slot.tag; }

 private:
  void release(const StatusSlot& slot);

  struct Arena {
    void* host = nullptr;    // the pinned mirror
    CUdeviceptr device = 0;  // the ring
    std::vector<uint32_t> generation;  // per slot: the tag's high part, advanced on every use
  };
  ContextTarget target_;
  DeviceMemoryOps memory_;
  std::mutex mutex_;
  std::vector<Arena> arenas_;                               // guarded by mutex_
  std::vector<std::pair<uint32_t, uint32_t>> free_;          // (arena, index); guarded by mutex_
  std::mutex quiet_mutex_;
  std::shared_ptr<const StatusSlot> quiet_;  // guarded by quiet_mutex_
};

}  // namespace kiln::cuda
