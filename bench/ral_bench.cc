// The cost of a warm RAL call, as compiled code makes it (ctx->call(ctx, mangled_name, args)
// to an empty registered function), against a plain indirect call of an empty function with the
// same arguments: the baseline a call through a function pointer table would cost.
#include <benchmark/benchmark.h>

#include "kiln/ral/execution_context.h"

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

}  // namespace
}  // namespace kiln::ral

BENCHMARK_MAIN();
