// Shared setup for the HAL benchmarks: a CPU device, and kernels compiled once.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <benchmark/benchmark.h>

#include <vector>

#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"

namespace kiln::bench {

inline void check(const Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.to_string().c_str());
    std::exit(1);
  }
}

template <typename T>
T check(Result<T> result, const char* what) {
  check(result.status(), what);
  return std::move(result).value();
}

// `max_caller_stores` < 0: the device's default (hal::DeviceOptions::max_caller_stores).
inline hal::DeviceRef make_cpu_device(uint32_t threads = 0, int64_t max_caller_stores = -1) {
  hal::DeviceOptions options;
  if (threads) options.worker_threads = threads;
  if (max_caller_stores >= 0) options.max_caller_stores = max_caller_stores;
  return check(drivers::builtin_registry().find("cpu"), "find cpu driver")
      ->create_device(0, options)
      .value();
}

// `empty` does nothing; `spin` burns about constants[0] * 1000 multiply-adds per workgroup and
// stores the result so that it cannot be optimized away.
inline const char* kBenchKernels = R"C(
int empty(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) { return 0; }
int spin(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  float* out = (float*)s->bindings[0];
  float a = 1.0f + id->x * 1e-6f, b = 0.999999f;
  for (uint32_t i = 0; i < s->constants[0] * 1000u; ++i) a = a * b + 1e-7f;
  out[id->x] = a;
  return 0;
}
)C";

inline hal::ExecutableRef make_bench_executable(hal::Device& device) {
  return check(device.compile_executable({"c", kBenchKernels, {{"empty", 0, 0}, {"spin", 1, 1}},
                                          "bench_kernels.c"}),
               "compile bench kernels");
}

// The loops the device benchmarks (opencl_bench, cuda_bench) time against direct driver calls.

// A trivial dispatch of export 0 of `exe`, signalling a semaphore the host waits on.
inline void time_kiln_dispatch(benchmark::State& state, hal::Device& device, const hal::ExecutableRef& exe,
                               uint32_t ordinal = 0) {
  hal::QueueRef queue = check(device.create_queue(), "queue");
  auto done = device.create_semaphore(0);
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    check(queue->dispatch({}, {{done, n}}, hal::DispatchCommand{exe, ordinal, {1, 1, 1}, {}, {}}), "dispatch");
    check(done->wait(n, Timeout::infinite()), "wait");
  }
}

// `length` trivial dispatches alternating between two queues, each waiting for the one before on
// one timeline, then one host wait.
inline void time_kiln_chain(benchmark::State& state, hal::Device& device, const hal::ExecutableRef& exe,
                            uint64_t length, uint32_t ordinal = 0) {
  hal::QueueRef queues[2] = {check(device.create_queue(), "queue"), check(device.create_queue(), "queue")};
  auto s = device.create_semaphore(0);
  uint64_t n = 0;
  for (auto _ : state) {
    for (uint64_t i = 0; i < length; ++i, ++n) {
      check(queues[i % 2]->dispatch({{s, n}}, {{s, n + 1}}, hal::DispatchCommand{exe, ordinal, {1, 1, 1}, {}, {}}),
            "dispatch");
    }
    check(s->wait(n, Timeout::infinite()), "wait");
  }
}

// `bytes` from host memory to a buffer (write) or back (read), and a semaphore wait.
inline void time_kiln_copy(benchmark::State& state, hal::Device& device, size_t bytes, bool write) {
  hal::QueueRef queue = check(device.create_queue(), "queue");
  hal::BufferRef buffer = check(device.allocator().allocate({}, bytes), "alloc");
  std::vector<uint8_t> host(bytes, 1);
  auto done = device.create_semaphore(0);
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    if (write) {
      check(queue->write({}, {{done, n}}, host.data(), buffer, 0, bytes), "write");
    } else {
      check(queue->read({}, {{done, n}}, buffer, 0, host.data(), bytes), "read");
    }
    check(done->wait(n, Timeout::infinite()), "wait");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

}  // namespace kiln::bench
