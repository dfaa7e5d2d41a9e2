// Gathers (language version 2) on cpu (2 threads by default), against what a user would write
// instead, in the same run:
//  - BM_EmbeddingLookup: `out[i, j] = e[t[i], j]`, 65536 rows of 128 f32 looked up in a table of
//    32768 rows (a 16 MiB table, 32 MiB out), kiln:1, against a loop of one memcpy per row on
//    one thread, kiln:0 (what NumPy's take does: `make bench-peers` has NumPy itself);
//  - BM_PickLabel: the loss term `z[n, lab[n]]` over 65536 rows of 1000 classes as a gather,
//    gather:1, against the one-hot workaround `sum(select(k == lab[n], z[n, k], 0))`, gather:0,
//    which reads every class.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {
namespace {

constexpr int64_t kVocabulary = 32768, kWidth = 128, kLookups = 65536;

std::unique_ptr<runtime::ProgramInstance> compile(const std::string& text) {
  ir::Program program = check(lang::parse_program(text, "gather.kiln"), "parse");
  return check(runtime::ProgramInstance::create(make_cpu_device(), program), "compile");
}

// Positions spread over the table in a fixed pseudo-random order (every 7919th row).
std::vector<int32_t> positions(int64_t count, int64_t range) {
  std::vector<int32_t> t(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % range);
  return t;
}

std::vector<float> values(int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  return v;
}

void BM_EmbeddingLookup(benchmark::State& state) {
  const std::vector<float> e = values(kVocabulary * kWidth);
  const std::vector<int32_t> t = positions(kLookups, kVocabulary);
  std::vector<float> out(static_cast<size_t>(kLookups * kWidth));
  if (state.range(0) == 0) {
    for (auto _ : state) {
      for (int64_t i = 0; i < kLookups; ++i) {
        std::memcpy(&out[static_cast<size_t>(i * kWidth)], &e[static_cast<size_t>(t[static_cast<size_t>(i)] * kWidth)],
                    kWidth * sizeof(float));
      }
      benchmark::DoNotOptimize(out.data());
    }
  } else {
    auto p = compile("input e : f32[" + std::to_string(kVocabulary) + ", " + std::to_string(kWidth) +
                     "]\ninput t : i32[" + std::to_string(kLookups) + "]\noutput out : f32[" + std::to_string(kLookups) +
                     ", " + std::to_string(kWidth) + "]\nout[i, j] = e[t[i], j]\n");
    check(p->write("e", e.data(), e.size() * sizeof(float)), "write e");
    check(p->write("t", t.data(), t.size() * sizeof(int32_t)), "write t");
    for (auto _ : state) check(p->run("main"), "run");
  }
  // Bytes moved: every row read once and written once.
  state.SetBytesProcessed(state.iterations() * kLookups * kWidth * 2 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_EmbeddingLookup)->ArgName("kiln")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_PickLabel(benchmark::State& state) {
  constexpr int64_t kRows = 65536, kClasses = 1000;
  const std::string declarations = "input z : f32[" + std::to_string(kRows) + ", " + std::to_string(kClasses) +
                                   "]\ninput lab : i32[" + std::to_string(kRows) + "]\noutput picked : f32\n";
  auto p = compile(declarations + (state.range(0) ? "picked = sum(z[n, lab[n]])\n"
                                                  : "picked = sum(select(k == lab[n], z[n, k], 0))\n"));
  const std::vector<float> z = values(kRows * kClasses);
  const std::vector<int32_t> lab = positions(kRows, kClasses);
  check(p->write("z", z.data(), z.size() * sizeof(float)), "write z");
  check(p->write("lab", lab.data(), lab.size() * sizeof(int32_t)), "write lab");
  for (auto _ : state) check(p->run("main"), "run");
}
BENCHMARK(BM_PickLabel)->ArgName("gather")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
