// The lowering of a program, shared by lower.cc (the decisions: memory modes, call tensors,
// kernel groups, and the routine and group structure) and lower_statement.cc (one statement's
// loops and expressions). Internal to the loop layer.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/loop/lower.h"
#include "loop/fusion.h"
#include "loop/inlining.h"
#include "loop/local_arrays.h"
#include "loop/work_count.h"

namespace kiln::ir::lowering {

struct KernelBuilder {
  Kernel kernel;
  std::unordered_set<int> used;  // kernel.nodes as a set
  std::vector<std::string> failures;  // the kernel's kFail messages, by site
  void use(int node) {
    count_lowering_work(1);
    if (used.insert(node).second) kernel.nodes.push_back(node);
  }
  // The site of failure `message` in the kernel (kiln/loop/loop.h, kFail).
  int failure_site(const std::string& message) {
    for (size_t i = 0; i < failures.size(); ++i) {
      if (failures[i] == message) return static_cast<int>(i);
    }
    failures.push_back(message);
    return static_cast<int>(failures.size()) - 1;
  }
};

class Lowerer {
 public:
  Lowerer(const Program& program, const LowerOptions& options)
      : in_(program), options_(options) {
    out_.program = program;
  }

  Result<LoweredProgram> run();

 private:
  // How one statement's expression is being lowered.
  struct Scope {
    const Assignment* stmt;
    std::vector<LExprRef> index_value;  // statement index number → i64 value
    // Per index number: the dimension of the statement being lowered (the top-level one, also
    // inside inlined definitions) whose target index the value exactly is, else -1; and whether
    // the value is known to lie in [0, extent) (then a subscript of it needs no range check).
    std::vector<int> target_dim;
    std::vector<bool> in_range;
    // Reduction context: range conditions of top-level references skip the point. Otherwise
    // (and always inside inlined definitions) an out-of-range read is 0.
    std::vector<LExprRef>* skip_conditions = nullptr;
    // LowerOptions::check_bounds: the gathers read at the point, each checked before it (shared
    // with inlined definitions, whose gathers are checked where they are read).
    std::vector<LStmtRef>* checks = nullptr;
  };
  // Where an element lives: a node buffer, or a local array of the kernel being built.
  struct Place {
    int node = -1;
    int local = -1;
    LExprRef offset;
  };

  Status place_call_tensors();
  Status decide_memory();
  Status plan_routines();
  Status lower_routine(size_t r, LoweredRoutine* lowered);
  Result<std::vector<Kernel>> lower_group(const Routine& routine, size_t r, size_t g);
  Result<std::vector<LStmtRef>> lower_statement(const Routine& routine, size_t index);
  std::vector<LStmtRef> inner_target_loops(const Assignment& s, std::vector<LStmtRef> body) const;
  std::vector<LStmtRef> accumulate_in_place(const Assignment& s, const TensorNode& target,
                                            const std::vector<int>& reduced,
                                            const std::vector<int>& loop_vars, const LExprRef& term,
                                            const std::vector<LExprRef>& conditions,
                                            const std::vector<LStmtRef>& checks,
                                            const LStmtRef& note, const Scope& scope);
  LExprRef arg_reduction(const Assignment& s, const LExprRef& term, const std::vector<LExprRef>& conditions,
                         const std::vector<LStmtRef>& checks, int var, std::vector<LStmtRef>* point);
  // A triangular bound's limit of index `i` (IndexVar::limit) as an i64 value at the point.
  LExprRef limit_value(const Assignment& s, int i, const Scope& scope) const;
  // What `mean` divides by: the count of points of the reduced indices (mean_count).
  LExprRef mean_count(const Assignment& s, DType type, const Scope& scope) const;
  // LowerOptions::check_bounds: a check that gathered position `position` of dimension `d` of
  // `decl`, read by `read` (of statement `s`), is in range, else the dispatch fails naming them.
  LStmtRef gather_check(const Assignment& s, const Expr& read, const TensorNode& decl, size_t d,
                        const LExprRef& position, const LExprRef& in_range);
  // Value tracing: the kTrace statement of the statement being lowered at this point, logging
  // its indices, the reads recorded so far and `value` (LowerOptions::trace_values).
  LStmtRef trace_point(const Scope& scope, LExprRef value);
  Result<LExprRef> lower_expr(const Expr& e, Scope& scope);
  Result<LExprRef> lower_read(const Expr& e, Scope& scope);
  Result<Place> place(int node, const TensorNode& decl, const std::vector<LExprRef>& subs, bool row);
  LExprRef load(const Place& p, DType type) const;
  LStmtRef store(const Place& p, LExprRef value) const;
  int hidden_node(const std::string& name, const TensorNode& like, Role role, MemoryMode mode);

  const Program& in_;
  LoweredProgram out_;
  LowerOptions options_;
  InlineDefs inline_def_;                         // virtual node → its defining statement
  std::map<const Assignment*, bool> skipped_;     // definitions that were inlined away
  std::unordered_map<std::string, int> hidden_;   // hidden nodes made so far, by name
  std::vector<RoutinePlan> plans_;                // per routine: its kernel groups
  int next_call_site_ = 0;                        // call sites numbered in program order
  std::map<std::pair<size_t, size_t>, std::vector<int>> group_locals_;  // (routine, group) → nodes
  // Per kernel group being lowered.
  KernelBuilder* kb_ = nullptr;
  int parallel_dims_ = 0;              // k: leading target dims of the parallel loop
  LExprRef row_var_;                   // the parallel loop's variable (k >= 1)
  std::map<int, int> local_of_;        // local array node → its local number
  // Per statement being lowered.
  int target_ = -1;
  const Assignment* statement_ = nullptr;
  std::vector<std::pair<std::string, LExprRef>> trace_reads_;  // what trace_point logs as reads
  std::vector<LExprRef> target_values_;  // per target dim: the index's value
  std::vector<LExprRef> loop_extents_;   // per index: how far its loop runs (kiln/ir/loop_extents.h)
  TraceSite trace_site_;                 // the routine and statement being lowered
  bool needs_snapshot_ = false;
  int snapshot_node_ = -1;
};

}  // namespace kiln::ir::lowering
