// The RAL against what a user would do without it, in the same run:
//  - a warm call as compiled code makes it (ctx->call(ctx, mangled_name, args) to an empty
//    registered function) against a plain indirect call of an empty function;
//  - the library's sort of 2^22 f32 (stable, NaNs last) against std::sort of the same data;
//  - random_uniform of 2^24 f32 against memcpy of the same bytes, and the same numbers from each
//    kind of Philox code this processor runs (the library takes the widest);
//  - gemm of a few rows (a dense layer at batch 1 to 8) as compiled code calls it, against
//    cblas_sgemm of the same product called directly. This program loads OpenBLAS before kiln
//    can name its kernels (openblas.cc): set OPENBLAS_CORETYPE to compare the kernels kiln runs.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/base/random.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/philox.h"

namespace kiln::ral {
namespace {

void empty(ExecutionContext*, int64_t) {}

// The baseline: what the call costs without the RAL, through a pointer the compiler cannot see.
using PlainFn = int (*)(void*, int64_t);
int plain_empty(void*, int64_t) { return 0; }
PlainFn volatile plain_pointer = &plain_empty;

void BM_PlainIndirectCall(benchmark::State& state) {
  int64_t x = 1;
  for (auto _ : state) {
    PlainFn fn = plain_pointer;
    benchmark::DoNotOptimize(fn(nullptr, x));
  }
}
BENCHMARK(BM_PlainIndirectCall);

void BM_RalCallWarm(benchmark::State& state) {
  Registry registry;
  if (!registry.add(make_function<"empty", "cpu", &empty>()).ok()) {
    state.SkipWithError("registration failed");
    return;
  }
  Context context("cpu", registry);
  ExecutionContext execution(context);
  kiln_ral_context_t* ctx = execution.abi();
  static const char kName[] = "empty___cpu___pvoid_i64___void";
  int64_t x = 1;
  void* args[] = {&ctx, &x};
  for (auto _ : state) {
    benchmark::DoNotOptimize(ctx->call(ctx, kName, args));
  }
  if (!execution.finish().ok()) state.SkipWithError("a call failed");
}
BENCHMARK(BM_RalCallWarm);

std::vector<float> sort_input() {
  std::vector<float> x(size_t{1} << 22);
  Random random(1);
  for (float& v : x) v = static_cast<float>(random.normal(0, 1));
  return x;
}

void BM_StdSort(benchmark::State& state) {
  const std::vector<float> x = sort_input();
  std::vector<float> y(x.size());
  for (auto _ : state) {
    std::copy(x.begin(), x.end(), y.begin());
    std::sort(y.begin(), y.end());
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_StdSort)->Unit(benchmark::kMillisecond)->UseRealTime();

// One library call through the global registry, as a routine's `call` makes it.
void run_call(benchmark::State& state, const char* name, std::vector<void*> args) {
  Context context("cpu");
  ExecutionContext execution(context, 1);
  kiln_ral_context_t* ctx = execution.abi();
  args.insert(args.begin(), &ctx);
  for (auto _ : state) {
    if (ctx->call(ctx, name, args.data()) != 0) {
      state.SkipWithError(execution.status().to_string().c_str());
      return;
    }
  }
}

void BM_RalSort(benchmark::State& state) {
  const std::vector<float> x = sort_input();
  std::vector<float> y(x.size());
  MemRef<float, 1> xm{const_cast<float*>(x.data()), {static_cast<int64_t>(x.size())}};
  MemRef<float, 1> ym{y.data(), {static_cast<int64_t>(y.size())}};
  int64_t descending = 0;
  run_call(state, "sort___cpu___pvoid_m1df32_m1df32_i64___void", {&xm, &ym, &descending});
}
BENCHMARK(BM_RalSort)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr size_t kRandomCount = size_t{1} << 24;

void BM_Memcpy(benchmark::State& state) {
  std::vector<float> a(kRandomCount, 1.0f), b(kRandomCount);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kRandomCount * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kRandomCount * sizeof(float)));
}
BENCHMARK(BM_Memcpy)->UseRealTime();

void BM_RalRandomUniform(benchmark::State& state) {
  std::vector<float> r(kRandomCount);
  MemRef<float, 1> rm{r.data(), {static_cast<int64_t>(kRandomCount)}};
  float lo = 0, hi = 1;
  int64_t site = 0;
  run_call(state, "random_uniform___cpu___pvoid_m1df32_f32_f32_i64___void", {&rm, &lo, &hi, &site});
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kRandomCount * sizeof(float)));
}
BENCHMARK(BM_RalRandomUniform)->UseRealTime();

// Argument: the PhiloxCode (0 portable, 1 AVX2, 2 AVX-512F).
void BM_PhiloxUniformByCode(benchmark::State& state) {
  const auto code = static_cast<PhiloxCode>(state.range(0));
  if (!philox_code_runs(code)) {
    state.SkipWithError("this processor does not run that code");
    return;
  }
  std::vector<float> r(kRandomCount);
  const PhiloxStream stream{1, 0, 0};
  for (auto _ : state) {
    stream.fill_uniform(0, r.data(), r.size(), 0, 1, code);
    benchmark::DoNotOptimize(r.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kRandomCount * sizeof(float)));
}
BENCHMARK(BM_PhiloxUniformByCode)->DenseRange(0, 2)->UseRealTime();

// c (m x n) = a (m x k) @ b (k x n), f32, as compiled code calls gemm on the cpu device.
void BM_RalGemmFewRows(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::vector<float> a(size_t(m * k), 0.5f), b(size_t(k * n), 0.25f), c(size_t(m * n));
  Context context("cpu");
  ExecutionContext execution(context);
  kiln_ral_context_t* ctx = execution.abi();
  MemRef<float, 2> am{a.data(), {m, k}}, bm{b.data(), {k, n}}, cm{c.data(), {m, n}};
  int64_t no = 0;
  float alpha = 1, beta = 0;
  void* args[] = {&ctx, &am, &bm, &cm, &no, &no, &alpha, &beta, &no};
  static const char kName[] = "gemm___cpu___pvoid_m2df32_m2df32_m2df32_i64_i64_f32_f32_i64___void";
  for (auto _ : state) {
    benchmark::DoNotOptimize(ctx->call(ctx, kName, args));
    benchmark::ClobberMemory();
  }
  if (!execution.finish().ok()) state.SkipWithError("gemm failed");
}
BENCHMARK(BM_RalGemmFewRows)->Args({1, 256, 256})->Args({4, 256, 256})->Args({8, 512, 64})->Args({1, 1024, 256})
    ->UseRealTime();

void BM_OpenBlasGemmFewRows(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(),
                n);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_OpenBlasGemmFewRows)->Args({1, 256, 256})->Args({4, 256, 256})->Args({8, 512, 64})->Args({1, 1024, 256})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::ral

BENCHMARK_MAIN();
