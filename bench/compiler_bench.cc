// The compiler's figures, each against a baseline in the same run:
//  - a fused elementwise chain y = relu(a * b + c) over 2^24 floats vs memcpy (bytes moved/s);
//  - f32 matrix products written in the language (n = 32 to 1024, with and without the automatic
//    gemm call) vs OpenBLAS sgemm called directly, 2 threads; the generated product at 512^3,
//    1024^3 and 1000 x 333 x 777, its sizes numbers or known only when it runs, vs sgemm;
//  - compile latency of each example: cold (C compiler runs) vs warm (disk cache hit);
//  - lowering time of N copies of `y[i] += x[i]` (fused into one kernel) for N = 1000 (the
//    baseline) to 20000: near-linear, so the time per statement should stay flat.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_common.h"
#include "sgemm_baseline.h"
#include "base/disk_cache.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {
namespace {

constexpr int64_t kChain = int64_t{1} << 24;

std::unique_ptr<runtime::ProgramInstance> instance_of(const std::string& text, uint32_t threads,
                                                     const ir::LowerOptions& lower = {}) {
  ir::Program program = check(lang::parse_program(text, "bench.kiln"), "parse");
  runtime::ProgramOptions options;
  options.lower = lower;
  return check(runtime::ProgramInstance::create(make_cpu_device(threads), program, options), "compile");
}

void BM_Memcpy(benchmark::State& state) {
  std::vector<float> src(kChain, 1.0f), dst(kChain);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kChain * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kChain * int64_t{sizeof(float)});
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ElementwiseChain(benchmark::State& state) {
  auto p = instance_of("input a : f32[16777216]\ninput b : f32[16777216]\ninput c : f32[16777216]\n"
                       "output y : f32[16777216]\ny[i] = relu(a[i] * b[i] + c[i])\n", 0);
  for (auto _ : state) check(p->run("main"), "run");
  // Three arrays read, one written.
  state.SetBytesProcessed(state.iterations() * 4 * kChain * int64_t{sizeof(float)});
}
BENCHMARK(BM_ElementwiseChain)->UseRealTime()->Unit(benchmark::kMillisecond);

// Row reductions over 4096 x 1024 f32 (the peer table's rows), with float reductions split into
// vector lanes (reassociate:1, the default) and in program order (reassociate:0, --strict-fp):
// the baseline of the split in the same run.
void BM_RowReduction(benchmark::State& state) {
  const bool softmax = state.range(0) == 1;
  ir::LowerOptions lower;
  lower.reassociate = state.range(1) != 0;
  const std::string text =
      softmax ? "input x : f32[4096, 1024]\noutput y : f32[4096, 1024]\ntensor m : f32[4096]\n"
                "tensor e : f32[4096, 1024]\ntensor s : f32[4096]\nm[i] = max(x[i, j])\n"
                "e[i, j] = exp(x[i, j] - m[i])\ns[i] = sum(e[i, j])\ny[i, j] = e[i, j] / s[i]\n"
              : "input x : f32[4096, 1024]\noutput y : f32[4096]\ny[i] = sum(x[i, j])\n";
  auto p = instance_of(text, 0, lower);
  for (auto _ : state) check(p->run("main"), "run");
  state.SetBytesProcessed(state.iterations() * 4096 * 1024 * int64_t{sizeof(float)});
  state.SetLabel(softmax ? "row softmax" : "row sum");
}
BENCHMARK(BM_RowReduction)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->ArgNames({"softmax", "reassociate"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

std::string matmul_text(int64_t n) {
  const std::string d = std::to_string(n);
  return "input a : f32[" + d + ", " + d + "]\ninput b : f32[" + d + ", " + d + "]\noutput c : f32[" + d + ", " + d +
         "]\nc[i, j] = sum(a[i, k] * b[k, j])\n";
}

// OpenBLAS called directly on 2 threads: the baseline of every matrix product below.
void BM_OpenBlasSgemm(benchmark::State& state) { run_openblas_sgemm(state, static_cast<int>(state.range(0))); }
BENCHMARK(BM_OpenBlasSgemm)->ArgName("n")->Arg(32)->Arg(64)->Arg(128)->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The product written in the language, run by `ProgramInstance::run` (submission to completion)
// on 2 threads: with automatic calls (gemm through the RAL when n^3 >= 64^3) and without (the
// kernel kiln generates). The small sizes are where the threshold was measured.
void BM_KilnMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool auto_calls = state.range(1) != 0;
  ir::LowerOptions lower;
  lower.auto_calls = auto_calls;
  lower.library_calls.min_gemm_volume = 0;  // auto_calls = 1 always calls, to measure the call
  auto p = instance_of(matmul_text(n), 2, lower);
  for (auto _ : state) check(p->run("main"), "run");
  set_gflops(state, n);
}
BENCHMARK(BM_KilnMatmul)
    ->ArgNames({"n", "auto_calls"})
    ->ArgsProduct({{8, 16, 32, 64, 128, 512}, {0, 1}})
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The generated product (--no-auto-calls) against OpenBLAS sgemm of the same shape, 2 threads
// (issue 30): shapes rows x inner x cols (c[M, N] = sum over K of a[M, K] * b[K, N]) 512^3,
// 1024^3 and 1000 x 333 x 777 (no size a multiple of the 6 x 16 tile); the program with its
// sizes written as numbers (sized:0), with M a size (sized:1, language version 2, the size bound
// when it runs), and with M, K and N sizes (sized:2). BM_OpenBlasProduct is the baseline.
const int64_t kProductShapes[][3] = {{512, 512, 512}, {1024, 1024, 1024}, {1000, 333, 777}};

void set_product_gflops(benchmark::State& state, const int64_t* shape) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(shape[0] * shape[1] * shape[2]) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]));
}

// Inputs of real values (untouched pages would all read one zero page).
std::vector<float> product_values(int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  return values;
}

void BM_OpenBlasProduct(benchmark::State& state) {
  const int64_t* s = kProductShapes[state.range(0)];
  openblas_set_num_threads(2);
  std::vector<float> a = product_values(s[0] * s[1]), b = product_values(s[1] * s[2]), c(size_t(s[0] * s[2]));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s[0]), int(s[2]), int(s[1]), 1.0f, a.data(), int(s[1]),
                b.data(), int(s[2]), 0.0f, c.data(), int(s[2]));
    benchmark::ClobberMemory();
  }
  set_product_gflops(state, s);
}
BENCHMARK(BM_OpenBlasProduct)->ArgName("shape")->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KilnProduct(benchmark::State& state) {
  const int64_t* s = kProductShapes[state.range(0)];
  const int64_t sized = state.range(1);
  const std::string m = std::to_string(s[0]), k = std::to_string(s[1]), n = std::to_string(s[2]);
  const std::string text =
      sized == 0   ? "input a : f32[" + m + ", " + k + "]\ninput b : f32[" + k + ", " + n + "]\noutput c : f32[" + m + ", " + n + "]\n"
      : sized == 1 ? "size M\ninput a : f32[M, " + k + "]\ninput b : f32[" + k + ", " + n + "]\noutput c : f32[M, " + n + "]\n"
                   : "size M\nsize K\nsize N\ninput a : f32[M, K]\ninput b : f32[K, N]\noutput c : f32[M, N]\n";
  ir::Program program = check(lang::parse_program(text + "c[i, j] = sum(a[i, k] * b[k, j])\n", "bench.kiln"), "parse");
  runtime::ProgramOptions options;
  options.lower.auto_calls = false;
  if (sized == 1) options.sizes = {s[0]};
  if (sized == 2) options.sizes = {s[0], s[1], s[2]};
  auto p = check(runtime::ProgramInstance::create(make_cpu_device(2), program, options), "compile");
  const std::vector<float> a = product_values(s[0] * s[1]), b = product_values(s[1] * s[2]);
  check(p->write("a", a.data(), a.size() * sizeof(float)), "write a");
  check(p->write("b", b.data(), b.size() * sizeof(float)), "write b");
  for (auto _ : state) check(p->run("main"), "run");
  set_product_gflops(state, s);
}
BENCHMARK(BM_KilnProduct)
    ->ArgNames({"shape", "sized"})
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Contractions the matcher turns into gemm beyond the 2-D form (issue 33), on 2 threads, with
// the call (auto_calls = 1) and as the generated loop nests (0): the dense layer
// z[n, k] = sum(h[n, c, y, x] * wd[c, y, x, k]) (64 x 512 x 10), and 8 batched 128³ products.
// Medians of 5 on the 2-core development machine under load: dense 156 µs as loops, 21 µs as
// gemm (7.4×); batched 510 µs as loops, 429 µs as gemm (1.2×). One run where the batched case
// followed the dense ones in the same process measured 1192 µs with gemm (not understood yet).
void BM_KilnContraction(benchmark::State& state) {
  const bool batched = state.range(0) != 0;
  ir::LowerOptions lower;
  lower.auto_calls = state.range(1) != 0;
  const std::string text =
      batched ? "input a : f32[8, 128, 128]\ninput b : f32[8, 128, 128]\noutput c : f32[8, 128, 128]\n"
                "c[n, i, j] = sum(a[n, i, k] * b[n, k, j])\n"
              : "input h : f32[64, 32, 4, 4]\ninput wd : f32[32, 4, 4, 10]\noutput z : f32[64, 10]\n"
                "z[n, k] = sum(h[n, c, y, x] * wd[c, y, x, k])\n";
  auto p = instance_of(text, 2, lower);
  for (auto _ : state) check(p->run("main"), "run");
  state.SetLabel(batched ? "8 x 128^3 batched" : "dense 64x512x10");
}
BENCHMARK(BM_KilnContraction)
    ->ArgNames({"batched", "auto_calls"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

const char* const kExamples[] = {"matmul_bias_relu", "softmax", "conv2d", "layernorm", "maxpool", "mlp"};

// Cold: a fresh cache directory, so the C compiler runs. Warm: a new device (empty memory cache)
// on a cache directory that already holds the build.
void compile_latency(benchmark::State& state, bool warm) {
  const std::string name = kExamples[state.range(0)];
  std::string text = check(read_file(std::string(KILN_SOURCE_DIR) + "/examples/kiln/" + name + ".kiln"), "read");
  ir::Program program = check(lang::parse_program(text, name + ".kiln"), "parse");
  char dir_template[] = "/tmp/kiln-bench-XXXXXX";
  std::string root = mkdtemp(dir_template);
  int fresh = 0;
  hal::DeviceOptions options;
  options.cache_dir = root + "/warm";
  if (warm) check(runtime::ProgramInstance::create(check(drivers::builtin_registry().find("cpu"), "cpu")->create_device(0, options).value(), program).status(), "prime");
  for (auto _ : state) {
    if (!warm) options.cache_dir = root + "/cold" + std::to_string(fresh++);
    hal::DeviceRef device = check(drivers::builtin_registry().find("cpu"), "cpu")->create_device(0, options).value();
    check(runtime::ProgramInstance::create(device, program).status(), "compile");
  }
  state.SetLabel(name);
  std::filesystem::remove_all(root);
}
void BM_CompileCold(benchmark::State& state) { compile_latency(state, false); }
void BM_CompileWarm(benchmark::State& state) { compile_latency(state, true); }
BENCHMARK(BM_CompileCold)->DenseRange(0, 5)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_CompileWarm)->DenseRange(0, 5)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LowerStatements(benchmark::State& state) {
  std::string text = "input x : f32[16]\noutput y : f32[16]\n";
  for (int64_t s = 0; s < state.range(0); ++s) text += "y[i] += x[i]\n";
  ir::Program program = check(lang::parse_program(text, "bench.kiln"), "parse");
  for (auto _ : state) benchmark::DoNotOptimize(check(ir::lower_program(program), "lower"));
  state.counters["per_statement"] = benchmark::Counter(
      double(state.range(0)) * double(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LowerStatements)->ArgName("statements")->Arg(1000)->Arg(2000)->Arg(4000)->Arg(8000)->Arg(20000)
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
