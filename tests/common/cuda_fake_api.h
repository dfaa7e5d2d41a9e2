// A stand-in for the CUDA driver API, for testing kiln's CUDA code without a GPU: "device"
// memory is host memory, each stream runs its work in order on a thread of its own, events are
// record/complete counters, and a module holds the fake kernels below plus any a test adds
// (Fake::extra_kernels). Every call checks that the context is pushed (Fake::misuse counts the
// calls that break that rule). Faults are sticky, as CUDA's are: once `trap_kernel` runs, every
// stream drops the work it has not run yet (event completions included) and every call returns
// CUDA_ERROR_LAUNCH_FAILED until Fake::clear_fault().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/cu_platform.h"

namespace kiln::cuda::fake {

// The context's sticky fault (a CUresult), 0 while there is none.
inline std::atomic<int>& fault() {
  static std::atomic<int> code{0};
  return code;
}

class FakeStream;
// Every live stream, for cuCtxSynchronize.
struct FakeStreams {
  std::mutex mutex;
  std::vector<FakeStream*> live;  // guarded by mutex
};
inline FakeStreams& fake_streams() {
  static FakeStreams* streams = new FakeStreams();  // never destroyed: streams may outlive statics
  return *streams;
}

// A stream: its work runs in order on its own thread.
class FakeStream {
 public:
  FakeStream() : thread_([this] { main(); }) {
    std::lock_guard<std::mutex> lock(fake_streams().mutex);
    fake_streams().live.push_back(this);
  }
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lock(fake_streams().mutex);
      std::erase(fake_streams().live, this);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    thread_.join();
  }
  // `always`: runs even after a fault (the stand-in's own bookkeeping, such as returning the host
  // memory behind a stream-ordered free, which a real process gets back when it ends).
  void push(std::function<void()> work, bool always = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back({std::move(work), always});
    ++pending_;
    ready_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void main() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;
      auto [work, always] = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      if (always || fault() == 0) work();  // after a fault the device runs nothing more
      lock.lock();
      if (--pending_ == 0) idle_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_, idle_;
  std::deque<std::pair<std::function<void()>, bool>> work_;
  size_t pending_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// What the stand-in counts and checks, for the whole process (one test at a time).
struct Fake {
  static inline thread_local int depth = 0;  // contexts pushed on this thread
  static inline std::atomic<int> misuse{0};  // calls without a context pushed
  static inline std::atomic<int> launches{0};
  static inline std::atomic<int> gate_launches{0};      // of the wait gate
  static inline std::atomic<int> graph_launches{0};     // cuGraphLaunch calls
  static inline std::atomic<int> graph_node_updates{0};  // cuGraphExecKernelNodeSetParams calls
  static inline std::atomic<int> device_to_host{0};     // cuMemcpyDtoHAsync calls (status slots, reads)
  static inline std::atomic<int> stream_waits{0};  // cuStreamWaitEvent calls
  static inline std::atomic<int> stream_syncs{0};  // cuStreamSynchronize calls
  static inline std::atomic<int> event_queries{0};  // cuEventQuery calls
  static inline std::atomic<int> event_syncs{0};    // cuEventSynchronize calls
  // Calls the Programming Guide lists as synchronizing the whole device: cuMemAlloc, cuMemFree,
  // cuMemHostAlloc, cuMemFreeHost.
  static inline std::atomic<int> device_syncs{0};
  static inline std::atomic<int> async_allocations{0};  // cuMemAllocAsync calls
  // cuCtxSynchronize calls: counted, and `context_sync` notified, when one starts to wait.
  static inline std::atomic<int> context_syncs{0};
  static inline std::mutex context_sync_mutex;
  static inline std::condition_variable context_sync;
  // The memory pool, as CUDA's behaves: a block freed in stream order (cuMemFreeAsync) is handed
  // to the next cuMemAllocAsync of its size at once, with the bytes it held, whatever another
  // stream still queues against it. Blocks by size; returned to the system only by a trim (a
  // process's pool goes when it ends). Never destroyed, so that its blocks stay reachable for
  // LeakSanitizer's check at exit, which runs after static destructors.
  struct Pool {
    std::mutex mutex;
    std::map<void*, size_t> sizes;                // every block's size
    std::map<size_t, std::vector<void*>> free;    // freed blocks by size, latest last
  };
  static Pool& pool() {
    static Pool* p = new Pool();
    return *p;
  }
  static inline std::atomic<uint64_t> release_threshold{0};  // as last set, on `threshold_pool`
  static inline std::atomic<CUmemoryPool> threshold_pool{nullptr};
  static inline std::atomic<CUmemoryPool> last_pool{nullptr};  // the pool of the latest allocation
  static inline std::atomic<int> pools_created{0}, pool_trims{0};
  // While set, an allocation from a pool finds the device out of memory until the pool is
  // trimmed (which clears it), as when freed blocks the pool keeps take the room.
  static inline std::atomic<bool> out_of_memory{false};
  static inline char context_object, module_object;
  // A latch that the next kernel launched while it is armed waits on, on its stream: holds that
  // stream's work back so that a test can submit more before it completes.
  static inline std::mutex latch_mutex;
  static inline std::condition_variable latch_open;
  static inline bool latch_armed = false, latch_closed = false;
  static void arm() {
    std::lock_guard<std::mutex> lock(latch_mutex);
    latch_armed = latch_closed = true;
  }
  static void release() {
    std::lock_guard<std::mutex> lock(latch_mutex);
    latch_closed = false;
    latch_open.notify_all();
  }
  // Kernels a test adds to the module, by name: from a launch's parameters and grid and block
  // sizes, the work its stream runs. Set before the module is used; never changed while in use.
  using ExtraKernel = std::function<std::function<void()>(void** params, unsigned grid, unsigned block)>;
  static inline std::map<std::string, ExtraKernel> extra_kernels;
  // Host ranges registered (start → size): CUDA refuses to register a page twice.
  static inline std::mutex registered_mutex;
  static inline std::map<uintptr_t, size_t> registered;
  static inline bool refuse_registration = false;
  // Host ranges (start → size) whose pages are read-only: registering them fails unless asked
  // read-only (CU_MEMHOSTREGISTER_READ_ONLY), as CUDA's does.
  static inline std::map<uintptr_t, size_t> read_only;
  static inline std::atomic<unsigned> last_register_flags{0};
  // Set once a kernel that prints has run (another library's): CUDA then refuses to resize the
  // printf buffer.
  static inline std::atomic<bool> printf_ran{false};
  static inline std::atomic<size_t> printf_buffer{size_t{1} << 20};  // CU_LIMIT_PRINTF_FIFO_SIZE  // every registration fails, as for read-only pages
  // Ends the sticky fault, as a new process would start without it.
  static void clear_fault() { fault() = 0; }
};

// A CUevent: recordings counted, completions counted as the stream reaches them.
struct FakeEvent {
  std::mutex mutex;
  std::condition_variable reached;
  uint64_t recorded = 0, completed = 0;
};

inline CUresult checked() {
  if (Fake::depth == 0) {
    ++Fake::misuse;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return static_cast<CUresult>(fault().load());
}

inline FakeStream* stream_of(CUstream s) { return reinterpret_cast<FakeStream*>(s); }

// A graph, or an instantiated one: its kernel nodes' work, in order.
struct FakeGraph {
  std::vector<std::function<void()>> nodes;
};
inline void* address(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
inline CUdeviceptr device_address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

// The kernels the fake module has: `fill_kernel` writes constant 0 into every u32 of binding 0
// (checks the parameters reach the launch), `fail_kernel` records failure code 7 in workgroup
// (2, 0, 0) through the status slot, as KILN_FAIL does; `trap_kernel` faults the context, as a
// kernel that executes __trap() does.
enum class FakeKernel : uintptr_t { kFill = 1, kFail = 2, kCopy = 3, kTrap = 4, kGate = 5 };

// The status slot of (ring, tag), as the ABI computes it.
inline uint32_t* slot_of(CUdeviceptr ring, uint32_t tag) { return static_cast<uint32_t*>(address(ring)) + (tag % 256u) * 8u; }

// cuMemAllocAsync and cuMemAllocFromPoolAsync: the latest block freed of that size (as a pool's
// cache hands them out, with its bytes), else a new one.
inline CUresult pool_allocate(CUdeviceptr* p, size_t bytes, CUmemoryPool pool) {
  ++Fake::async_allocations;
  Fake::last_pool = pool;
  if (Fake::out_of_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  Fake::Pool& blocks = Fake::pool();
  std::lock_guard<std::mutex> lock(blocks.mutex);
  if (std::vector<void*>& reusable = blocks.free[bytes]; !reusable.empty()) {
    *p = device_address(reusable.back());
    reusable.pop_back();
    return checked();
  }
  void* block = std::calloc(1, bytes);
  blocks.sizes[block] = bytes;
  *p = device_address(block);
  return checked();
}

// The device's default pool.
inline CUmemoryPool default_pool() {
  static char pool;
  return reinterpret_cast<CUmemoryPool>(&pool);
}

inline const Api& fake_api() {
  static const Api api = [] {
    Api a{};
    a.CtxPushCurrent = [](CUcontext) {
      ++Fake::depth;
      return CUDA_SUCCESS;
    };
    a.CtxPopCurrent = [](CUcontext*) {
      --Fake::depth;
      return CUDA_SUCCESS;
    };
    a.GetErrorName = [](CUresult code, const char** name) {
      *name = code == CUDA_ERROR_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_FAKE";
      return CUDA_SUCCESS;
    };
    a.DevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) {
      *c = reinterpret_cast<CUcontext>(&Fake::context_object);
      return CUDA_SUCCESS;
    };
    a.DevicePrimaryCtxRelease = [](CUdevice) { return CUDA_SUCCESS; };
    a.EventCreate = [](CUevent* e, unsigned) {
      *e = reinterpret_cast<CUevent>(new FakeEvent());
      return checked();
    };
    a.EventDestroy = [](CUevent e) {
      delete reinterpret_cast<FakeEvent*>(e);
      return checked();
    };
    a.EventRecord = [](CUevent e, CUstream st) {
      auto* event = reinterpret_cast<FakeEvent*>(e);
      uint64_t generation = 0;
      {
        std::lock_guard<std::mutex> lock(event->mutex);
        generation = ++event->recorded;
      }
      stream_of(st)->push([event, generation] {
        std::lock_guard<std::mutex> lock(event->mutex);
        event->completed = std::max(event->completed, generation);
        event->reached.notify_all();
      });
      return checked();
    };
    a.EventQuery = [](CUevent e) {
      ++Fake::event_queries;
      if (CUresult sticky = checked(); sticky != CUDA_SUCCESS) return sticky;
      auto* event = reinterpret_cast<FakeEvent*>(e);
      std::lock_guard<std::mutex> lock(event->mutex);
      return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    };
    a.EventSynchronize = [](CUevent e) {
      ++Fake::event_syncs;
      auto* event = reinterpret_cast<FakeEvent*>(e);
      std::unique_lock<std::mutex> lock(event->mutex);
      const uint64_t target = event->recorded;
      // A fault drops the event's completion: it is noticed on a wake-up (a bounded wait, so that
      // the fault need not know the events it strands).
      while (event->completed < target && fault() == 0) event->reached.wait_for(lock, std::chrono::milliseconds(1));
      lock.unlock();
      return checked();
    };
    a.StreamWaitEvent = [](CUstream st, CUevent e, unsigned) {
      ++Fake::stream_waits;
      auto* event = reinterpret_cast<FakeEvent*>(e);
      uint64_t target = 0;
      {
        std::lock_guard<std::mutex> lock(event->mutex);
        target = event->recorded;
      }
      stream_of(st)->push([event, target] {
        std::unique_lock<std::mutex> lock(event->mutex);
        while (event->completed < target && fault() == 0) event->reached.wait_for(lock, std::chrono::milliseconds(1));
      });
      return checked();
    };
    a.StreamCreate = [](CUstream* s, unsigned) {
      *s = reinterpret_cast<CUstream>(new FakeStream());
      return checked();
    };
    a.StreamDestroy = [](CUstream s) {
      delete stream_of(s);
      return checked();
    };
    a.StreamSynchronize = [](CUstream s) {
      ++Fake::stream_syncs;
      stream_of(s)->synchronize();
      return checked();
    };
    a.MemAlloc = [](CUdeviceptr* p, size_t bytes) {
      ++Fake::device_syncs;
      *p = device_address(std::calloc(1, bytes));
      return checked();
    };
    a.MemFree = [](CUdeviceptr p) {
      ++Fake::device_syncs;
      std::free(address(p));
      return checked();
    };
    a.MemAllocAsync = [](CUdeviceptr* p, size_t bytes, CUstream) { return pool_allocate(p, bytes, default_pool()); };
    a.MemAllocFromPoolAsync = [](CUdeviceptr* p, size_t bytes, CUmemoryPool pool, CUstream) {
      return pool_allocate(p, bytes, pool);
    };
    a.DeviceGetDefaultMemPool = [](CUmemoryPool* pool, CUdevice) {
      *pool = default_pool();
      return checked();
    };
    a.MemPoolCreate = [](CUmemoryPool* pool, const CUmemPoolProps* props) {
      if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      ++Fake::pools_created;
      *pool = reinterpret_cast<CUmemoryPool>(new char);
      return checked();
    };
    a.MemPoolDestroy = [](CUmemoryPool pool) {
      delete reinterpret_cast<char*>(pool);
      return checked();
    };
    a.MemPoolTrimTo = [](CUmemoryPool, size_t) {
      ++Fake::pool_trims;
      Fake::out_of_memory = false;
      Fake::Pool& pool = Fake::pool();
      std::lock_guard<std::mutex> lock(pool.mutex);
      for (auto& [bytes, blocks] : pool.free) {
        for (void* block : blocks) {
          pool.sizes.erase(block);
          std::free(block);
        }
        blocks.clear();
      }
      return checked();
    };
    a.MemPoolSetAttribute = [](CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
      if (attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_ERROR_INVALID_VALUE;
      Fake::release_threshold = *static_cast<uint64_t*>(value);
      Fake::threshold_pool = pool;
      return checked();
    };
    a.MemFreeAsync = [](CUdeviceptr p, CUstream) {
      Fake::Pool& pool = Fake::pool();
      std::lock_guard<std::mutex> lock(pool.mutex);
      auto block = pool.sizes.find(address(p));
      if (block == pool.sizes.end()) return CUDA_ERROR_INVALID_VALUE;
      pool.free[block->second].push_back(block->first);  // the next allocation on the stream may take it
      return checked();
    };
    a.CtxSynchronize = [] {
      ++Fake::context_syncs;
      {
        std::lock_guard<std::mutex> lock(Fake::context_sync_mutex);
        Fake::context_sync.notify_all();
      }
      // Under the registry's lock, so that no stream goes while it is waited for.
      std::lock_guard<std::mutex> lock(fake_streams().mutex);
      for (FakeStream* stream : fake_streams().live) stream->synchronize();
      return checked();
    };
    a.MemHostAlloc = [](void** p, size_t bytes, unsigned) {
      ++Fake::device_syncs;
      *p = std::calloc(1, bytes);
      return checked();
    };
    a.MemFreeHost = [](void* p) {
      ++Fake::device_syncs;
      std::free(p);
      return checked();
    };
    a.MemHostGetDevicePointer = [](CUdeviceptr* d, void* p, unsigned) {
      // Only inside a registered range (the stand-in maps host memory at its own address).
      std::lock_guard<std::mutex> lock(Fake::registered_mutex);
      const auto at = reinterpret_cast<uintptr_t>(p);
      for (const auto& [s, size] : Fake::registered) {
        if (at >= s && at < s + size) {
          *d = device_address(p);
          return checked();
        }
      }
      return CUDA_ERROR_INVALID_VALUE;
    };
    a.MemHostRegister = [](void* p, size_t n, unsigned flags) {
      Fake::last_register_flags = flags;
      if (Fake::refuse_registration) return CUDA_ERROR_NOT_SUPPORTED;
      std::lock_guard<std::mutex> lock(Fake::registered_mutex);
      const auto start = reinterpret_cast<uintptr_t>(p);
      for (const auto& [s, size] : Fake::registered) {
        if (start < s + size && s < start + n) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
      }
      for (const auto& [s, size] : Fake::read_only) {
        if (start < s + size && s < start + n && !(flags & CU_MEMHOSTREGISTER_READ_ONLY)) return CUDA_ERROR_INVALID_VALUE;
      }
      Fake::registered[start] = n;
      return checked();
    };
    a.MemHostUnregister = [](void* p) {
      std::lock_guard<std::mutex> lock(Fake::registered_mutex);
      if (Fake::registered.erase(reinterpret_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
      return checked();
    };
    a.MemcpyHtoDAsync = [](CUdeviceptr d, const void* s, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memcpy(address(d), s, n); });
      return checked();
    };
    a.MemcpyDtoHAsync = [](void* d, CUdeviceptr s, size_t n, CUstream st) {
      ++Fake::device_to_host;
      stream_of(st)->push([=] { std::memcpy(d, address(s), n); });
      return checked();
    };
    a.MemcpyDtoDAsync = [](CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memcpy(address(d), address(s), n); });
      return checked();
    };
    a.MemsetD8Async = [](CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memset(address(d), v, n); });
      return checked();
    };
    a.MemsetD16Async = [](CUdeviceptr d, unsigned short v, size_t n, CUstream st) {
      stream_of(st)->push([=] { for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(address(d))[i] = v; });
      return checked();
    };
    a.MemsetD32Async = [](CUdeviceptr d, unsigned v, size_t n, CUstream st) {
      stream_of(st)->push([=] { for (size_t i = 0; i < n; ++i) static_cast<uint32_t*>(address(d))[i] = v; });
      return checked();
    };
    a.CtxGetLimit = [](size_t* value, CUlimit) {
      *value = Fake::printf_buffer;
      return checked();
    };
    a.CtxSetLimit = [](CUlimit, size_t value) {
      if (Fake::printf_ran) return CUDA_ERROR_INVALID_VALUE;
      Fake::printf_buffer = value;
      return checked();
    };
    a.ModuleLoadDataEx = [](CUmodule* m, const void*, unsigned, CUjit_option*, void**) {
      *m = reinterpret_cast<CUmodule>(&Fake::module_object);
      return checked();
    };
    a.ModuleUnload = [](CUmodule) { return checked(); };
    a.ModuleGetFunction = [](CUfunction* f, CUmodule, const char* name) {
      const std::string n = name;
      FakeKernel kernel = n == "fill_kernel"      ? FakeKernel::kFill
                          : n == "fail_kernel"    ? FakeKernel::kFail
                          : n == "copy_kernel"    ? FakeKernel::kCopy
                          : n == "trap_kernel"    ? FakeKernel::kTrap
                          : n == "kiln_wait_gate" ? FakeKernel::kGate
                                                  : FakeKernel{};
      if (kernel == FakeKernel{}) {
        auto extra = Fake::extra_kernels.find(n);
        if (extra == Fake::extra_kernels.end()) return CUDA_ERROR_NOT_FOUND;
        *f = reinterpret_cast<CUfunction>(&extra->second);  // an address, never one of FakeKernel's values
        return checked();
      }
      *f = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(kernel));
      return checked();
    };
    a.FuncGetAttribute = [](int* v, CUfunction_attribute, CUfunction) {
      *v = 1024;
      return checked();
    };
    // What a launch of `f` with `params` (copied now, as CUDA does) puts on its stream.
    static auto kernel_work = [](CUfunction f, unsigned gx, unsigned bx, void** params) -> std::function<void()> {
      if (reinterpret_cast<uintptr_t>(f) > static_cast<uintptr_t>(FakeKernel::kGate)) {
        return (*reinterpret_cast<const Fake::ExtraKernel*>(f))(params, gx, bx);
      }
      // KILN_STATUS_PARAMS, then (base, offset, length) per binding, then the constants.
      const CUdeviceptr ring = *static_cast<CUdeviceptr*>(params[0]);
      const uint32_t tag = *static_cast<uint32_t*>(params[1]);
      const uint32_t command = *static_cast<uint32_t*>(params[2]);
      const auto kernel = static_cast<FakeKernel>(reinterpret_cast<uintptr_t>(f));
      std::function<void()> body;
      if (kernel == FakeKernel::kGate) {
        ++Fake::gate_launches;
        std::vector<std::pair<CUdeviceptr, uint32_t>> signallers;
        for (int i = 0; i < 4; ++i) {
          signallers.push_back({*static_cast<CUdeviceptr*>(params[3 + 2 * i]), *static_cast<uint32_t*>(params[4 + 2 * i])});
        }
        return [=] {
          for (auto [s, t] : signallers) {
            if (s && *static_cast<uint32_t*>(address(s)) == t) {
              slot_of(ring, tag)[1] = 0x7FFFFFFFu;
              slot_of(ring, tag)[0] = tag;
              return;
            }
          }
        };
      }
      if (kernel == FakeKernel::kTrap) {
        body = [] { fault() = CUDA_ERROR_LAUNCH_FAILED; };
      } else if (kernel == FakeKernel::kFail) {
        body = [=] {
          uint32_t* slot = slot_of(ring, tag);
          slot[1] = 7;
          slot[2] = command;
          slot[3] = gx > 2 ? 2 : 0;
          slot[0] = tag;
        };
      } else {
        const CUdeviceptr base = *static_cast<CUdeviceptr*>(params[3]);
        const uint64_t offset = *static_cast<uint64_t*>(params[4]), length = *static_cast<uint64_t*>(params[5]);
        auto* data = reinterpret_cast<uint32_t*>(static_cast<char*>(address(base)) + offset);
        if (kernel == FakeKernel::kFill) {
          const uint32_t value = *static_cast<uint32_t*>(params[6]);
          body = [=] {
            for (uint64_t i = 0; i < length / 4; ++i) data[i] = value;
          };
        } else {
          auto* target = reinterpret_cast<uint32_t*>(static_cast<char*>(address(*static_cast<CUdeviceptr*>(params[6]))) +
                                                     *static_cast<uint64_t*>(params[7]));
          body = [=] { std::memcpy(target, data, length); };
        }
      }
      bool latched = false;
      {
        std::lock_guard<std::mutex> lock(Fake::latch_mutex);
        latched = Fake::latch_armed;
        Fake::latch_armed = false;
      }
      return [=] {
        if (latched) {
          std::unique_lock<std::mutex> lock(Fake::latch_mutex);
          Fake::latch_open.wait(lock, [] { return !Fake::latch_closed; });
        }
        if (slot_of(ring, tag)[0] == tag) return;  // KILN_ENTRY: the action already failed
        body();
      };
    };
    a.LaunchKernel = [](CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned,
                        CUstream st, void** params, void**) {
      ++Fake::launches;
      stream_of(st)->push(kernel_work(f, gx, bx, params));
      return checked();
    };
    // Graphs of kernel nodes run in the order they were added (kiln chains each on the one before).
    a.GraphCreate = [](CUgraph* g, unsigned) {
      *g = reinterpret_cast<CUgraph>(new FakeGraph());
      return checked();
    };
    a.GraphDestroy = [](CUgraph g) {
      delete reinterpret_cast<FakeGraph*>(g);
      return checked();
    };
    a.GraphAddKernelNode = [](CUgraphNode* node, CUgraph g, const CUgraphNode*, size_t,
                              const CUDA_KERNEL_NODE_PARAMS* p) {
      auto* graph = reinterpret_cast<FakeGraph*>(g);
      graph->nodes.push_back(kernel_work(p->func, p->gridDimX, p->blockDimX, p->kernelParams));
      *node = reinterpret_cast<CUgraphNode>(graph->nodes.size());  // the node's position from 1
      return checked();
    };
    a.GraphInstantiate = [](CUgraphExec* exec, CUgraph g, unsigned long long) {
      *exec = reinterpret_cast<CUgraphExec>(new FakeGraph(*reinterpret_cast<FakeGraph*>(g)));
      return checked();
    };
    a.GraphExecKernelNodeSetParams = [](CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
      ++Fake::graph_node_updates;
      reinterpret_cast<FakeGraph*>(exec)->nodes.at(reinterpret_cast<size_t>(node) - 1) =
          kernel_work(p->func, p->gridDimX, p->blockDimX, p->kernelParams);
      return checked();
    };
    a.GraphLaunch = [](CUgraphExec exec, CUstream st) {
      ++Fake::graph_launches;
      for (const std::function<void()>& work : reinterpret_cast<FakeGraph*>(exec)->nodes) stream_of(st)->push(work);
      return checked();
    };
    a.GraphExecDestroy = [](CUgraphExec exec) {
      delete reinterpret_cast<FakeGraph*>(exec);
      return checked();
    };
    return a;
  }();
  return api;
}

// The record of the stand-in's device "cuda:0", as a GPU kiln supports has it: compute
// capability 9.0, 80 GiB, mapped host memory and memory pools (CUDA 11.2 and later).
inline CuDeviceRecord fake_record(bool memory_pools = true) {
  CuDeviceRecord record;
  record.name = "fake";
  record.compute_major = 9;
  record.can_map_host_memory = true;
  record.memory_pools = memory_pools;
  record.info.capabilities.total_memory = uint64_t{80} << 30;
  record.info.name = "cuda:0";
  record.info.driver = "cuda";
  record.info.capabilities.executable_formats = {"cuda-c"};
  return record;
}

}  // namespace kiln::cuda::fake
