// The runtime layer: data-parallel training throughput on 2 streams versus 1, and the cost of
// per-node synchronization over a bare HAL dispatch of the same kernel.
#include <benchmark/benchmark.h>
#include <time.h>

#include <span>
#include <vector>

#include "bench_common.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "trainer.h"

namespace kiln::bench {
namespace {

// Time per epoch of the demo over 40 epochs of 8192 points (4 whole batches, as in the README's
// figures), compiling and linking excluded; streams from arg 0.
void time_epochs(benchmark::State& state, moons::TrainOptions options) {
  options.streams = static_cast<int>(state.range(0));
  options.epochs = 40;
  options.points = 8192;
  for (auto _ : state) {
    moons::TrainResult result = check(moons::train(options), "train");
    state.SetIterationTime(result.seconds / options.epochs);
  }
}

// Arg 0: streams; arg 1: workgroups per kernel (1: a stream is one core, as in the demo; 0: every
// kernel split over the device); arg 2: automatic gemm calls for the products (1, the default)
// or generated kernels (0).
void BM_TrainMoons(benchmark::State& state) {
  moons::TrainOptions options;
  options.max_workgroups = static_cast<uint32_t>(state.range(1));
  options.auto_calls = state.range(2) != 0;
  time_epochs(state, options);
}
BENCHMARK(BM_TrainMoons)
    ->ArgNames({"streams", "workgroups", "auto_calls"})
    ->Args({1, 1, 1})->Args({2, 1, 1})->Args({1, 0, 1})->Args({2, 0, 1})->Args({1, 1, 0})->Args({2, 1, 0})
    ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// The same epoch with the streams' queue threads left to the system's scheduler
// (DeviceOptions::spread_queues off; the demo pins them): compare BM_TrainMoons of the same run.
void BM_TrainMoonsUnpinned(benchmark::State& state) {
  moons::TrainOptions options;
  options.spread_queues = false;
  time_epochs(state, options);
}
BENCHMARK(BM_TrainMoonsUnpinned)->ArgName("streams")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// The same epoch with value tracing on (docs/tracing.md): every routine compiled with trace code,
// run in one workgroup per kernel, logging 16 lines per statement, collected through the stdout
// capture. Compare BM_TrainMoons/streams:2/workgroups:1/auto_calls:1 of the same run.
void BM_TrainMoonsTraced(benchmark::State& state) {
  moons::TrainOptions options;
  options.streams = 2;
  options.epochs = 10;
  for (auto _ : state) {
    options.value_trace = check(runtime::ValueTrace::start(), "value trace");
    moons::TrainResult result = check(moons::train(options), "train");
    check(options.value_trace->json_lines().status(), "collecting the value trace");
    check(options.value_trace->stop(), "stopping the value trace");
    state.SetIterationTime(result.seconds / options.epochs);
  }
}
BENCHMARK(BM_TrainMoonsTraced)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// y = a + b + ... + g over 8 nodes of 256 floats.
constexpr const char* kEightNodes = R"(
input a : f32[256]
input b : f32[256]
input c : f32[256]
input d : f32[256]
input e : f32[256]
input f : f32[256]
input g : f32[256]
output y : f32[256]
y[i] = a[i] + b[i] + c[i] + d[i] + e[i] + f[i] + g[i]
)";

// Benchmarks with an argument `on_caller` run small work on the calling thread when its waits
// are met (1, the default) or always on the queue's thread (0, as before), in the same run.
int64_t caller_stores(const benchmark::State& state) { return state.range(0) ? -1 : 0; }

struct EightNodes {
  explicit EightNodes(int64_t max_caller_stores = -1) : device(make_cpu_device(0, max_caller_stores)) {}
  hal::DeviceRef device;
  // One workgroup per dispatch, as the bare dispatch below.
  std::shared_ptr<runtime::Backend> backend = check(runtime::Backend::create(device, {1, nullptr, nullptr}), "backend");
  runtime::StreamRef stream = check(backend->new_stream(), "stream");
  ir::Program program = check(lang::parse_program(kEightNodes, "eight_nodes.kiln"), "parse");
  runtime::CodeRef code = check(backend->compile(program, "main"), "compile");
  std::shared_ptr<runtime::NodeTable> nodes = check(runtime::NodeTable::create(program), "nodes");
  runtime::Linked linked = check(
      backend->link(check(backend->make_context(stream, nodes), "context"), code, "main"), "link");
};

// Routine::run (per-node synchronization over its 8 nodes) + Stream::await.
void BM_RoutineWithNodeSync(benchmark::State& state) {
  EightNodes setup(caller_stores(state));
  for (auto _ : state) {
    check(setup.linked.routine->run(), "run");
    check(setup.stream->await(), "await");
  }
}
BENCHMARK(BM_RoutineWithNodeSync)->ArgName("on_caller")->Arg(0)->Arg(1)->UseRealTime();

// A tiny routine called the way kiln's Python package calls it (CompiledProgram.__call__): write
// the input's host copy, run, await, read the output back. bench/python_call_overhead.py times
// the same call from Python and subtracts this: the cost of the Python layer per call.
void BM_TinyRoutineFromCpp(benchmark::State& state) {
  auto backend = check(runtime::Backend::create(make_cpu_device(0, caller_stores(state))), "backend");
  runtime::StreamRef stream = check(backend->new_stream(), "stream");
  ir::Program program = check(
      lang::parse_program("input x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * 2 + 1\n", "tiny.kiln"), "parse");
  auto nodes = check(runtime::NodeTable::create(program), "nodes");
  runtime::Linked linked = check(
      backend->link(check(backend->make_context(stream, nodes), "context"),
                    check(backend->compile(program, "main"), "compile"), "main"),
      "link");
  runtime::HostTensor x = check(nodes->tensor("x"), "x");
  runtime::HostTensor y = check(nodes->tensor("y"), "y");
  std::vector<float> in = {1, 2, 3, 4}, out(4);
  for (auto _ : state) {
    check(x.write(std::as_bytes(std::span<const float>(in))), "write");
    check(linked.routine->run(), "run");
    check(stream->await(), "await");
    check(y.read(std::as_writable_bytes(std::span<float>(out))), "read");
  }
  if (out[3] != 9) state.SkipWithError("wrong result");
}
BENCHMARK(BM_TinyRoutineFromCpp)->ArgName("on_caller")->Arg(0)->Arg(1)->UseRealTime();

// The submitting thread's CPU time per Routine::run in a burst of 1000 (then one await): what a
// run costs the host, without the hand-offs to the queue's thread; compare BM_SubmitBurst of
// dispatch_bench (a bare HAL submit).
void BM_RoutineSubmitBurst(benchmark::State& state) {
  EightNodes setup;
  constexpr int kBurst = 1000;
  int64_t cpu_ns = 0;
  for (auto _ : state) {
    timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (int i = 0; i < kBurst; ++i) check(setup.linked.routine->run(), "run");
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    cpu_ns += (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    check(setup.stream->await(), "await");
  }
  state.counters["submit_cpu_ns_per_run"] = benchmark::Counter(double(cpu_ns) / (double(state.iterations()) * kBurst));
}
BENCHMARK(BM_RoutineSubmitBurst)->UseRealTime();

// The same kernel dispatched on a HAL queue with its own buffers: submit + host wait.
void BM_BareHalDispatch(benchmark::State& state) {
  EightNodes setup;
  hal::ExecutableRef executable = check(setup.code->executable_for(setup.device), "executable");
  hal::QueueRef queue = check(setup.device->create_queue(), "queue");
  auto semaphore = setup.device->create_semaphore(0);
  hal::DispatchCommand dispatch;
  dispatch.executable = executable;
  dispatch.workgroups = {1, 1, 1};
  const ir::Kernel& kernel = setup.code->lowered().routines.front().kernels.front();
  for (size_t i = 0; i < kernel.nodes.size(); ++i) {
    dispatch.bindings.push_back({check(setup.device->allocator().allocate({}, 256 * 4), "alloc")});
  }
  uint64_t value = 0;
  for (auto _ : state) {
    check(queue->dispatch({{semaphore, value}}, {{semaphore, value + 1}}, dispatch), "dispatch");
    check(semaphore->wait(++value, Timeout::infinite()), "wait");
  }
}
BENCHMARK(BM_BareHalDispatch)->UseRealTime();

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
