// Faults between ranks are errors, not hangs: run by ctest under `mpiexec -np 2` (tests/CMakeLists.txt),
// which checks what rank 0 prints. A plain program, not a gtest: a failed collective breaks the
// world for the rest of the process, and the process then ends with status 1, as kiln run does.
//
//   collective_faults_mpi_test killed    a training loop; rank 1 dies (SIGKILL) after step 3, and
//                                        rank 0's step 4 must fail naming rank 1 and the timeout
//                                        (mpiexec --enable-recovery keeps rank 0 running)
//   collective_faults_mpi_test mismatch  rank 0 runs an allreduce where rank 1 runs a broadcast:
//                                        both fail, naming both calls
//   collective_faults_mpi_test mismatch-after-agreeing
//                                        the same after both ranks ran both calls in step, so
//                                        that each posts its data before the check (the check
//                                        still runs, and names both calls)
#include <csignal>
#include <cstdio>
#include <string>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

constexpr const char* kProgram = R"(param w : f32[4]
input j : i32[3]
tensor g : f32[4]
output total : f32[4]
output k : i32[3]

routine step {
  g[i] = w[i] * 0.5
  call allreduce(g) -> total
  w[i] = w[i] - 0.1 * total[i]
}
routine other {
  call broadcast(j) -> k
}
)";

int stop(int rank, const Status& why) {
  std::printf("rank %d stopped: %s\n", rank, why.to_string().c_str());
  std::fflush(stdout);
  return 1;
}

int run(const std::string& mode) {
  Result<ral::World*> world = ral::world();
  if (!world.ok()) return stop(-1, world.status());
  const int rank = (*world)->rank();
  if ((*world)->size() != 2) return stop(rank, failed_precondition_error("run under mpiexec -np 2"));
  Result<ir::Program> program = lang::parse_program(kProgram, "faults.kiln");
  if (!program.ok()) return stop(rank, program.status());
  TempDir cache;
  Result<hal::DeviceRef> device = open_device("cpu", cache.path());
  if (!device.ok()) return stop(rank, device.status());
  auto instance = runtime::ProgramInstance::create(*device, *program);
  if (!instance.ok()) return stop(rank, instance.status());
  if (mode == "mismatch-after-agreeing") {
    for (const char* routine : {"step", "other"}) {
      if (Status ran = (*instance)->run(routine); !ran.ok()) return stop(rank, ran);
    }
  }
  if (mode == "mismatch" || mode == "mismatch-after-agreeing") {
    Status ran = (*instance)->run(rank == 0 ? "step" : "other");
    return stop(rank, ran.ok() ? internal_error("the mismatched collectives completed") : ran);
  }
  for (int step = 1; step <= 1000; ++step) {
    Status ran = (*instance)->run("step");
    if (!ran.ok()) return stop(rank, ran);
    if (rank == 1 && step == 3) std::raise(SIGKILL);
  }
  return stop(rank, internal_error("1000 steps ran: rank 1 did not die"));
}

}  // namespace
}  // namespace kiln::e2e

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "killed" && mode != "mismatch" && mode != "mismatch-after-agreeing") {
    std::fprintf(stderr, "usage: %s killed|mismatch|mismatch-after-agreeing\n", argv[0]);
    return 2;
  }
  return kiln::e2e::run(mode);
}
