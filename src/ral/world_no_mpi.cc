// The world's MPI side where kiln is built without MPI (world_internal.h): worlds of one only.
#include "ral/world_internal.h"

namespace kiln::ral {

bool built_with_mpi() { return false; }

namespace internal {

bool mpi_already_initialized() { return false; }

Result<std::unique_ptr<World>> make_mpi_world(const void*) {
  return unimplemented_error("this kiln was built without MPI");
}

}  // namespace internal
}  // namespace kiln::ral
