// The process's world (kiln/ral/world.h): a world of one rank, or MPI's (world_mpi.cc, built
// where CMake finds MPI).
#include "kiln/ral/world.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "kiln/base/settings.h"

#include "ral/collective_types.h"
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

std::string_view collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kAllgather: return "allgather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBroadcast: return "broadcast";
  }
  return "?";
}

std::string Collective::describe() const {
  std::string text(collective_kind_name(kind));
  if (kind == CollectiveKind::kAllreduce || kind == CollectiveKind::kReduceScatter) {
    text += " (" + std::string(collective_op_name(op)) + ")";
  } else if (kind == CollectiveKind::kBroadcast) {
    text += " (root " + std::to_string(root) + ")";
  }
  text += " of " + std::to_string(count) + " " + std::string(ir::dtype_name(type));
  if (!site.empty()) text += " at " + site;
  return text;
}

Result<double> collective_timeout_seconds() {
  KILN_ASSIGN_OR_RETURN(std::optional<double> seconds, setting_seconds("KILN_COLLECTIVE_TIMEOUT"));
  return seconds.value_or(60.0);
}

Status World::check(const Collective& collective) const {
  if (collective.kind == CollectiveKind::kBroadcast && (collective.root < 0 || collective.root >= size())) {
    return invalid_argument_error(collective.describe() + ": root " + std::to_string(collective.root) +
                                  " is not a rank of this world (ranks 0 to " + std::to_string(size() - 1) + ")");
  }
  if (collective.count < 0) return invalid_argument_error(collective.describe() + ": a negative count");
  return Status();
}

Status World::run(Collective collective) {
  std::mutex mutex;
  std::condition_variable ended;
  std::optional<Status> outcome;
  start(std::move(collective), [&](Status status) {
    std::lock_guard<std::mutex> lock(mutex);
    outcome = std::move(status);
    ended.notify_all();
  });
  std::unique_lock<std::mutex> lock(mutex);
  ended.wait(lock, [&] { return outcome.has_value(); });
  return *outcome;
}

namespace {

// Whether start_all may send `c` with others: a small allreduce combined in its own type.
bool fusable(const Collective& c) {
  return c.kind == CollectiveKind::kAllreduce && !internal::combination_of(c).staged &&
         c.count * static_cast<int64_t>(ir::dtype_size(c.type)) <= World::kFusedPartBytes;
}

}  // namespace

void World::start_all(std::vector<Started> group) {
  for (size_t first = 0; first < group.size();) {
    // The run of parts that go as one: same type and op, kFusedBytes in all.
    size_t end = first + 1;
    int64_t count = group[first].collective.count;
    if (fusable(group[first].collective)) {
      const Collective& c = group[first].collective;
      const int64_t element = static_cast<int64_t>(ir::dtype_size(c.type));
      for (; end < group.size(); ++end) {
        const Collective& next = group[end].collective;
        if (!fusable(next) || next.type != c.type || next.op != c.op || (count + next.count) * element > kFusedBytes) break;
        count += next.count;
      }
    }
    if (end == first + 1) {
      start(std::move(group[first].collective), std::move(group[first].done));
      first = end;
      continue;
    }
    // One allreduce, in place, over a buffer holding every part's input in turn.
    struct Fused {
      std::vector<std::byte> buffer;
      std::vector<Started> parts;
    };
    auto fused = std::make_shared<Fused>();
    fused->parts.assign(std::make_move_iterator(group.begin() + first), std::make_move_iterator(group.begin() + end));
    first = end;
    Collective all = fused->parts.front().collective;
    all.count = count;
    all.site += " and the " + std::to_string(fused->parts.size() - 1) + " calls after it, sent as one";
    Result<std::vector<std::byte>> buffer = internal::staging_buffer(all, all.type, count);
    if (!buffer.ok()) {
      for (Started& part : fused->parts) part.done(buffer.status());
      continue;
    }
    fused->buffer = std::move(*buffer);
    const size_t element = ir::dtype_size(all.type);
    size_t offset = 0;
    for (const Started& part : fused->parts) {
      const size_t bytes = static_cast<size_t>(part.collective.count) * element;
      if (bytes) std::memcpy(fused->buffer.data() + offset, part.collective.in, bytes);
      offset += bytes;
    }
    all.in = all.out = fused->buffer.data();
    start(std::move(all), [fused, element](Status outcome) {
      size_t at = 0;
      for (Started& part : fused->parts) {
        const size_t bytes = static_cast<size_t>(part.collective.count) * element;
        if (outcome.ok() && bytes) std::memcpy(part.collective.out, fused->buffer.data() + at, bytes);
        at += bytes;
        part.done(outcome);
      }
    });
  }
}

namespace {

// One rank: every collective is a copy (a reduction over one rank is its input; mean divides by
// 1), except that a reduction staged in another type goes through it as it would over many ranks.
class WorldOfOne final : public World {
 public:
  WorldOfOne() : World(0, 1) {}
  std::string describe() const override { return "a world of one (not started by mpirun)"; }

  void start(Collective c, CollectiveDone done) override { done(run_alone(c)); }

 private:
  Status run_alone(const Collective& c) const {
    KILN_RETURN_IF_ERROR(check(c));
    if (c.count <= 0) return Status();
    const bool reduces = c.kind == CollectiveKind::kAllreduce || c.kind == CollectiveKind::kReduceScatter;
    const internal::Combination how = reduces ? internal::combination_of(c) : internal::Combination{c.type};
    if (!how.staged) {
      if (c.in != c.out) std::memmove(c.out, c.in, static_cast<size_t>(c.count) * ir::dtype_size(c.type));
      return Status();
    }
    KILN_ASSIGN_OR_RETURN(std::vector<std::byte> staged, internal::staging_buffer(c, how.type, c.count));
    internal::convert_elements(c.type, how.type, c.in, staged.data(), c.count);
    internal::finish_combination(c, how, staged.data(), 1);
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
