// kiln.world(): the processes of the job this interpreter is one of (kiln/ral/world.h), for
// programs with collectives run under mpirun / mpiexec.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "kiln/ral/world.h"
#include "python/errors.h"

namespace nb = nanobind;

namespace kiln::python {

void bind_world(nb::module_& m) {
  // The process's world lives until the process ends: Python holds a reference, never owns it.
  nb::class_<ral::World>(m, "World",
                         "The processes of this job: rank (0 to size - 1) and size, the number of ranks. "
                         "A process started alone is rank 0 of a world of one, where every collective is a copy.")
      .def_prop_ro("rank", &ral::World::rank, "This process's rank, 0 to size - 1.")
      .def_prop_ro("size", &ral::World::size, "The number of ranks (processes) in the job.")
      .def("describe", &ral::World::describe,
           "Which world this is: \"a world of one (not started by mpirun)\", or MPI's rank, size and library.")
      .def("__repr__", [](const ral::World& w) {
        return "kiln.World(rank=" + std::to_string(w.rank()) + ", size=" + std::to_string(w.size()) + ": " +
               w.describe() + ")";
      });

  m.def("world", [] { return value_or_throw(ral::world()); }, nb::rv_policy::reference,
        "The processes of this job (a kiln.World), made the first time it is asked for or a collective runs: "
        "under mpirun, kiln initializes MPI unless the process already has (e.g. through mpi4py); a process "
        "started alone is a world of one and never touches MPI. kiln.Error where MPI cannot be initialized, or "
        "where mpirun started several ranks but kiln was built without MPI.");
  m.def("built_with_mpi", &ral::built_with_mpi,
        "Whether this kiln was built with MPI (collectives across processes); without it, every world is a "
        "world of one.");
}

}  // namespace kiln::python
