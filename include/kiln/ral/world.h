// The processes of one job (docs/language.md, "Collectives"; docs/distributed.md): this
// process's rank, the number of ranks, and the collectives that combine host memory across them
// over MPI (Open MPI). kiln writes no transport of its own.
//
// What a caller may rely on:
//  - A process started by mpirun / mpiexec (the launcher's rank and size variables are set) is
//    rank r of R. kiln initializes MPI the first time the world is asked for, unless the host
//    program already has, asking for MPI_THREAD_MULTIPLE (collectives complete on kiln's own
//    threads); a library that cannot give it is an error that says so. kiln finalizes only an MPI
//    it initialized, at exit.
//  - A process started alone (no launcher variables, no communicator handed in) is a world of one
//    rank that never touches MPI: every collective is a copy.
//  - A framework that manages MPI itself hands its communicator in with use_communicator() before
//    the world is first asked for.
//  - kiln built without MPI (CMake found none) runs worlds of one; under a launcher with more than
//    one rank, world() fails with a message saying that kiln was built without MPI.
//  - Every rank must issue the same collectives in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::ral {

// How allreduce and reduce_scatter combine: the language's `op` attribute (0 sum, 1 mean,
// 2 max, 3 min). mean is the sum divided by the number of ranks, in the element type.
enum class CollectiveOp : int { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
std::string_view collective_op_name(CollectiveOp op);

class World {
 public:
  virtual ~World() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "MPI (Open MPI 4.1.4)", or "a world of one (not started by mpirun)".
  virtual std::string describe() const = 0;

  // Collectives over host memory, blocking until this rank's part is done. `count` elements of
  // `type` (f32, f64, i32); `call` names the call statement for messages. allgather's `out` holds
  // size() × count elements; reduce_scatter's `in` holds size() × count and `out` count.
  virtual Status allreduce(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp op,
                           std::string_view call) = 0;
  virtual Status allgather(const void* in, void* out, int64_t count, ir::DType type, std::string_view call) = 0;
  virtual Status reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp op,
                                std::string_view call) = 0;
  virtual Status broadcast(const void* in, void* out, int64_t count, ir::DType type, int root,
                           std::string_view call) = 0;

 protected:
  World(int rank, int size) : rank_(rank), size_(size) {}

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
