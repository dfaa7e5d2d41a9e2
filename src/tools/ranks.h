// `kiln run` under mpirun (docs/cli.md, "Under mpirun"): which rank of the job this process is,
// the paths its options name at that rank (`--input x=shard{rank}.npy`), and the agreement of
// every rank before any of them writes its outputs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/ral/world.h"
#include "tools/options.h"

namespace kiln::tools {

// This process's place in its job: rank 0 of 1 outside mpirun.
struct RunRank {
  ral::World* world = nullptr;
  int rank = 0;
  int size = 1;
};

// The process's world (kiln/ral/world.h). Outside mpirun it is a world of one that never
// touches MPI: no launcher variables, so no MPI_Init, no communicator, nothing but a lookup of
// the environment; under mpirun, MPI is initialized here, before any file is read.
Result<RunRank> run_rank();

// `path` with every "{rank}" replaced by `rank`.
std::string path_at_rank(std::string_view path, int rank);

// The options rank `rank` runs with: "{rank}" replaced in the paths of --input, --output, --trace
// and --trace-values; on ranks other than 0 the outputs whose path holds no "{rank}" are left
// out (rank 0 writes them) and so is --print.
Options options_at_rank(const Options& given, int rank);

// `--streams N` (N > 1) in a job of several ranks whose `routines` run a collective: a usage
// error naming the conflict. The N copies of a rank run their collectives on N streams, which have
// no order between them, so the ranks may issue them in different orders and combine one stream's
// call with another's (docs/distributed.md, "The ordering rule"). nullopt otherwise: without
// collectives the copies never meet across ranks, and in a world of one every collective is a copy.
std::optional<Failure> check_streams_across_ranks(const RunRank& rank, const Options& o, const ir::Program& program,
                                                  const std::vector<std::string>& routines);

// Whether every rank of the job staged its outputs: each rank's `staged`, combined across the
// ranks (the smallest wins), so that no rank writes a file while another failed. Every rank that
// ran the routines calls it once, whatever its own `staged`. In a world of one: `staged`.
Result<bool> every_rank_staged(const RunRank& rank, bool staged);

// Where this process is one of several ranks and `code` is a failure, ends it at once (after
// flushing standard output and error) without the MPI_Finalize that runs at exit: the other
// ranks may be waiting in a collective for this one, and MPI_Finalize waits for every rank, so
// the job would hang. mpirun sees the rank end and ends the others. Returns otherwise.
void leave_job_if_failed(int code);

}  // namespace kiln::tools
