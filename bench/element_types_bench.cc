// Element types (language version 3) on cpu (2 threads by default), against f32 and memcpy in
// the same run:
//  - BM_ReluFma: `y[i] = relu(a[i] * b[i] + c[i])` over 2^24 elements of f32 (type:0), f16
//    (type:1) and bf16 (type:2): the narrow types move half the bytes and compute in f32, so the
//    target is at most 0.6x the f32 time;
//  - BM_Convert: 2^24 elements f32 -> bf16 (way:1), bf16 -> f32 (way:2), f32 -> f16 (way:3),
//    f16 -> f32 (way:4), against memcpy of the f32 array (way:0); bytes/s counts what each reads
//    and writes, so the ratio to memcpy's bytes/s is the bandwidth ratio (target: at least 0.5);
//  - BM_Gemm: `call gemm(a, b) -> c` of 1024^3 with f32 operands and result (kind:0,
//    OpenBLAS), bf16 operands and an f32 result (kind:1, kiln's own
//    kernels where the CPU has AMX, or AVX-512 BF16 on AMD's, else oneDNN or f32 copies: at least
//    1.5x the f32 speed), i8 operands
//    and an i32 result (kind:2, oneDNN: at least 2x), f16 operands and an f32 result (kind:3,
//    OpenBLAS over f32 copies).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {
namespace {

constexpr int64_t kElements = int64_t{1} << 24;

std::unique_ptr<runtime::ProgramInstance> compile(const std::string& text) {
  ir::Program program = check(lang::parse_program(text, "element_types.kiln"), "parse");
  return check(runtime::ProgramInstance::create(make_cpu_device(), program), "compile");
}

// Bytes of `count` elements, each `value` as the type named `type` (f32 bits cut for bf16).
std::vector<unsigned char> filled(const std::string& type, int64_t count, float value) {
  const size_t size = type == "f32" ? 4 : 2;
  std::vector<unsigned char> bytes(static_cast<size_t>(count) * size);
  uint32_t f = 0;
  std::memcpy(&f, &value, 4);
  // 1.5f and 0.5f and -0.25f are exact in every type: their f16 bits are written out.
  const uint16_t f16 = value == 1.5f ? 0x3e00 : value == 0.5f ? 0x3800 : 0xb400;
  const uint16_t half = type == "bf16" ? static_cast<uint16_t>(f >> 16) : f16;
  for (int64_t i = 0; i < count; ++i) {
    if (size == 4) {
      std::memcpy(&bytes[static_cast<size_t>(i) * 4], &value, 4);
    } else {
      std::memcpy(&bytes[static_cast<size_t>(i) * 2], &half, 2);
    }
  }
  return bytes;
}

const char* type_of(int64_t arg) { return arg == 0 ? "f32" : arg == 1 ? "f16" : "bf16"; }

void BM_ReluFma(benchmark::State& state) {
  const std::string t = type_of(state.range(0));
  const std::string n = std::to_string(kElements);
  auto p = compile("input a : " + t + "[" + n + "]\ninput b : " + t + "[" + n + "]\ninput c : " + t + "[" + n +
                   "]\noutput y : " + t + "[" + n + "]\ny[i] = relu(a[i] * b[i] + c[i])\n");
  const float values[] = {1.5f, 0.5f, -0.25f};
  const char* names[] = {"a", "b", "c"};
  for (int k = 0; k < 3; ++k) {
    std::vector<unsigned char> bytes = filled(t, kElements, values[k]);
    check(p->write(names[k], bytes.data(), bytes.size()), "write");
  }
  for (auto _ : state) check(p->run("main"), "run");
  state.SetBytesProcessed(state.iterations() * kElements * 4 * (t == "f32" ? 4 : 2));
}
BENCHMARK(BM_ReluFma)->ArgName("type")->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Convert(benchmark::State& state) {
  const int64_t way = state.range(0);
  const std::string n = std::to_string(kElements);
  if (way == 0) {
    std::vector<unsigned char> from = filled("f32", kElements, 1.5f), to(from.size());
    for (auto _ : state) {
      std::memcpy(to.data(), from.data(), from.size());
      benchmark::DoNotOptimize(to.data());
    }
    state.SetBytesProcessed(state.iterations() * kElements * 8);
    return;
  }
  const std::string narrow = way <= 2 ? "bf16" : "f16";
  const bool to_narrow = way % 2 == 1;
  const std::string from_type = to_narrow ? "f32" : narrow, to_type = to_narrow ? narrow : "f32";
  auto p = compile("input x : " + from_type + "[" + n + "]\noutput y : " + to_type + "[" + n + "]\ny[i] = x[i]\n");
  std::vector<unsigned char> bytes = filled(from_type, kElements, 1.5f);
  check(p->write("x", bytes.data(), bytes.size()), "write");
  for (auto _ : state) check(p->run("main"), "run");
  state.SetBytesProcessed(state.iterations() * kElements * 6);
}
BENCHMARK(BM_Convert)->ArgName("way")->DenseRange(0, 4)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  constexpr int64_t kSide = 1024;
  const char* operands[] = {"f32", "bf16", "i8", "f16"};
  const char* results[] = {"f32", "f32", "i32", "f32"};
  const std::string a = operands[state.range(0)], c = results[state.range(0)], side = std::to_string(kSide);
  auto p = compile("input a : " + a + "[" + side + ", " + side + "]\ninput b : " + a + "[" + side + ", " + side +
                   "]\noutput c : " + c + "[" + side + ", " + side + "]\ncall gemm(a, b) -> c\n");
  // Zero bytes are 0 in every type: the libraries take no shortcut for zeros.
  const std::vector<unsigned char> bytes(static_cast<size_t>(kSide * kSide) * (a == "f32" ? 4 : a == "i8" ? 1 : 2), 0);
  check(p->write("a", bytes.data(), bytes.size()), "write a");
  check(p->write("b", bytes.data(), bytes.size()), "write b");
  for (auto _ : state) check(p->run("main"), "run");
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * kSide * kSide * kSide * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Gemm)->ArgName("kind")->DenseRange(0, 3)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
