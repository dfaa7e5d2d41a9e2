// Kernel grouping and the fusion legality check (fusion.h).
#include "loop/fusion.h"

#include <algorithm>
#include <set>

namespace kiln::ir::lowering {

int64_t leading_extent(const TensorNode& node, int k) {
  int64_t extent = 1;
  for (int d = 0; d < k && d < static_cast<int>(node.dims.size()); ++d) extent *= node.dims[static_cast<size_t>(d)];
  return extent;
}

int parallel_dims_alone(const TensorNode& target, bool collapse) {
  const int rank = static_cast<int>(target.dims.size());
  if (rank == 0) return 0;
  if (!collapse) return 1;
  int k = 1;
  while (k < rank && leading_extent(target, k) < kMinParallelExtent) ++k;
  return k;
}

namespace {

std::string where(const Routine& routine, size_t statement) {
  return "routine '" + routine.name + "', statement " + std::to_string(statement + 1);
}

// Whether fusing at k keeps every member's parallelism (see kSerialFusionElements).
bool keeps_parallelism(const Program& program, const Routine& routine,
                       const std::vector<size_t>& statements, int k) {
  for (size_t i : statements) {
    const TensorNode& target = program.nodes[static_cast<size_t>(routine.statements[i].target)];
    const int64_t alone = leading_extent(target, parallel_dims_alone(target, true));
    if (leading_extent(target, k) >= std::min(kMinParallelExtent, alone)) continue;
    if (target.element_count() > kSerialFusionElements) return false;
  }
  return true;
}

}  // namespace

Status fusion_legal(const Program& program, const Routine& routine,
                    const std::vector<size_t>& statements, int k, const InlineDefs& inlined) {
  if (statements.empty() || k < 1) return invalid_argument_error("nothing to fuse");
  const TensorNode& first = program.nodes[static_cast<size_t>(routine.statements[statements[0]].target)];
  std::set<int> written;
  for (size_t i : statements) {
    const Assignment& s = routine.statements[i];
    const TensorNode& target = program.nodes[static_cast<size_t>(s.target)];
    if (static_cast<int>(target.dims.size()) < k) {
      return invalid_argument_error(where(routine, i) + ": target '" + target.name + "' has fewer than " +
                                    std::to_string(k) + " dimensions");
    }
    for (int d = 0; d < k; ++d) {
      if (target.dims[static_cast<size_t>(d)] != first.dims[static_cast<size_t>(d)]) {
        return invalid_argument_error(where(routine, i) + ": target '" + target.name + "' has size " +
                                      std::to_string(target.dims[static_cast<size_t>(d)]) + " in dimension " +
                                      std::to_string(d) + ", '" + first.name + "' has " +
                                      std::to_string(first.dims[static_cast<size_t>(d)]));
      }
    }
    if (statements.size() > 1 && reads_target_elsewhere(s, inlined)) {
      return invalid_argument_error(where(routine, i) + ": reads its target '" + target.name +
                                    "' elsewhere than the point it writes (needs a snapshot first)");
    }
    written.insert(s.target);
  }
  for (size_t i : statements) {
    const Assignment& s = routine.statements[i];
    for (const Access& a : statement_accesses(s, inlined)) {
      if (a.merge || !written.count(a.node)) continue;
      for (int d = 0; d < k; ++d) {
        if (static_cast<size_t>(d) >= a.subscripts.size() ||
            a.subscripts[static_cast<size_t>(d)].bare_index() != s.target_indices[static_cast<size_t>(d)]) {
          return invalid_argument_error(where(routine, i) + ": " + (a.write ? "writes '" : "reads '") +
                                        program.nodes[static_cast<size_t>(a.node)].name + "' in dimension " +
                                        std::to_string(d) + " elsewhere than the row of the parallel loop");
        }
      }
    }
  }
  return Status();
}

std::vector<KernelGroup> plan_kernels(const Program& program, const Routine& routine,
                                      const std::vector<size_t>& statements,
                                      const InlineDefs& inlined, const FusionOptions& options) {
  std::vector<KernelGroup> groups;
  bool open = false;  // whether groups.back() may take more statements
  for (size_t i : statements) {
    const Assignment& s = routine.statements[i];
    const TensorNode& target = program.nodes[static_cast<size_t>(s.target)];
    const int alone = parallel_dims_alone(target, options.collapse);
    const bool fusable = options.fuse && alone > 0 && !reads_target_elsewhere(s, inlined);
    if (fusable && open) {
      KernelGroup& g = groups.back();
      std::vector<size_t> members = g.statements;
      members.push_back(i);
      bool joined = false;
      for (int k = std::min(g.parallel_dims, static_cast<int>(target.dims.size())); k >= 1 && !joined; --k) {
        if (fusion_legal(program, routine, members, k, inlined).ok() &&
            keeps_parallelism(program, routine, members, k)) {
          g.statements = members;
          g.parallel_dims = k;
          joined = true;
        }
      }
      if (joined) continue;
    }
    groups.push_back(KernelGroup{{i}, alone});
    open = fusable;
  }
  return groups;
}

}  // namespace kiln::ir::lowering
