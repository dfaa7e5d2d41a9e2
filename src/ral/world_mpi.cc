// The world over MPI (world_internal.h), built where CMake finds MPI. kiln's traffic runs on a
// duplicate of the communicator, so it never matches a message of the host program's.
// The C interface only (Open MPI and MPICH otherwise pull in their C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ral/world_internal.h"

namespace kiln::ral {

bool built_with_mpi() { return true; }

namespace internal {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

Status mpi_status(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return Status();
  return unavailable_error(std::string(what) + ": " + mpi_error_text(code));
}

MPI_Datatype mpi_type(ir::DType type) {
  switch (type) {
    case ir::DType::kF32: return MPI_FLOAT;
    case ir::DType::kF64: return MPI_DOUBLE;
    default: return MPI_INT32_T;
  }
}

MPI_Op mpi_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kMax: return MPI_MAX;
    case CollectiveOp::kMin: return MPI_MIN;
    default: return MPI_SUM;  // mean: the sum, divided afterwards
  }
}

template <typename T>
void divide(void* data, int64_t count, int ranks) {
  T* v = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(ranks));
}

// mean: the sum over the ranks divided by their number, in the element type.
void finish_mean(void* out, int64_t count, ir::DType type, CollectiveOp op, int ranks) {
  if (op != CollectiveOp::kMean) return;
  if (type == ir::DType::kF32) divide<float>(out, count, ranks);
  else if (type == ir::DType::kF64) divide<double>(out, count, ranks);
  else divide<int32_t>(out, count, ranks);
}

class MpiWorld final : public World {
 public:
  MpiWorld(MPI_Comm comm, int rank, int size, bool serialize) : World(rank, size), comm_(comm), serialize_(serialize) {}
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, static_cast<size_t>(length));
    if (const size_t cut = library.find_first_of(",\n"); cut != std::string::npos) library.resize(cut);
    return "MPI rank " + std::to_string(rank()) + " of " + std::to_string(size()) + " (" + library + ")";
  }

  Status allreduce(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp op,
                   std::string_view call) override {
    KILN_ASSIGN_OR_RETURN(int n, checked_count(count, call));
    {
      auto lock = serialized();
      const void* send = in == out ? MPI_IN_PLACE : in;
      KILN_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(send, out, n, mpi_type(type), mpi_op(op), comm_), call));
    }
    finish_mean(out, count, type, op, size());
    return Status();
  }

  Status allgather(const void* in, void* out, int64_t count, ir::DType type, std::string_view call) override {
    KILN_ASSIGN_OR_RETURN(int n, checked_count(count * size(), call));
    auto lock = serialized();
    return mpi_status(MPI_Allgather(in, n / size(), mpi_type(type), out, n / size(), mpi_type(type), comm_), call);
  }

  Status reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, CollectiveOp op,
                        std::string_view call) override {
    KILN_ASSIGN_OR_RETURN(int n, checked_count(count * size(), call));
    {
      auto lock = serialized();
      KILN_RETURN_IF_ERROR(
          mpi_status(MPI_Reduce_scatter_block(in, out, n / size(), mpi_type(type), mpi_op(op), comm_), call));
    }
    finish_mean(out, count, type, op, size());
    return Status();
  }

  Status broadcast(const void* in, void* out, int64_t count, ir::DType type, int root, std::string_view call) override {
    if (root < 0 || root >= size()) {
      return invalid_argument_error(std::string(call) + ": root " + std::to_string(root) + " is not a rank (0 to " +
                                    std::to_string(size() - 1) + ")");
    }
    KILN_ASSIGN_OR_RETURN(int n, checked_count(count, call));
    if (rank() == root && in != out && count > 0) std::memmove(out, in, static_cast<size_t>(count) * ir::dtype_size(type));
    auto lock = serialized();
    return mpi_status(MPI_Bcast(out, n, mpi_type(type), root, comm_), call);
  }

 private:
  static Result<int> checked_count(int64_t count, std::string_view call) {
    if (count > INT_MAX) {
      return invalid_argument_error(std::string(call) + ": " + std::to_string(count) +
                                    " elements in one collective; MPI counts stop at 2^31 - 1");
    }
    return static_cast<int>(count);
  }
  // Under MPI_THREAD_SERIALIZED (a host's MPI), one MPI call at a time.
  std::unique_lock<std::mutex> serialized() {
    return serialize_ ? std::unique_lock<std::mutex>(mutex_) : std::unique_lock<std::mutex>();
  }

  MPI_Comm comm_;
  bool serialize_;
  std::mutex mutex_;
};

bool initialized_by_kiln = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    world_state().world.reset();  // frees kiln's communicator first
    MPI_Finalize();
  }
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
  MPI_Comm base = communicator ? *static_cast<const MPI_Comm*>(communicator) : MPI_COMM_WORLD;
  MPI_Comm comm;
  KILN_RETURN_IF_ERROR(mpi_status(MPI_Comm_dup(base, &comm), "MPI_Comm_dup"));
  // Errors come back as codes, which become statuses, instead of aborting the job.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return std::unique_ptr<World>(new MpiWorld(comm, rank, size, provided < MPI_THREAD_MULTIPLE));
}

}  // namespace internal
}  // namespace kiln::ral
