// allreduce (sum) of 1, 2^10, 2^20 and 2^24 f32 across the ranks of an MPI job, in the same run:
//  - kiln:1, through kiln: a program `call allreduce(x) -> y` on the cpu device, each iteration
//    one run of the routine on its queue and a host wait for it (runtime::ProgramInstance::run);
//  - kiln:0, the baseline: a bare MPI_Allreduce on buffers of the same size, from this thread.
// Run it under mpiexec (make bench does, with 2 ranks):
//   mpiexec -np 2 build/bench/collectives_bench      (as root: --allow-run-as-root)
// Only rank 0 reports. Every rank must make the same calls in the same order, so the iteration
// counts are fixed (Google Benchmark's own choice would differ between ranks and deadlock), and
// the ranks meet at a barrier before each benchmark's timed loop.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {
namespace {

// Elements and iterations: about a second's work per benchmark on a laptop's shared memory.
struct Size {
  int64_t elements;
  int64_t iterations;
};
constexpr Size kSizes[] = {{1, 20000}, {1 << 10, 10000}, {1 << 20, 200}, {1 << 24, 10}};

std::vector<float> values(int64_t count, int rank) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i + rank) % 97) * 0.25f;
  return v;
}

void BM_Allreduce(benchmark::State& state) {
  const int64_t n = state.range(0);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<float> x = values(n, rank);
  std::vector<float> y(static_cast<size_t>(n));
  if (state.range(1) == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto _ : state) {
      MPI_Allreduce(x.data(), y.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    const std::string N = std::to_string(n);
    ir::Program program = check(lang::parse_program("input x : f32[" + N + "]\noutput y : f32[" + N +
                                                        "]\ncall allreduce(x) -> y\n",
                                                    "allreduce.kiln"),
                                "parse");
    auto p = check(runtime::ProgramInstance::create(make_cpu_device(), program), "compile");
    check(p->write("x", x.data(), x.size() * sizeof(float)), "write x");
    check(p->run("main"), "first run");  // the first collective sets up kiln's communicator
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto _ : state) check(p->run("main"), "run");
    check(p->read("y", y.data(), y.size() * sizeof(float)), "read y");
  }
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(sizeof(float)));
}

// Reports nothing: the ranks other than 0 run the same benchmarks silently.
class Silent final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  // MPI first, by the host: kiln then works on a duplicate of MPI_COMM_WORLD (kiln/ral/world.h).
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  kiln::ral::World* world = check(kiln::ral::world(), "world");
  // Only rank 0 writes --benchmark_out's file.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (rank == 0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0) args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  benchmark::AddCustomContext("ranks", std::to_string(ranks));
  benchmark::AddCustomContext("world", world->describe());
  for (const Size& size : kSizes) {
    for (int kiln : {0, 1}) {
      benchmark::RegisterBenchmark("BM_Allreduce", BM_Allreduce)
          ->ArgNames({"f32", "kiln"})
          ->Args({size.elements, kiln})
          ->Iterations(size.iterations)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
