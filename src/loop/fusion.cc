// Kernel grouping and the fusion legality check (fusion.h).
#include "loop/fusion.h"
#include "loop/work_count.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir::lowering {

namespace {

// Whether dimension d of `node` is a size (unknown until the kernel runs).
bool is_size_dim(const TensorNode& node, size_t d) { return node.is_sized() && !node.sized_dims[d].is_constant(); }

// A dimension for planning: its number, or for a size the stand-in kSizeForPlanning.
int64_t planning_dim(const TensorNode& node, size_t d) {
  return is_size_dim(node, d) ? kSizeForPlanning : node.dims[d];
}

int64_t saturating_product(int64_t a, int64_t b) {
  int64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

}  // namespace

int64_t leading_extent(const TensorNode& node, int k) {
  int64_t extent = 1;
  for (int d = 0; d < k && d < static_cast<int>(node.dims.size()); ++d) {
    extent = saturating_product(extent, planning_dim(node, static_cast<size_t>(d)));
  }
  return extent;
}

bool same_dim(const TensorNode& a, const TensorNode& b, size_t d) { return a.dimension(d) == b.dimension(d); }

int parallel_dims_alone(const TensorNode& target, bool collapse) {
  const int rank = static_cast<int>(target.dims.size());
  if (rank == 0) return 0;
  if (!collapse) return 1;
  // A dimension that is a size does not join: two sizes collapsed make an extent of their
  // product, and a sized product c[M, N] keeps its parallel loop over rows (optimize.md's tiles).
  int k = 1;
  while (k < rank && leading_extent(target, k) < kMinParallelExtent && !is_size_dim(target, static_cast<size_t>(k))) {
    ++k;
  }
  return k;
}

namespace {

std::string where(const Routine& routine, size_t statement) {
  return "routine '" + routine.name + "', statement " + std::to_string(statement + 1);
}

// Whether a statement with this target keeps its parallelism in a kernel parallel over k dims
// (see kSerialFusionElements).
bool keeps_parallelism(const TensorNode& target, int k) {
  const int64_t alone = leading_extent(target, parallel_dims_alone(target, true));
  return leading_extent(target, k) >= std::min(kMinParallelExtent, alone) ||
         (!target.is_sized() && target.element_count() <= kSerialFusionElements);
}

}  // namespace

int row_depth(const Assignment& s, const Access& a) {
  size_t d = 0;
  while (d < a.subscripts.size() && d < s.target_indices.size() &&
         a.subscripts[d].bare_index() == s.target_indices[d]) {
    ++d;
  }
  return static_cast<int>(d);
}

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
      if (!same_dim(target, first, static_cast<size_t>(d))) {
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
      if (const int d = row_depth(s, a); d < k) {
        return invalid_argument_error(where(routine, i) + ": " + (a.write ? "writes '" : "reads '") +
                                      program.nodes[static_cast<size_t>(a.node)].name + "' in dimension " +
                                      std::to_string(d) + " elsewhere than the row of the parallel loop");
      }
    }
  }
  return Status();
}

namespace {

// The group that the next statement may join, with what fusion_legal would check kept up to
// date as members join, so that planning a routine is linear in its accesses: a statement
// is checked against these summaries, never against the members one by one.
class OpenGroup {
 public:
  OpenGroup(const Program& program, const Routine& routine) : program_(program), routine_(routine) {}

  // Starts a group of statement `i` alone, parallel over its first `k` target dims.
  void start(size_t i, int k, const std::vector<Access>& accesses) {
    first_ = &target_of(i);
    group_ = KernelGroup{{}, k};
    prefix_ = static_cast<int>(first_->dims.size());
    row_limit_ = INT32_MAX;
    min_depth_.clear();
    written_.clear();
    keeps_.assign(static_cast<size_t>(k) + 1, true);
    add(i, k, accesses);
  }

  // The largest k >= 1 (at most the group's) at which the group with statement `i` added is
  // legal and keeps every member's parallelism, or 0 when there is none.
  int join_depth(size_t i, const std::vector<Access>& accesses) const {
    const Assignment& s = routine_.statements[i];
    const TensorNode& target = target_of(i);
    int limit = std::min({group_.parallel_dims, static_cast<int>(target.dims.size()),
                          std::min(prefix_, common_prefix(target))});
    limit = std::min(limit, row_limit_);
    for (const Access& a : accesses) {
      count_lowering_work(1);
      if (!a.merge && (a.node == s.target || written_.count(a.node))) limit = std::min(limit, row_depth(s, a));
    }
    if (!written_.count(s.target)) {
      auto earlier = min_depth_.find(s.target);  // earlier members' accesses of the new target
      if (earlier != min_depth_.end()) limit = std::min(limit, earlier->second);
    }
    for (int k = limit; k >= 1; --k) {
      if (keeps_[static_cast<size_t>(k)] && keeps_parallelism(target, k)) return k;
    }
    return 0;
  }

  // Adds statement `i` (join_depth gave `k`).
  void add(size_t i, int k, const std::vector<Access>& accesses) {
    const Assignment& s = routine_.statements[i];
    const TensorNode& target = target_of(i);
    group_.statements.push_back(i);
    group_.parallel_dims = k;
    prefix_ = std::min(prefix_, common_prefix(target));
    for (const Access& a : accesses) {
      count_lowering_work(1);
      if (a.merge) continue;
      auto [it, fresh] = min_depth_.emplace(a.node, row_depth(s, a));
      if (!fresh) it->second = std::min(it->second, row_depth(s, a));
    }
    if (written_.insert(s.target).second) {
      // Earlier members' accesses of the new target (its own write is among `accesses`).
      auto earlier = min_depth_.find(s.target);
      if (earlier != min_depth_.end()) row_limit_ = std::min(row_limit_, earlier->second);
    }
    for (const Access& a : accesses) {
      if (!a.merge && written_.count(a.node)) row_limit_ = std::min(row_limit_, row_depth(s, a));
    }
    keeps_.resize(static_cast<size_t>(k) + 1);
    for (int d = 1; d <= k; ++d) keeps_[static_cast<size_t>(d)] = keeps_[static_cast<size_t>(d)] && keeps_parallelism(target, d);
  }

  const KernelGroup& group() const { return group_; }

 private:
  const TensorNode& target_of(size_t i) const {
    return program_.nodes[static_cast<size_t>(routine_.statements[i].target)];
  }
  // How many leading dims `target` shares with the group's first target.
  int common_prefix(const TensorNode& target) const {
    int d = 0;
    while (d < static_cast<int>(target.dims.size()) && d < static_cast<int>(first_->dims.size()) &&
           same_dim(target, *first_, static_cast<size_t>(d))) {
      ++d;
    }
    return d;
  }

  const Program& program_;
  const Routine& routine_;
  const TensorNode* first_ = nullptr;
  KernelGroup group_;
  int prefix_ = 0;     // leading dims every member's target shares with the first's
  int row_limit_ = 0;  // min row_depth over the accesses of written nodes
  std::unordered_map<int, int> min_depth_;  // node → min row_depth over its accesses
  std::unordered_set<int> written_;         // targets of the members
  std::vector<bool> keeps_;                 // [k]: every member keeps its parallelism at k
};

}  // namespace

std::vector<KernelGroup> plan_kernels(const Program& program, const Routine& routine,
                                      const std::vector<size_t>& statements,
                                      const InlineDefs& inlined, const FusionOptions& options) {
  std::vector<KernelGroup> groups;
  OpenGroup group(program, routine);
  bool open = false;  // whether `group` may take more statements
  for (size_t i : statements) {
    const Assignment& s = routine.statements[i];
    const TensorNode& target = program.nodes[static_cast<size_t>(s.target)];
    const std::vector<Access> accesses = statement_accesses(s, inlined);
    const int alone = parallel_dims_alone(target, options.collapse);
    const bool fusable = options.fuse && alone > 0 && !reads_target_elsewhere(s, accesses);
    if (fusable && open) {
      if (const int k = group.join_depth(i, accesses); k >= 1) {
        group.add(i, k, accesses);
        continue;
      }
    }
    if (open) groups.push_back(group.group());
    if (fusable) {
      group.start(i, alone, accesses);
    } else {
      groups.push_back(KernelGroup{{i}, alone});
    }
    open = fusable;
  }
  if (open) groups.push_back(group.group());
  return groups;
}

}  // namespace kiln::ir::lowering
