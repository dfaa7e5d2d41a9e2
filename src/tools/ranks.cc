#include "tools/ranks.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "kiln/ral/registry.h"

namespace kiln::tools {

namespace {

constexpr std::string_view kRankMark = "{rank}";

bool holds_rank(std::string_view path) { return path.find(kRankMark) != std::string_view::npos; }

// The number of ranks of the world run_rank() found; 0 before.
std::atomic<int> joined_ranks{0};

}  // namespace

Result<RunRank> run_rank() {
  // world() decides from the launcher's variables: a plain `kiln run` (none set) gets a world of
  // one without initializing MPI, so asking costs a few getenv calls.
  KILN_ASSIGN_OR_RETURN(ral::World * world, ral::world());
  joined_ranks.store(world->size());
  return RunRank{world, world->rank(), world->size()};
}

std::string path_at_rank(std::string_view path, int rank) {
  const std::string number = std::to_string(rank);
  std::string out;
  size_t from = 0;
  for (size_t at = path.find(kRankMark); at != std::string_view::npos; at = path.find(kRankMark, from)) {
    out.append(path.substr(from, at - from)).append(number);
    from = at + kRankMark.size();
  }
  return out.append(path.substr(from));
}

Options options_at_rank(const Options& given, int rank) {
  Options o = given;
  for (auto& [name, file] : o.inputs) file = path_at_rank(file, rank);
  o.outputs.clear();
  // Rank 0 writes what every rank would write to the same name.
  for (const auto& [name, file] : given.outputs) {
    if (rank == 0 || holds_rank(file)) o.outputs.push_back({name, path_at_rank(file, rank)});
  }
  for (std::string* path : {&o.trace, &o.trace_values}) {
    if (rank != 0 && !holds_rank(*path)) path->clear();
    *path = path_at_rank(*path, rank);
  }
  if (rank != 0) o.print = false;
  return o;
}

std::optional<Failure> check_streams_across_ranks(const RunRank& rank, const Options& o, const ir::Program& program,
                                                  const std::vector<std::string>& routines) {
  if (o.streams <= 1 || rank.size <= 1) return std::nullopt;
  // Collectives are registered alike for every driver; an unknown device is reported later.
  const std::string driver = o.device.substr(0, o.device.find(':'));
  auto is_collective = [&](const std::string& function) {
    Result<std::vector<const ral::Function*>> found = ral::Registry::global().find_nickname(function, driver);
    return found.ok() && std::any_of(found->begin(), found->end(), [](const ral::Function* f) { return f->collective; });
  };
  for (const std::string& name : routines) {
    const ir::Routine* routine = program.find_routine(name);
    if (!routine) continue;
    for (const ir::Call& call : routine->calls) {
      if (!is_collective(call.function)) continue;
      const std::string streams = std::to_string(o.streams);
      return usage_error("run", "--streams " + streams + " under mpirun (" + std::to_string(rank.size) +
                                    " ranks): routine '" + name + "' runs a collective (" + call.function +
                                    (call.loc.line ? " at line " + std::to_string(call.loc.line) : std::string()) +
                                    "), and the collectives of one process's streams have no order between "
                                    "them, so the ranks could combine one stream's call with another's; "
                                    "with collectives under mpirun, use --streams 1");
    }
  }
  return std::nullopt;
}

Result<bool> every_rank_staged(const RunRank& rank, bool staged) {
  if (rank.size == 1) return staged;
  const int32_t mine = staged ? 1 : 0;
  int32_t all = 0;
  ral::Collective vote;
  vote.in = &mine;
  vote.out = &all;
  vote.count = 1;
  vote.type = ir::DType::kI32;
  vote.op = ral::CollectiveOp::kMin;
  vote.site = "kiln run: every rank's outputs staged";
  KILN_RETURN_IF_ERROR(rank.world->run(std::move(vote)));
  return all == 1;
}

void leave_job_if_failed(int code) {
  if (code == 0 || joined_ranks.load() <= 1) return;
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace kiln::tools
