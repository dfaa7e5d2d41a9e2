// The world's process-wide state, shared by world.cc and the MPI world (world_mpi.cc, or
// world_no_mpi.cc where kiln is built without MPI). Private to kiln_ral.
#pragma once

#include <memory>

#include "kiln/ral/world.h"

namespace kiln::ral::internal {

struct WorldState {
  std::unique_ptr<World> world;
  const void* communicator = nullptr;  // an MPI_Comm handed in by use_communicator()
};
WorldState& world_state();

// Whether the host program initialized MPI itself (false without MPI).
bool mpi_already_initialized();
// The world over MPI: `communicator` (an MPI_Comm*) if given, else MPI_COMM_WORLD, initializing
// MPI if nobody has.
Result<std::unique_ptr<World>> make_mpi_world(const void* communicator);

}  // namespace kiln::ral::internal
