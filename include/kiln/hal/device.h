// Device: one instance of a driver's hardware: its allocator, queues, compiler and capabilities.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/hal/semaphore.h"

namespace kiln::hal {

struct DeviceCapabilities {
  uint32_t compute_units = 1;
  uint64_t max_allocation_size = 0;
  uint64_t total_memory = 0;
  uint32_t max_workgroup_size = 1;
  bool fp64 = false;
  bool fp16 = false;
  uint64_t local_memory_size = 0;
  // Device memory is host memory (mapping is free; no staging needed).
  bool unified_memory = false;
  std::vector<std::string> executable_formats;
  // How the runtime sizes a dispatch whose workgroup count the program does not fix: at most
  // workgroups_per_compute_unit × compute_units workgroups, each with at least
  // min_stores_per_workgroup stores (a measure of its work). A CPU thread's hand-off costs
  // microseconds, so few large workgroups; a GPU needs many blocks in flight on every SM to
  // reach its memory bandwidth, so many small ones.
  uint32_t workgroups_per_compute_unit = 4;
  int64_t min_stores_per_workgroup = int64_t{1} << 16;
  // Work of at most this many stores is cheaper to run on the submitting thread than to hand to
  // the queue's thread: the runtime submits such work with Placement::kCallerWhenReady. Nonzero
  // exactly where the device's queues honour that placement; 0 where work never runs on the
  // caller's thread (a GPU's queues: their work is asynchronous to the host anyway).
  int64_t max_caller_stores = 0;
};

struct DeviceInfo {
  std::string driver;
  uint32_t ordinal = 0;
  std::string name;         // "cpu:0"
  std::string description;  // human-readable, e.g. the processor model
  DeviceCapabilities capabilities;
};

// Options a driver may honour when creating a device; unset means the driver's default (which
// may itself come from the environment, e.g. KILN_CPU_THREADS).
struct DeviceOptions {
  // cpu and interp: the threads that run a dispatch, 1-1024, the queue's own thread among them
  // (it helps: the pool starts one worker fewer).
  std::optional<uint32_t> worker_threads;
  std::optional<std::string> cache_dir;   // "" disables the disk cache
  std::optional<std::string> c_compiler;  // CPU driver: the C compiler to run
  // OpenCL driver: hand waits between its actions to the device (else KILN_OPENCL_DEVICE_WAITS,
  // else on for all but CPU devices).
  std::optional<bool> device_waits;
  // CPU and interp drivers: DeviceCapabilities::max_caller_stores (0: every action runs on the
  // queue's threads, as before kiln ran small work on the caller's thread).
  std::optional<int64_t> max_caller_stores;
  // CPU and interp drivers: once the device has a second queue, pin its queues' threads to cores
  // round-robin (else KILN_CPU_AFFINITY, else off). For a process that has the cores to itself;
  // beside other busy threads a pinned thread cannot move away from them.
  std::optional<bool> spread_queues;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual Allocator& allocator() = 0;
  virtual Result<QueueRef> create_queue(const std::string& name = "") = 0;
  // Builds an executable with the device's compiler (cached by content where the driver can).
  virtual Result<ExecutableRef> compile_executable(const ExecutableSource& source) = 0;

  // Runs part(0) ... part(parts - 1), each once, on the threads with which this device computes
  // on the host (the cpu device's workgroup threads, the calling thread among them), and returns
  // when every one has run; a device that computes elsewhere runs them in order on the caller.
  // For library functions that compute on the host (ral::ExecutionContext::host_parallel): they
  // then share the device's threads instead of starting their own beside them. Parts must not
  // depend on each other's order.
  virtual void host_parallel(uint64_t parts, const std::function<void(uint64_t)>& part) {
    for (uint64_t i = 0; i < parts; ++i) part(i);
  }
  // The number of threads host_parallel spreads parts over.
  virtual uint32_t host_threads() const { return 1; }

  std::shared_ptr<Semaphore> create_semaphore(uint64_t initial_value = 0) {
    return Semaphore::create(initial_value);
  }
  std::shared_ptr<CommandBuffer> create_command_buffer() { return CommandBuffer::create(tag()); }
  // Identifies this device's objects (buffers, executables) to its queues.
  const void* tag() const { return this; }
};

using DeviceRef = std::shared_ptr<Device>;

}  // namespace kiln::hal
