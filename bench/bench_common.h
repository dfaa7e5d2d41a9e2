// Shared setup for the HAL benchmarks: a CPU device, and kernels compiled once.
#pragma once

#include <cstdio>
#include <cstdlib>

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

inline hal::DeviceRef make_cpu_device(uint32_t threads = 0) {
  hal::DeviceOptions options;
  if (threads) options.worker_threads = threads;
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

}  // namespace kiln::bench
