#include "drivers/cuda/cu_status_slots.h"

#include <cstring>

#include "drivers/cuda/cuda_kernel_abi.h"

namespace kiln::cuda {

StatusSlots::~StatusSlots() {
  quiet_.reset();  // goes back to the free list, which goes below
  for (Arena& a : arenas_) {
    call_in_context(target_, "cuMemFreeHost", "status slots", [&](const Api& api) { return api.MemFreeHost(a.host); })
        .ignore();
    memory_.free(a.device);
  }
}

CUresult StatusSlots::copy_to_host(const Api& api, const StatusSlot& slot, CUstream stream) {
  return api.MemcpyDtoHAsync(const_cast<uint32_t*>(slot.words), slot.device, kStatusWords * sizeof(uint32_t), stream);
}

Result<std::shared_ptr<const StatusSlot>> StatusSlots::acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    // Once per 256 slots in flight: cuMemHostAlloc synchronizes the device, which a warm queue
    // never pays again; the ring comes from the context's stream-ordered allocator.
    Arena arena;
    const size_t bytes = size_t{kStatusSlots} * kStatusWords * sizeof(uint32_t);
    KILN_RETURN_IF_ERROR(call_in_context(target_, "cuMemHostAlloc", "status slots", [&](const Api& api) {
      return api.MemHostAlloc(&arena.host, bytes, CU_MEMHOSTALLOC_PORTABLE);
    }));
    std::memset(arena.host, 0, bytes);
    Result<CUdeviceptr> ring = memory_.allocate(bytes);
    Status made = ring.status();
    if (made.ok()) {
      arena.device = *ring;
      // The pool may hand back memory another ring or buffer left its bytes in: a stale tag
      // there would read as a failure (or a completion) of the slot's next action.
      made = memory_.zero(arena.device, bytes).annotate("status slots");
    }
    if (!made.ok()) {
      call_in_context(target_, "cuMemFreeHost", "status slots", [&](const Api& api) { return api.MemFreeHost(arena.host); })
          .ignore();
      if (arena.device) memory_.free(arena.device);
      return made;
    }
    arena.generation.assign(kStatusSlots, 0);
    const uint32_t number = static_cast<uint32_t>(arenas_.size());
    arenas_.push_back(std::move(arena));
    for (uint32_t i = kStatusSlots; i-- > 0;) free_.push_back({number, i});
  }
  auto [a, i] = free_.back();
  free_.pop_back();
  Arena& arena = arenas_[a];
  // tag % kStatusSlots == i; the generation makes it new (and, from 1 up, never 0).
  uint32_t& generation = arena.generation[i];
  if (++generation == 0xFFFFFFFFu / kStatusSlots) generation = 1;
  auto* slot = new StatusSlot();
  slot->ring = arena.device;
  slot->tag = generation * kStatusSlots + i;
  slot->words = static_cast<volatile uint32_t*>(arena.host) + size_t{i} * kStatusWords;
  slot->device = arena.device + CUdeviceptr{i} * kStatusWords * sizeof(uint32_t);
  slot->arena = a;
  slot->index = i;
  return std::shared_ptr<const StatusSlot>(slot, [this](const StatusSlot* done) {
    release(*done);
    delete done;
  });
}

Result<const StatusSlot*> StatusSlots::quiet() {
  std::lock_guard<std::mutex> lock(quiet_mutex_);
  if (!quiet_) {
    KILN_ASSIGN_OR_RETURN(quiet_, acquire());
  }
  return quiet_.get();
}

void StatusSlots::release(const StatusSlot& slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back({slot.arena, slot.index});
}

}  // namespace kiln::cuda
