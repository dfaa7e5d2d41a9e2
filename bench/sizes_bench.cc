// Programs with sizes (language version 2), compiled once for every size, against the same
// program with the size written as a number, in the same run (cpu, 2 threads by default):
//  - BM_SizedAgainstStatic: row softmax and row sum over N = 4096 rows of 1024, relu(a*b+c) over
//    N = 2^24, and a 1024^3 product written in the language (--no-auto-calls) with M a size;
//    sized:0 is the static program (the baseline), sized:1 the general build at the same N;
//  - BM_RunAtSize: a warm run at a known size (new_size:0, the baseline) against binding the
//    compiled code to a size and running it there first (new_size:1: Code::at_sizes, linking into
//    a fresh context, which allocates, and the run; never the C compiler);
//  - BM_AlternatingSizes: sizes 1, 2048, 37, 4096 in turn, bound and linked per run, against
//    one fixed size bound and linked per run the same way (alternating:0).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/program_instance.h"

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

// The row softmax, compiled once on a backend.
struct Compiled {
  std::shared_ptr<runtime::Backend> backend;
  runtime::StreamRef stream;
  runtime::CodeRef code;
  ir::Program general;
};

Compiled compile_softmax() {
  Compiled c;
  c.general = parse(kCases[0].text);
  c.backend = check(runtime::Backend::create(make_cpu_device()), "backend");
  c.stream = check(c.backend->new_stream(), "stream");
  c.code = check(c.backend->compile(c.general, "main"), "compile");
  return c;
}

// Binds the code to `rows`, links it into a fresh context (its arrays allocated and uploaded)
// and returns the routine.
runtime::RoutineRef link_at(const Compiled& c, int64_t rows) {
  runtime::CodeRef bound = check(runtime::Code::at_sizes(c.code, {rows}), "at_sizes");
  auto nodes = check(runtime::NodeTable::create(check(ir::specialize_sizes(c.general, {rows}), "specialize")), "nodes");
  auto root = check(c.backend->make_context(c.stream, nodes), "context");
  return check(c.backend->link(root, bound, "main"), "link").routine;
}

void run_and_wait(const Compiled& c, const runtime::RoutineRef& routine) {
  check(routine->run(), "run");
  check(c.backend->await(), "await");
}

void BM_RunAtSize(benchmark::State& state) {
  const bool new_size = state.range(0) != 0;
  Compiled c = compile_softmax();
  runtime::RoutineRef warm = link_at(c, 1024);
  run_and_wait(c, warm);
  int64_t rows = 1024;
  for (auto _ : state) {
    if (new_size) {
      // A size not seen before on every iteration: 1024 rows give or take one.
      rows = rows == 1024 ? 1025 : 1024;
      run_and_wait(c, link_at(c, rows));
    } else {
      run_and_wait(c, warm);
    }
  }
  state.SetLabel("row softmax at 1024 rows");
}
BENCHMARK(BM_RunAtSize)->ArgName("new_size")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_AlternatingSizes(benchmark::State& state) {
  const bool alternating = state.range(0) != 0;
  Compiled c = compile_softmax();
  const int64_t sizes[] = {1, 2048, 37, 4096};
  size_t next = 0;
  int64_t rows_run = 0;
  for (auto _ : state) {
    const int64_t rows = alternating ? sizes[next++ % 4] : 1546;  // 1546: the mean of the four
    run_and_wait(c, link_at(c, rows));
    rows_run += rows;
  }
  state.SetBytesProcessed(rows_run * 1024 * 4);
  state.SetLabel(alternating ? "row softmax at 1, 2048, 37, 4096 rows in turn" : "row softmax at 1546 rows");
}
BENCHMARK(BM_AlternatingSizes)->ArgName("alternating")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
