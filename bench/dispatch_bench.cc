// Queue round trips, submission cost and workgroup scaling on the CPU device.
//  - BM_DispatchRoundTrip: submit an empty dispatch, it runs, its semaphore signals, the host
//    wakes; compare with BM_CondvarRoundTrip in semaphore_bench (two hand-offs).
//  - BM_SubmitBurst: cost of one submit call in a burst of chained dispatches, timed on the
//    submitting thread only.
//  - BM_ComputeDispatch/threads: a compute-bound dispatch of 64 workgroups on 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "bench_common.h"
#include "kiln/base/time.h"

namespace kiln::bench {
namespace {

void BM_DispatchRoundTrip(benchmark::State& state) {
  hal::DeviceRef device = make_cpu_device();
  hal::ExecutableRef exe = make_bench_executable(*device);
  hal::QueueRef queue = check(device->create_queue(), "queue");
  auto done = device->create_semaphore(0);
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    check(queue->dispatch({}, {{done, n}}, hal::DispatchCommand{exe, 0, {1, 1, 1}, {}, {}}),
          "dispatch");
    check(done->wait(n, Timeout::infinite()), "wait");
  }
}
BENCHMARK(BM_DispatchRoundTrip)->UseRealTime();

void BM_SubmitBurst(benchmark::State& state) {
  const int burst = static_cast<int>(state.range(0));
  hal::DeviceRef device = make_cpu_device();
  hal::ExecutableRef exe = make_bench_executable(*device);
  hal::QueueRef queue = check(device->create_queue(), "queue");
  int64_t submit_ns = 0;
  for (auto _ : state) {
    // Each dispatch waits on the one before, so the burst is held by the deferred queue until
    // the host releases its head: the submit calls measure submission alone.
    auto gate = device->create_semaphore(0);
    auto chain = device->create_semaphore(0);
    int64_t t0 = now_ns();
    check(queue->dispatch({{gate, 1}}, {{chain, 1}}, hal::DispatchCommand{exe, 0, {1, 1, 1}, {}, {}}),
          "dispatch");
    for (int i = 1; i < burst; ++i) {
      check(queue->dispatch({{chain, uint64_t(i)}}, {{chain, uint64_t(i) + 1}},
                            hal::DispatchCommand{exe, 0, {1, 1, 1}, {}, {}}),
            "dispatch");
    }
    submit_ns += now_ns() - t0;
    check(gate->signal(1), "gate");
    check(chain->wait(burst, Timeout::infinite()), "drain");
  }
  state.counters["submit_ns_per_action"] =
      benchmark::Counter(double(submit_ns) / (double(state.iterations()) * burst));
}
BENCHMARK(BM_SubmitBurst)->Arg(1000)->UseRealTime();

void BM_ComputeDispatch(benchmark::State& state) {
  const uint32_t threads = static_cast<uint32_t>(state.range(0));
  hal::DeviceRef device = make_cpu_device(threads);
  hal::ExecutableRef exe = make_bench_executable(*device);
  hal::QueueRef queue = check(device->create_queue(), "queue");
  hal::BufferRef out = check(device->allocator().allocate({}, 64 * sizeof(float)), "alloc");
  auto done = device->create_semaphore(0);
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    check(queue->dispatch({}, {{done, n}}, hal::DispatchCommand{exe, 1, {64, 1, 1}, {400}, {{out}}}),
          "dispatch");
    check(done->wait(n, Timeout::infinite()), "wait");
  }
}
BENCHMARK(BM_ComputeDispatch)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
