// Local-array placement (local_arrays.h).
#include "loop/local_arrays.h"

#include "loop/overwrite.h"

namespace kiln::ir::lowering {

LocalPlacement place_local_array(const Program& program, int node, const std::vector<RoutinePlan>& plans,
                                 const InlineDefs& inlined) {
  const TensorNode& n = program.nodes[static_cast<size_t>(node)];
  auto refuse = [](std::string why) { return LocalPlacement{false, std::move(why), 0, 0}; };
  if (n.role != Role::kTensor) return refuse("it is " + std::string(role_name(n.role)) + ", not an intermediate");
  if (n.memory != MemoryMode::kUnset && n.memory != MemoryMode::kLocal) {
    return refuse("it was requested " + std::string(memory_mode_name(n.memory)));
  }
  if (inlined.count(node)) return refuse("it is inlined into its reader");

  bool found = false, read = false;
  LocalPlacement at{true, "", 0, 0};
  for (size_t r = 0; r < plans.size(); ++r) {
    const Routine& routine = *plans[r].routine;
    for (size_t g = 0; g < plans[r].groups.size(); ++g) {
      const KernelGroup& group = plans[r].groups[g];
      bool first_in_group = true;
      for (size_t i : group.statements) {
        const Assignment& s = routine.statements[i];
        bool reads = false, writes = false;
        for (const Access& a : statement_accesses(s, inlined)) {
          if (a.node != node) continue;
          if (a.merge) return refuse("routine '" + routine.name + "' reads its merge buffer");
          (a.write ? writes : reads) = true;
        }
        if (!reads && !writes) continue;
        const std::string where = "routine '" + routine.name + "', statement " + std::to_string(i + 1);
        if (found && (at.routine != r || at.group != g)) {
          return refuse("it is used by more than one kernel (again by " + where + ")");
        }
        if (!found) {
          if (group.parallel_dims < 1) return refuse(where + " has no parallel loop to hold it");
          found = true;
          at.routine = r;
          at.group = g;
        }
        if (first_in_group && (reads || !writes || !fully_overwritten(s))) {
          return refuse(where + " touches it before a statement overwrites it");
        }
        first_in_group = false;
        read = read || reads;
      }
    }
  }
  if (!found) return refuse("no statement uses it");
  if (!read) return refuse("nothing reads it (it stays visible to the host)");
  const KernelGroup& group = plans[at.routine].groups[at.group];
  int64_t row = 1;
  for (size_t d = static_cast<size_t>(group.parallel_dims); d < n.dims.size(); ++d) row *= n.dims[d];
  if (row > kMaxLocalRowElements) {
    return refuse("its row has " + std::to_string(row) + " elements, more than " +
                  std::to_string(kMaxLocalRowElements));
  }
  return at;
}

}  // namespace kiln::ir::lowering
