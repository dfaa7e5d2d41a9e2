// The world over MPI (world_internal.h), built where CMake finds MPI. kiln's traffic runs on
// duplicates of the communicator, so it never matches a message of the host program's.

#include <climits>
#include <cstdlib>
#include <memory>
#include <string>

#include "ral/mpi_collectives.h"
#include "ral/world_internal.h"

namespace kiln::ral {

bool built_with_mpi() { return true; }

namespace internal {

namespace {

// Two duplicates of the communicator: one for the collectives' data, one for the descriptions
// the ranks exchange before each (mpi_collectives.h).
class MpiWorld final : public World {
 public:
  MpiWorld(MPI_Comm data, MPI_Comm check, int rank, int size, double timeout_seconds)
      : World(rank, size), data_(data), check_(check), collectives_(std::make_unique<MpiCollectives>(data, check, rank, size, timeout_seconds)) {}
  ~MpiWorld() override {
    stop();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !abandoned_) {
      MPI_Comm_free(&check_);
      MPI_Comm_free(&data_);
    }
  }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, static_cast<size_t>(length));
    if (const size_t cut = library.find_first_of(",\n"); cut != std::string::npos) library.resize(cut);
    return "MPI rank " + std::to_string(rank()) + " of " + std::to_string(size()) + " (" + library + ")";
  }

  void start(Collective c, CollectiveDone done) override {
    Status checked = check(c);
    if (checked.ok() && c.count > INT_MAX) {
      checked = invalid_argument_error(c.describe() + ": " + std::to_string(c.count) +
                                       " elements in one collective; MPI counts stop at 2^31 - 1");
    }
    if (!checked.ok()) return done(std::move(checked));
    collectives_->start(std::move(c), std::move(done));
  }

  // Stops the progress thread (MpiCollectives::stop): whether a collective was in flight or
  // failed; then the communicators are left as they are (freeing them, like MPI_Finalize, would
  // wait for ranks that are not coming).
  bool stop() {
    abandoned_ = collectives_->stop() || abandoned_;
    return abandoned_;
  }

 private:
  MPI_Comm data_;
  MPI_Comm check_;
  std::unique_ptr<MpiCollectives> collectives_;
  bool abandoned_ = false;
};

bool initialized_by_kiln = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  auto* world = dynamic_cast<MpiWorld*>(world_state().world.get());
  const bool unfinished = world && world->stop();
  world_state().world.reset();  // stops the progress thread, frees kiln's communicators
  if (!unfinished) MPI_Finalize();
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}

}  // namespace

bool mpi_already_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0 && !initialized_by_kiln;
}

Result<std::unique_ptr<World>> make_mpi_world(const void* communicator) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return failed_precondition_error("MPI is already finalized: collectives cannot run");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // Collectives run on the queues' threads, not the one that called MPI_Init.
    KILN_RETURN_IF_ERROR(mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
    initialized_by_kiln = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    return failed_precondition_error(std::string("the MPI library gives ") + thread_level_name(provided) +
                                     "; kiln runs collectives on its own threads and needs MPI_THREAD_SERIALIZED or "
                                     "MPI_THREAD_MULTIPLE (initialize MPI with MPI_Init_thread asking for "
                                     "MPI_THREAD_MULTIPLE)");
  }
  KILN_ASSIGN_OR_RETURN(double timeout, collective_timeout_seconds());
  MPI_Comm base = communicator ? *static_cast<const MPI_Comm*>(communicator) : MPI_COMM_WORLD;
  MPI_Comm comms[2];
  for (MPI_Comm& comm : comms) {
    KILN_RETURN_IF_ERROR(mpi_status(MPI_Comm_dup(base, &comm), "MPI_Comm_dup"));
    // Errors come back as codes, which become statuses, instead of aborting the job.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comms[0], &rank);
  MPI_Comm_size(comms[0], &size);
  return std::unique_ptr<World>(new MpiWorld(comms[0], comms[1], rank, size, timeout));
}

}  // namespace internal
}  // namespace kiln::ral
