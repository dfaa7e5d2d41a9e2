// The processes of one job (docs/language.md, "Collectives"; docs/distributed.md): this
// process's rank, the number of ranks, and the collectives that combine host memory across them
// over MPI (Open MPI). kiln writes no transport of its own.
//
// What a caller may rely on:
//  - A process started by mpirun / mpiexec (the launcher's rank and size variables are set) is
//    rank r of R. kiln initializes MPI the first time the world is asked for, unless the host
//    program already has, asking for MPI_THREAD_MULTIPLE (kiln's MPI calls come from its own
//    progress thread, or from the thread that starts one, never two at once); a library that
//    gives less than MPI_THREAD_SERIALIZED is an error that says so. kiln finalizes only an MPI
//    it initialized, at exit, and not after a collective failed (MPI_Finalize would wait for the
//    ranks that did not arrive).
//  - A process started alone (no launcher variables, no communicator handed in) is a world of one
//    rank that never touches MPI: every collective is a copy.
//  - A framework that manages MPI itself hands its communicator in with use_communicator() before
//    the world is first asked for.
//  - kiln built without MPI (CMake found none) runs worlds of one; under a launcher with more than
//    one rank, world() fails with a message saying that kiln was built without MPI.
//  - Every rank must issue the same collectives in the same order. With each collective the
//    ranks exchange what they run (a small message to each other rank), so a mismatch is an
//    error naming both calls, not a hang or wrong numbers (a new call's data waits for the
//    check; one agreed on before goes with it, and may have written its output when it fails).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::ral {

// How allreduce and reduce_scatter combine: the language's `op` attribute (0 sum, 1 mean,
// 2 max, 3 min). mean is the sum divided by the number of ranks. Each element type combines as
// docs/distributed.md says: f16 and bf16 in f32, a mean of integers in f64, bool as or / and.
enum class CollectiveOp : int { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
std::string_view collective_op_name(CollectiveOp op);

enum class CollectiveKind : int { kAllreduce = 0, kAllgather = 1, kReduceScatter = 2, kBroadcast = 3 };
std::string_view collective_kind_name(CollectiveKind kind);

// One collective over host memory: `count` elements of `type` (any) from `in` to `out`
// (the same pointer: in place). allgather's `out` holds size() × count elements; reduce_scatter's
// `in` holds size() × count and `out` count. `op` is allreduce's and reduce_scatter's, `root`
// broadcast's. `site` names the call statement in messages ("routine 'step', line 4").
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  const void* in = nullptr;
  void* out = nullptr;
  int64_t count = 0;
  ir::DType type = ir::DType::kF32;
  CollectiveOp op = CollectiveOp::kSum;
  int root = 0;
  std::string site;

  // "allreduce (sum) of 1024 f32 at routine 'step', line 4": what messages name.
  std::string describe() const;
};

// Runs once when a collective ends: OK once `out` is written, else why not.
using CollectiveDone = std::function<void(Status)>;

// How long a rank waits for the others (KILN_COLLECTIVE_TIMEOUT, seconds; 60 when unset), or
// INVALID_ARGUMENT naming the variable for a value that is not a positive number.
Result<double> collective_timeout_seconds();

class World {
 public:
  virtual ~World() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "MPI rank 1 of 4 (Open MPI v4.1.4)", or "a world of one (not started by mpirun)".
  virtual std::string describe() const = 0;

  // Starts `collective` and returns without waiting for the other ranks; `done` runs exactly
  // once, on a thread of kiln's or before start returns. `in` and `out` must stay valid until
  // then. The failures `done` can see: INVALID_ARGUMENT (a root outside the world, a count past
  // MPI's), FAILED_PRECONDITION when ranks issued different collectives at the same point (the
  // message names this rank's call and the other's), DEADLINE_EXCEEDED when the others did not
  // all arrive, or the collective did not complete, within collective_timeout_seconds() (naming
  // the ranks that did not arrive), UNAVAILABLE for an error of MPI's. After a failure other
  // than INVALID_ARGUMENT the world is broken: every later collective fails at once with it.
  virtual void start(Collective collective, CollectiveDone done) = 0;

  // start(), then waits for `done`.
  Status run(Collective collective);

  // Starts collectives issued together, in order, as start() each would, but sends consecutive
  // small allreduces of one element type and op as one (as PyTorch's DDP buckets gradients):
  // their inputs are copied into a buffer of kiln's, combined by one collective, and copied out
  // to each output, and their `done`s run with its outcome. A message names the first call and
  // how many were sent with it. Every rank must start the same groups (it does when it runs the
  // same routines).
  struct Started {
    Collective collective;
    CollectiveDone done;
  };
  void start_all(std::vector<Started> group);
  // What start_all sends as one: parts of at most kFusedPartBytes, kFusedBytes in all.
  static constexpr int64_t kFusedPartBytes = int64_t{256} << 10;
  static constexpr int64_t kFusedBytes = int64_t{1} << 20;

 protected:
  World(int rank, int size) : rank_(rank), size_(size) {}
  // The checks every world makes before starting: a root among the ranks.
  Status check(const Collective& collective) const;

 private:
  int rank_;
  int size_;
};

// The process's world, made the first time it is asked for (see above); the same object after.
Result<World*> world();

// Whether this kiln was built with MPI.
bool built_with_mpi();

// Hands kiln the communicator to use (a pointer to an MPI_Comm the caller keeps alive for the
// process's lifetime), before world() is first called: FAILED_PRECONDITION after, and
// UNIMPLEMENTED when kiln was built without MPI.
Status use_communicator(const void* mpi_comm);

// A world of one rank, whatever the process: what world() is without a launcher. For tests.
std::unique_ptr<World> make_world_of_one();

}  // namespace kiln::ral
