// OpenBLAS's sgemm called directly on 2 threads: the baseline of every matrix-product benchmark
// (compiler_bench, opencl_bench, cuda_bench), the GFLOPS counter they all report, and the
// product written in the language, run on a device.
#pragma once

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/lang/parser.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {

inline void set_gflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n * n * n) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// c = a @ b, n x n f32, every iteration.
inline void run_openblas_sgemm(benchmark::State& state, int n) {
  openblas_set_num_threads(2);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
    benchmark::ClobberMemory();
  }
  set_gflops(state, n);
}

// c[i, j] = sum(a[i, k] * b[k, j]) in the language (an automatic gemm call), n x n f32, on
// `device`, with the environment variable `variable` set to `value` while it runs. The first run
// is untimed (libraries build their kernels on it); its error skips the benchmark.
inline void run_language_gemm(benchmark::State& state, const hal::DeviceRef& device, int n, const char* variable,
                              const char* value) {
  setenv(variable, value, 1);
  const std::string d = std::to_string(n), square = "f32[" + d + ", " + d + "]";
  Result<ir::Program> program = lang::parse_program(
      "input a : " + square + "\ninput b : " + square + "\noutput c : " + square + "\nc[i, j] = sum(a[i, k] * b[k, j])\n",
      "gemm.kiln");
  Result<std::unique_ptr<runtime::ProgramInstance>> p =
      program.ok() ? runtime::ProgramInstance::create(device, *program, {})
                   : Result<std::unique_ptr<runtime::ProgramInstance>>(program.status());
  Status first = p.ok() ? (*p)->run("main") : p.status();
  if (!first.ok()) {
    unsetenv(variable);
    return state.SkipWithError(first.to_string().c_str());
  }
  for (auto _ : state) {
    Status ran = (*p)->run("main");
    if (!ran.ok()) {
      state.SkipWithError(ran.to_string().c_str());
      break;
    }
  }
  unsetenv(variable);
  set_gflops(state, n);
}

}  // namespace kiln::bench
