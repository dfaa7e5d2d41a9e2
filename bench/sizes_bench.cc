// Programs with sizes (language version 2), compiled once for every size, against the same
// program with the size written as a number, in the same run (cpu, 2 threads by default):
//  - BM_SizedAgainstStatic: row softmax and row sum over N = 4096 rows of 1024, relu(a*b+c) over
//    N = 2^24, and a 1024^3 product written in the language (--no-auto-calls) with M a size;
//    sized:0 is the static program (the baseline), sized:1 the general build at the same N;
//  - BM_DemoEpoch: the demo's epoch, its batch a size, against its program with B = 1024;
//  - BM_RunAtSize: one compile; a warm run at a known size (the baseline) against the first run at
//    a size (fresh arrays) and runs at a size other than the last one's; never the C compiler;
//  - BM_AlternatingSizes: sizes 1, 2048, 37, 4096 in turn against one fixed size.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/program_instance.h"
#include "trainer.h"

namespace kiln::bench {
namespace {

struct SizedCase {
  const char* label;
  const char* text;  // with `size N`
  int64_t n;
  int64_t bytes;  // bytes a run reads, for the throughput column
};

const SizedCase kCases[] = {
    {"row softmax 4096x1024",
     "size N\ninput x : f32[N, 1024]\noutput y : f32[N, 1024]\ntensor m : f32[N]\ntensor e : f32[N, 1024]\n"
     "tensor s : f32[N]\nm[i] = max(x[i, j])\ne[i, j] = exp(x[i, j] - m[i])\ns[i] = sum(e[i, j])\n"
     "y[i, j] = e[i, j] / s[i]\n",
     4096, 4096 * 1024 * 4},
    {"row sum 4096x1024", "size N\ninput x : f32[N, 1024]\noutput y : f32[N]\ny[i] = sum(x[i, j])\n", 4096,
     4096 * 1024 * 4},
    {"relu(a*b+c) 2^24",
     "size N\ninput a : f32[N]\ninput b : f32[N]\ninput c : f32[N]\noutput y : f32[N]\ny[i] = relu(a[i] * b[i] + c[i])\n",
     int64_t{1} << 24, (int64_t{1} << 24) * 16},
    {"product 1024^3, M a size",
     "size N\ninput a : f32[N, 1024]\ninput b : f32[1024, 1024]\noutput c : f32[N, 1024]\n"
     "c[i, j] = sum(a[i, k] * b[k, j])\n",
     1024, 1024 * 1024 * 8},
};

ir::Program parse(const char* text) { return check(lang::parse_program(text, "sized.kiln"), "parse"); }

void BM_SizedAgainstStatic(benchmark::State& state) {
  const SizedCase& c = kCases[state.range(0)];
  const bool sized = state.range(1) != 0;
  const ir::Program general = parse(c.text);
  runtime::ProgramOptions options;
  options.lower.auto_calls = false;  // the product as kiln generates it, in both
  ir::Program program = general;
  if (sized) {
    options.sizes = {c.n};
  } else {
    program = check(ir::specialize_sizes(general, {c.n}), "specialize");
  }
  auto p = check(runtime::ProgramInstance::create(make_cpu_device(), program, options), "compile");
  // Inputs of real values: untouched pages would all read one zero page.
  for (const ir::TensorNode& node : p->lowered().program.nodes) {
    if (node.role != ir::Role::kInput) continue;
    std::vector<float> values(static_cast<size_t>(node.element_count()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
    check(p->write(node.name, values.data(), values.size() * sizeof(float)), "write");
  }
  for (auto _ : state) check(p->run("main"), "run");
  state.SetBytesProcessed(state.iterations() * c.bytes);
  state.SetLabel(c.label);
}
BENCHMARK(BM_SizedAgainstStatic)
    ->ArgNames({"case", "sized"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The demo's epoch (examples/train_moons, 8192 points: every shard 1024), its program's batch B
// a size (static:0) against the program specialized to B = 1024 (static:1), 2 streams; with the
// products as generated loops in both (auto_calls:0), and as the static program has them by
// default, gemm calls (auto_calls:1; the general build keeps its loops).
void BM_DemoEpoch(benchmark::State& state) {
  moons::TrainOptions options;
  options.static_batch = state.range(0) != 0;
  options.auto_calls = state.range(1) != 0;
  options.points = 8192;
  options.epochs = 40;
  for (auto _ : state) {
    moons::TrainResult result = check(moons::train(options), "train");
    state.SetIterationTime(result.seconds / options.epochs);
  }
}
BENCHMARK(BM_DemoEpoch)
    ->ArgNames({"static", "auto_calls"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The row softmax (1024 columns), compiled once; linked over a table of the program with sizes.
// Every run writes x at its size first (binding N), then runs and waits.
struct Linked {
  std::shared_ptr<runtime::Backend> backend;
  runtime::StreamRef stream;
  runtime::CodeRef code;
  ir::Program general;
  std::shared_ptr<runtime::NodeTable> nodes;
  runtime::RoutineRef routine;
};

// A new table and context, the code linked into it (arrays allocated when first run).
void relink(Linked& l) {
  l.nodes = check(runtime::NodeTable::create(l.general), "nodes");
  auto root = check(l.backend->make_context(l.stream, l.nodes), "context");
  l.routine = check(l.backend->link(root, l.code, "main"), "link").routine;
}

Linked link_softmax() {
  Linked l;
  l.general = parse(kCases[0].text);
  l.backend = check(runtime::Backend::create(make_cpu_device()), "backend");
  l.stream = check(l.backend->new_stream(), "stream");
  l.code = check(l.backend->compile(l.general, "main"), "compile");
  relink(l);
  return l;
}

void run_at(const Linked& l, const std::vector<float>& x, int64_t rows) {
  auto tensor = check(l.nodes->tensor("x"), "x");
  check(tensor.write(std::as_bytes(std::span<const float>(x.data(), static_cast<size_t>(rows) * 1024)), {rows, 1024}),
        "write");
  check(l.routine->run(), "run");
  check(l.backend->await(), "await");
}

// new_size:0, the baseline: every run at 1024 rows, warm. new_size:1: every run the first at its
// size, in a table and context of its own (its arrays and host copies allocated, their pages
// touched for the first time; the compiled code reused, so no compiler). new_size:2: one context,
// 1024 and 1025 rows in turn (every run at another size than the last: its dispatches and steps
// made again; the arrays fit).
void BM_RunAtSize(benchmark::State& state) {
  const int64_t mode = state.range(0);
  Linked l = link_softmax();
  std::vector<float> x(static_cast<size_t>(1025) * 1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f;
  run_at(l, x, 1025);
  int64_t rows = 1024;
  for (auto _ : state) {
    if (mode == 1) relink(l);
    if (mode == 2) rows = rows == 1024 ? 1025 : 1024;
    run_at(l, x, rows);
  }
  state.SetLabel(mode == 0 ? "softmax at 1024 rows, warm" : mode == 1 ? "softmax, first run at its size (fresh arrays)"
                                                                       : "softmax, 1024 and 1025 rows in turn");
}
BENCHMARK(BM_RunAtSize)->ArgName("new_size")->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Sizes 1, 2048, 37, 4096 in turn against one size (1546, their mean), one link, per run a write
// of x and the run.
void BM_AlternatingSizes(benchmark::State& state) {
  const bool alternating = state.range(0) != 0;
  Linked l = link_softmax();
  std::vector<float> x(static_cast<size_t>(4096) * 1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f;
  const int64_t sizes[] = {1, 2048, 37, 4096};
  size_t next = 0;
  int64_t rows_run = 0;
  for (auto _ : state) {
    const int64_t rows = alternating ? sizes[next++ % 4] : 1546;
    run_at(l, x, rows);
    rows_run += rows;
  }
  state.SetBytesProcessed(rows_run * 1024 * 4);
  state.SetLabel(alternating ? "softmax at 1, 2048, 37, 4096 rows in turn" : "softmax at 1546 rows");
}
BENCHMARK(BM_AlternatingSizes)->ArgName("alternating")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
