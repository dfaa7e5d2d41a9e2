// Local-array placement (local_arrays.h).
#include "loop/local_arrays.h"
#include "loop/work_count.h"

#include "loop/overwrite.h"

namespace kiln::ir::lowering {

NodeUses node_uses(const std::vector<RoutinePlan>& plans, const InlineDefs& inlined) {
  NodeUses uses;
  for (size_t r = 0; r < plans.size(); ++r) {
    const Routine& routine = *plans[r].routine;
    for (size_t g = 0; g < plans[r].groups.size(); ++g) {
      for (size_t i : plans[r].groups[g].statements) {
        // One use per node the statement touches, merging its accesses of that node.
        std::unordered_map<int, NodeUse> of_statement;
        std::vector<int> order;
        for (const Access& a : statement_accesses(routine.statements[i], inlined)) {
          auto [it, fresh] = of_statement.emplace(a.node, NodeUse{r, g, i, false, false, false});
          if (fresh) order.push_back(a.node);
          NodeUse& u = it->second;
          u.merge = u.merge || a.merge;
          (a.write ? u.writes : u.reads) = true;
        }
        for (int node : order) uses[node].push_back(of_statement[node]);
      }
    }
  }
  return uses;
}

LocalPlacement place_local_array(const Program& program, int node, const std::vector<RoutinePlan>& plans,
                                 const InlineDefs& inlined) {
  return place_local_array(program, node, plans, inlined, node_uses(plans, inlined));
}

LocalPlacement place_local_array(const Program& program, int node, const std::vector<RoutinePlan>& plans,
                                 const InlineDefs& inlined, const NodeUses& uses) {
  const TensorNode& n = program.nodes[static_cast<size_t>(node)];
  auto refuse = [](std::string why) { return LocalPlacement{false, std::move(why), 0, 0}; };
  if (n.role != Role::kTensor) return refuse("it is " + std::string(role_name(n.role)) + ", not an intermediate");
  if (n.memory != MemoryMode::kUnset && n.memory != MemoryMode::kLocal) {
    return refuse("it was requested " + std::string(memory_mode_name(n.memory)));
  }
  if (inlined.count(node)) return refuse("it is inlined into its reader");

  bool found = false, read = false;
  LocalPlacement at{true, "", 0, 0};
  auto touching = uses.find(node);
  static const std::vector<NodeUse> kNone;
  for (const NodeUse& u : touching == uses.end() ? kNone : touching->second) {
    count_lowering_work(1);
    const Routine& routine = *plans[u.routine].routine;
    if (u.merge) return refuse("routine '" + routine.name + "' reads its merge buffer");
    const std::string where = "routine '" + routine.name + "', statement " + std::to_string(u.statement + 1);
    if (found && (at.routine != u.routine || at.group != u.group)) {
      return refuse("it is used by more than one kernel (again by " + where + ")");
    }
    // The first statement that touches it (in its one group) must overwrite it without reading.
    if (!found) {
      if (plans[u.routine].groups[u.group].parallel_dims < 1) return refuse(where + " has no parallel loop to hold it");
      found = true;
      at.routine = u.routine;
      at.group = u.group;
      if (u.reads || !u.writes || !fully_overwritten(routine.statements[u.statement])) {
        return refuse(where + " touches it before a statement overwrites it");
      }
    }
    read = read || u.reads;
  }
  if (!found) return refuse("no statement uses it");
  if (!read) return refuse("nothing reads it (it stays visible to the host)");
  const KernelGroup& group = plans[at.routine].groups[at.group];
  int64_t row = 1;
  for (size_t d = static_cast<size_t>(group.parallel_dims); d < n.dims.size(); ++d) {
    if (n.is_sized() && !n.sized_dims[d].is_constant()) {
      return refuse("its row's length (dimension " + std::to_string(d + 1) + ") is a size, known only when it runs");
    }
    row *= n.dims[d];
  }
  if (row > kMaxLocalRowElements) {
    return refuse("its row has " + std::to_string(row) + " elements, more than " +
                  std::to_string(kMaxLocalRowElements));
  }
  return at;
}

}  // namespace kiln::ir::lowering
