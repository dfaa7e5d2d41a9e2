// OpenBLAS's sgemm called directly on 2 threads: the baseline of every matrix-product benchmark
// (compiler_bench, opencl_bench), and the GFLOPS counter they all report.
#pragma once

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <vector>

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

}  // namespace kiln::bench
