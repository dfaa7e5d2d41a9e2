// The process's world (kiln/ral/world.h): a world of one rank, or MPI's (world_mpi.cc, built
// where CMake finds MPI).
#include "kiln/ral/world.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ral/world_internal.h"

namespace kiln::ral {

std::string_view collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kSum: return "sum";
    case CollectiveOp::kMean: return "mean";
    case CollectiveOp::kMax: return "max";
    case CollectiveOp::kMin: return "min";
  }
  return "?";
}

namespace {

// One rank: every collective is a copy (a reduction over one rank is its input; mean divides by 1).
class WorldOfOne final : public World {
 public:
  WorldOfOne() : World(0, 1) {}
  std::string describe() const override { return "a world of one (not started by mpirun)"; }

  Status allreduce(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp, std::string_view) override {
    return copy(in, out, count, type);
  }
  Status allgather(const void* in, void* out, int64_t count, ir::DType type, std::string_view) override {
    return copy(in, out, count, type);
  }
  Status reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp,
                        std::string_view) override {
    return copy(in, out, count, type);
  }
  Status broadcast(const void* in, void* out, int64_t count, ir::DType type, int root, std::string_view call) override {
    if (root != 0) {
      return invalid_argument_error(std::string(call) + ": root " + std::to_string(root) +
                                    " is not a rank of this world of one (ranks 0 to 0)");
    }
    return copy(in, out, count, type);
  }

 private:
  static Status copy(const void* in, void* out, int64_t count, ir::DType type) {
    if (in != out && count > 0) std::memmove(out, in, static_cast<size_t>(count) * ir::dtype_size(type));
    return Status();
  }
};

std::mutex& world_mutex() {
  static std::mutex m;
  return m;
}

// The launcher's size, from the variables Open MPI, MPICH / Hydra and PMIx set; 0 when none is.
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n > 0 && n < (1L << 30)) return static_cast<int>(n);
    }
  }
  return 0;
}

}  // namespace

std::unique_ptr<World> make_world_of_one() { return std::make_unique<WorldOfOne>(); }

namespace internal {

WorldState& world_state() {
  static WorldState state;
  return state;
}

}  // namespace internal

Result<World*> world() {
  std::lock_guard<std::mutex> lock(world_mutex());
  internal::WorldState& state = internal::world_state();
  if (state.world) return state.world.get();
  const int launched = launcher_size();
  if (!state.communicator && launched == 0 && !internal::mpi_already_initialized()) {
    state.world = make_world_of_one();
    return state.world.get();
  }
  if (!built_with_mpi()) {
    if (launched <= 1) {
      state.world = make_world_of_one();
      return state.world.get();
    }
    return unimplemented_error("this process is one of " + std::to_string(launched) +
                               " started by mpirun, but this kiln was built without MPI (CMake found no MPI: install "
                               "libopenmpi-dev and build again); collectives work only in a world of one");
  }
  KILN_ASSIGN_OR_RETURN(state.world, internal::make_mpi_world(state.communicator));
  return state.world.get();
}

Status use_communicator(const void* mpi_comm) {
  std::lock_guard<std::mutex> lock(world_mutex());
  internal::WorldState& state = internal::world_state();
  if (!built_with_mpi()) return unimplemented_error("use_communicator: this kiln was built without MPI");
  if (!mpi_comm) return invalid_argument_error("use_communicator: the communicator is null");
  if (state.world) {
    return failed_precondition_error("use_communicator: the world is already made (" + state.world->describe() +
                                     "); hand the communicator in before the first collective or world()");
  }
  state.communicator = mpi_comm;
  return Status();
}

}  // namespace kiln::ral
