// Lowering of assignments to loop nests. The decisions are made by separate analyses: which
// intermediates are inlined (here), which statements share a kernel and over which loop it is
// parallel (fusion.h), which intermediates are local arrays (local_arrays.h), what a statement
// overwrites (overwrite.h); this file turns those decisions into kernels.
#include "kiln/loop/lower.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "loop/access.h"
#include "loop/fusion.h"
#include "loop/inlining.h"
#include "loop/local_arrays.h"
#include "loop/lower_arith.h"
#include "loop/overwrite.h"
#include "loop/work_count.h"
#include "kiln/ir/call.h"
#include "kiln/ir/memory_mode.h"
#include "kiln/loop/optimize.h"
#include "kiln/ir/printer.h"

namespace kiln::ir {

namespace {

using namespace lowering;  // NOLINT: the helpers of lowering's own analyses

// Kernel names are "<prefix>_<first statement>". The dialects reserve names that begin with '_'
// (C's and OpenCL's own), "kiln_" / "KILN_" (kiln's helpers) and "get_" (OpenCL's work-item
// functions); a routine named so gets the prefix "rt_", and so does one whose name begins with
// "rt_", which keeps kernel names of different routines distinct.
std::string kernel_name_prefix(const std::string& routine) {
  const bool reserved = routine.starts_with("_") || routine.starts_with("kiln_") ||
                        routine.starts_with("KILN_") || routine.starts_with("get_") ||
                        routine.starts_with("rt_");
  return reserved ? "rt_" + routine : routine;
}

struct KernelBuilder {
  Kernel kernel;
  std::unordered_set<int> used;  // kernel.nodes as a set
  void use(int node) {
    count_lowering_work(1);
    if (used.insert(node).second) kernel.nodes.push_back(node);
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
                                            const LStmtRef& note, const Scope& scope);
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
  TraceSite trace_site_;                 // the routine and statement being lowered
  bool needs_snapshot_ = false;
  int snapshot_node_ = -1;
};

int Lowerer::hidden_node(const std::string& name, const TensorNode& like, Role role,
                         MemoryMode mode) {
  auto known = hidden_.find(name);
  if (known != hidden_.end()) return known->second;
  TensorNode node = like;
  node.id = static_cast<int>(out_.program.nodes.size());
  node.name = name;
  node.role = role;
  node.init = Init{};
  node.memory = mode;
  out_.program.nodes.push_back(node);
  hidden_.emplace(name, node.id);
  return node.id;
}

// A call passes whole tensors by address: each needs a buffer. Intermediates get one on the
// device, a const that would be folded keeps its host copy, and a request for a virtual or local
// tensor cannot be met.
Status Lowerer::place_call_tensors() {
  for (const Routine& routine : in_.routines) {
    for (const Call& call : routine.calls) {
      for (int node : call_tensors(call)) {
        TensorNode& n = out_.program.nodes[node];
        const MemoryMode requested = in_.nodes[node].memory;
        if (requested == MemoryMode::kVirtual || requested == MemoryMode::kLocal) {
          return invalid_argument_error("tensor '" + n.name + "' cannot be " +
                                        std::string(memory_mode_name(requested)) + ": call " + call.function +
                                        " (routine '" + routine.name + "', line " + std::to_string(call.loc.line) +
                                        ") passes it whole, so it needs a buffer");
        }
        if (n.memory == MemoryMode::kVirtual) n.memory = MemoryMode::kHosted;  // a folded const
        if (n.memory == MemoryMode::kUnset) n.memory = MemoryMode::kOnDevice;
      }
    }
  }
  return Status();
}

// Roles fix the modes of inputs, outputs and params; user requests (memory_mode.h) stand; a const
// with a plain value is folded; then intermediates are inlined where possible (or requested).
Status Lowerer::decide_memory() {
  KILN_RETURN_IF_ERROR(check_memory_modes(in_));
  for (TensorNode& n : out_.program.nodes) {
    if (n.role == Role::kInput || n.role == Role::kOutput || n.role == Role::kParam) {
      n.memory = MemoryMode::kHosted;
    } else if (n.role == Role::kConst && n.memory == MemoryMode::kUnset) {
      n.memory = n.init.kind == Init::Kind::kValue ? MemoryMode::kVirtual : MemoryMode::kHosted;
    }
  }
  KILN_RETURN_IF_ERROR(place_call_tensors());
  const InlineCandidates candidates(in_);
  InlinedDepths depths;
  std::set<int> too_deep;  // definitions kept in memory so that no expression nests too deep
  for (const Routine& routine : in_.routines) {
    for (size_t i = 0; i < routine.statements.size(); ++i) {
      const Assignment& s = routine.statements[i];
      // Chains of inlined definitions nest: keep the deepest ones in memory until the statement
      // is within kMaxExprDepth, so that no later pass (or the C compiler) recurses without bound.
      int depth = depths.of(s, inline_def_);
      while (depth > kMaxExprDepth) {
        const int deepest = depths.deepest_inlined_read(s, inline_def_);
        if (deepest < 0) break;  // cannot happen: a validated statement alone is within the limit
        skipped_.erase(inline_def_[deepest]);
        inline_def_.erase(deepest);
        too_deep.insert(deepest);
        depth = depths.of(s, inline_def_);
      }
      TensorNode& n = out_.program.nodes[s.target];
      if (n.role != Role::kTensor || inline_def_.count(s.target)) continue;
      // A request for a buffer or a local array is never inlined; kVirtual always is tried.
      if (n.memory != MemoryMode::kVirtual && (n.memory != MemoryMode::kUnset || !options_.inline_virtual)) continue;
      size_t reader = 0;
      if (candidates.inlinable(s.target, routine, i, &reader)) {
        inline_def_[s.target] = &s;
        skipped_[&s] = true;
        depths.set(s.target, depth);
      }
    }
  }
  for (TensorNode& n : out_.program.nodes) {
    if (n.role != Role::kTensor) continue;
    const bool requested = n.memory == MemoryMode::kVirtual;
    if (inline_def_.count(n.id)) {
      n.memory = MemoryMode::kVirtual;
    } else if (requested && too_deep.count(n.id)) {
      return invalid_argument_error("tensor '" + n.name + "' cannot be virtual: inlining it would nest an "
                                    "expression deeper than " + std::to_string(kMaxExprDepth) + " levels");
    } else if (requested) {
      return invalid_argument_error("tensor '" + n.name +
                                    "' cannot be virtual: it is not computed once, elementwise, "
                                    "and read by exactly one later statement");
    }
  }
  return Status();
}

// Kernel groups per routine, then local arrays (which depend on the groups), then the rest of
// the intermediates get device buffers.
Status Lowerer::plan_routines() {
  const FusionOptions fusion{options_.fuse, options_.collapse};
  for (const Routine& routine : in_.routines) {
    // Calls split the statements into segments planned apart: no kernel spans a call.
    RoutinePlan plan{&routine, {}};
    std::vector<size_t> segment;
    auto plan_segment = [&] {
      if (segment.empty()) return;
      std::vector<KernelGroup> groups = plan_kernels(in_, routine, segment, inline_def_, fusion);
      plan.groups.insert(plan.groups.end(), groups.begin(), groups.end());
      segment.clear();
    };
    size_t next_call = 0;
    for (size_t i = 0; i < routine.statements.size(); ++i) {
      for (; next_call < routine.calls.size() && static_cast<size_t>(routine.calls[next_call].position) <= i; ++next_call) {
        plan_segment();
      }
      if (!skipped_.count(&routine.statements[i])) segment.push_back(i);
    }
    plan_segment();
    plans_.push_back(std::move(plan));
  }
  const NodeUses uses = node_uses(plans_, inline_def_);
  for (TensorNode& n : out_.program.nodes) {
    if (n.role != Role::kTensor || n.id >= static_cast<int>(in_.nodes.size())) continue;
    const bool requested = n.memory == MemoryMode::kLocal;
    if (n.memory != MemoryMode::kUnset && !requested) continue;
    if (!options_.local_arrays && !requested) continue;
    LocalPlacement at = place_local_array(in_, n.id, plans_, inline_def_, uses);
    if (at.local && !requested && group_locals_[{at.routine, at.group}].size() >= kMaxLocalArraysPerKernel) {
      continue;  // a device buffer: the kernel holds enough local arrays (local_arrays.h)
    }
    if (at.local) {
      n.memory = MemoryMode::kLocal;
      group_locals_[{at.routine, at.group}].push_back(n.id);
    } else if (requested) {
      return invalid_argument_error("tensor '" + n.name + "' cannot be local: " + at.why_not);
    }
  }
  for (TensorNode& n : out_.program.nodes) {
    if (n.memory == MemoryMode::kUnset) n.memory = MemoryMode::kOnDevice;
  }
  return Status();
}

// `subs` are the subscripts of an access to `node` (declared as `decl`); `row` says its first k
// subscripts are the parallel loop's indices, so that its row starts at row_var * row stride.
Result<Lowerer::Place> Lowerer::place(int node, const TensorNode& decl,
                                      const std::vector<LExprRef>& subs, bool row) {
  const std::vector<int64_t> strides = strides_of(decl);
  const size_t first = row ? static_cast<size_t>(parallel_dims_) : 0;
  LExprRef in_row = i64(0);
  for (size_t d = first; d < subs.size(); ++d) in_row = add(in_row, mul(subs[d], i64(strides[d])));
  auto local = local_of_.find(node);
  if (local != local_of_.end()) {
    if (!row || parallel_dims_ < 1) {
      return internal_error("local array '" + decl.name + "' is accessed outside its row");
    }
    return Place{-1, local->second, in_row};
  }
  kb_->use(node);
  if (row && parallel_dims_ > 0) {
    return Place{node, -1, add(mul(row_var_, i64(strides[first - 1])), in_row)};
  }
  return Place{node, -1, in_row};
}

LExprRef Lowerer::load(const Place& p, DType type) const {
  return p.local >= 0 ? llocal_load(p.local, type, p.offset) : lload(p.node, type, p.offset);
}

LStmtRef Lowerer::store(const Place& p, LExprRef value) const {
  return p.local >= 0 ? llocal_store(p.local, p.offset, std::move(value))
                      : lstore(p.node, p.offset, std::move(value));
}

Result<LExprRef> Lowerer::lower_read(const Expr& e, Scope& scope) {
  int node = e.node;
  const TensorNode& decl = in_.nodes[node];
  std::vector<LExprRef> subs;
  std::vector<LExprRef> conditions;
  bool same_point = true;  // exactly the target point of the statement being lowered
  bool row = true;         // the leading subscripts are the parallel indices
  for (size_t d = 0; d < e.subscripts.size(); ++d) {
    const Affine& a = e.subscripts[d];
    const int bare = a.bare_index();
    LExprRef v = i64(a.offset);
    for (const auto& [index, coeff] : a.terms) v = add(mul(i64(coeff), scope.index_value[index]), v);
    // A bare index that spans exactly its dimension needs no check; anything else is checked.
    if (bare < 0 || !scope.in_range[bare]) {
      conditions.push_back(lop(Op::kGe, DType::kI64, {v, i64(0)}));
      conditions.push_back(lop(Op::kLt, DType::kI64, {v, i64(decl.dims[d])}));
    }
    const int dim = bare < 0 ? -1 : scope.target_dim[bare];
    same_point = same_point && dim == static_cast<int>(d);
    if (static_cast<int>(d) < parallel_dims_) row = row && dim == static_cast<int>(d);
    subs.push_back(std::move(v));
  }
  row = row && static_cast<int>(subs.size()) >= parallel_dims_;

  LExprRef value;
  if (decl.role == Role::kConst && e.kind == Expr::Kind::kTensor &&
      out_.program.nodes[node].memory == MemoryMode::kVirtual) {
    // A folded constant: its value, still under the range conditions of its subscripts.
    value = lconst(decl.dtype, convert_constant(decl.init.a, decl.dtype));
  } else if (auto inlined = inline_def_.find(node); e.kind == Expr::Kind::kTensor && inlined != inline_def_.end()) {
    // Evaluate the definition at this point, with its own reads as in an elementwise statement.
    const Assignment& def = *inlined->second;
    const size_t n = def.indices.size();
    Scope inner{&def, std::vector<LExprRef>(n), std::vector<int>(n, -1), std::vector<bool>(n, false), nullptr};
    for (size_t d = 0; d < def.target_indices.size(); ++d) {
      const int t = def.target_indices[d], bare = e.subscripts[d].bare_index();
      inner.index_value[t] = subs[d];
      inner.target_dim[t] = bare < 0 ? -1 : scope.target_dim[bare];
      inner.in_range[t] = bare >= 0 && scope.in_range[bare];
    }
    for (const LExprRef& v : inner.index_value) {
      if (!v) return internal_error("inlined definition of '" + decl.name + "' has a free index");
    }
    KILN_ASSIGN_OR_RETURN(LExprRef defined, lower_expr(*def.rhs, inner));
    value = cast_to(defined, decl.dtype);
  } else {
    if (e.kind == Expr::Kind::kMerge) {
      node = hidden_node(decl.name + ".merge", decl, Role::kInput, MemoryMode::kHosted);
    } else if (node == target_ && !same_point) {
      needs_snapshot_ = true;
      snapshot_node_ = hidden_node(decl.name + ".prev", decl, Role::kTensor, MemoryMode::kOnDevice);
      node = snapshot_node_;
    }
    KILN_ASSIGN_OR_RETURN(Place at, place(node, decl, subs, row));
    if (!conditions.empty() && !scope.skip_conditions) {
      // Out of range reads 0; the load itself stays in range whichever way select evaluates.
      at.offset = lop(Op::kSelect, DType::kI64, {conjunction(conditions), at.offset, i64(0)});
    }
    value = load(at, decl.dtype);
  }
  if (!conditions.empty()) {
    if (scope.skip_conditions) {
      scope.skip_conditions->insert(scope.skip_conditions->end(), conditions.begin(), conditions.end());
    } else {
      value = lop(Op::kSelect, value->type,
                  {conjunction(conditions), value, lconst(value->type, 0)});
    }
  }
  return value;
}

Result<LExprRef> Lowerer::lower_expr(const Expr& e, Scope& scope) {
  count_lowering_work(1);
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return lconst(e.type, convert_constant(e.literal, e.type));
    case Expr::Kind::kIndex:
      return cast_to(scope.index_value[e.index], DType::kI32);
    case Expr::Kind::kTensor:
    case Expr::Kind::kMerge: {
      KILN_ASSIGN_OR_RETURN(LExprRef v, lower_read(e, scope));
      if (options_.trace_values && scope.stmt == statement_) {
        const bool inlined = e.kind == Expr::Kind::kTensor && inline_def_.count(e.node);
        trace_reads_.emplace_back((inlined ? "inlined " : "") + print_expr(in_, *statement_, e), v);
      }
      return cast_to(v, e.type);
    }
    case Expr::Kind::kOp: {
      const bool is_comparison = e.op == Op::kLt || e.op == Op::kLe || e.op == Op::kGt ||
                                 e.op == Op::kGe || e.op == Op::kEq || e.op == Op::kNe;
      const bool is_cast = e.op == Op::kCastF32 || e.op == Op::kCastF64 || e.op == Op::kCastI32;
      std::vector<LExprRef> args;
      for (size_t i = 0; i < e.args.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(LExprRef a, lower_expr(*e.args[i], scope));
        const bool is_condition = e.op == Op::kSelect && i == 0;
        if (!is_cast && !is_condition && !is_comparison) a = cast_to(a, e.type);
        args.push_back(std::move(a));
      }
      if (is_comparison) {
        DType common = promote(args[0]->type, args[1]->type);
        args[0] = cast_to(args[0], common);
        args[1] = cast_to(args[1], common);
        return cast_to(lop(e.op, common, std::move(args)), e.type);
      }
      return lop(e.op, e.type, std::move(args));
    }
  }
  return internal_error("unknown expression kind");
}

// Wraps `body` in the target loops after the parallel ones.
std::vector<LStmtRef> Lowerer::inner_target_loops(const Assignment& s, std::vector<LStmtRef> body) const {
  const TensorNode& target = in_.nodes[s.target];
  for (size_t d = s.target_indices.size(); d-- > static_cast<size_t>(parallel_dims_);) {
    body = {lfor(target_values_[d]->var, target.dims[d], false, std::move(body))};
  }
  return body;
}

// A reduction into a target with loops inside the parallel ones can fold each term straight
// into the target, with the reduced loops outside the inner target loops: `for i { for k { for
// j { c[i,j] += a[i,k] * b[k,j] } } }` walks b and c contiguously, which the C compiler
// vectorizes, where the accumulator form strides through b. It is the same sum in another order,
// so it is used only where the fold is the statement's own accumulation (= with any reduction,
// += / -= with sum, *= with prod), the term has the target's type, and the right side does not
// read the target. Returns the row's statements, or nothing when the form does not apply.
std::vector<LStmtRef> Lowerer::accumulate_in_place(const Assignment& s, const TensorNode& target,
                                                   const std::vector<int>& reduced,
                                                   const std::vector<int>& loop_vars,
                                                   const LExprRef& term,
                                                   const std::vector<LExprRef>& conditions,
                                                   const LStmtRef& note, const Scope& scope) {
  if (static_cast<int>(s.target_indices.size()) <= parallel_dims_ || reduced.empty() ||
      term->type != target.dtype || loads_node(term, s.target) || needs_snapshot_ ||
      (local_of_.count(s.target) && loads_local(term, local_of_[s.target]))) {
    return {};
  }
  Op fold = fold_op(s.reduce);
  if ((s.accum == Accum::kAdd || s.accum == Accum::kSub) && s.reduce != Reduce::kSum) return {};
  if (s.accum == Accum::kMul && s.reduce != Reduce::kProd) return {};
  if (s.accum != Accum::kAssign) fold = combine_op(s.accum);
  const DType type = target.dtype;
  Result<Place> at = place(s.target, target, target_values_, true);
  if (!at.ok()) return {};
  std::vector<LStmtRef> per_row = {note};
  if (FoldInit init = fold_init(s, type); init.needed) {
    auto fill = inner_target_loops(s, {store(*at, lconst(type, init.value))});
    per_row.insert(per_row.end(), fill.begin(), fill.end());
  }
  LExprRef current = load(*at, type);
  std::vector<LStmtRef> step = {store(*at, lop(fold, type, {current, term}))};
  if (at->node >= 0) {
    if (LStmtRef trace = trace_point(scope, current)) step.push_back(trace);
  }
  if (!conditions.empty()) step = {lif(conjunction(conditions), std::move(step))};
  std::vector<LStmtRef> folds = inner_target_loops(s, std::move(step));
  for (size_t r = reduced.size(); r-- > 0;) {
    folds = {lfor(loop_vars[reduced[r]], s.indices[reduced[r]].extent, false, std::move(folds))};
  }
  per_row.insert(per_row.end(), folds.begin(), folds.end());
  if (s.reduce == Reduce::kMean) {
    int64_t count = 1;
    for (int r : reduced) count *= s.indices[r].extent;
    auto divide = inner_target_loops(s, {store(*at, lop(Op::kDiv, type, {current, lconst(type, double(count))}))});
    per_row.insert(per_row.end(), divide.begin(), divide.end());
  }
  return per_row;
}

// One statement's part of a row of its kernel (the whole kernel body when it has no parallel
// loop): loops over its target dims after the parallel ones, and its reduced dims.
Result<std::vector<LStmtRef>> Lowerer::lower_statement(const Routine& routine, size_t index) {
  const Assignment& s = routine.statements[index];
  Kernel& kernel = kb_->kernel;
  target_ = s.target;
  statement_ = &s;
  trace_reads_.clear();
  trace_site_.routine = routine.name;
  trace_site_.statement = static_cast<int>(index);
  needs_snapshot_ = false;
  const TensorNode& target = in_.nodes[s.target];
  const size_t n = s.indices.size();
  Scope scope{&s, std::vector<LExprRef>(n), std::vector<int>(n, -1), std::vector<bool>(n, true), nullptr};
  std::vector<int> loop_vars(n, -1);
  target_values_.assign(s.target_indices.size(), nullptr);
  // The parallel indices come from the collapsed loop: row = ((i0 * d1 + i1) * d2 + i2) ...
  int64_t below = leading_extent(target, parallel_dims_);
  for (size_t d = 0; d < s.target_indices.size(); ++d) {
    const int i = s.target_indices[d];
    scope.target_dim[i] = static_cast<int>(d);
    if (static_cast<int>(d) < parallel_dims_) {
      below /= target.dims[d];
      LExprRef v = div(row_var_, below);
      target_values_[d] = d == 0 ? v : mod(v, target.dims[d]);
    } else {
      loop_vars[i] = kernel.var_count++;
      target_values_[d] = lvar(loop_vars[i]);
    }
    scope.index_value[i] = target_values_[d];
  }
  std::vector<int> reduced = s.reduced_indices();
  for (int i : reduced) {
    loop_vars[i] = kernel.var_count++;
    scope.index_value[i] = lvar(loop_vars[i]);
  }

  // What runs at one target point, introduced by where it came from.
  LStmtRef note = lcomment(target.name + ": statement " + std::to_string(index + 1) + " of routine " +
                           routine.name + (s.loc.line ? ", line " + std::to_string(s.loc.line) : ""));
  std::vector<LStmtRef> point = {note};
  LExprRef value;
  if (s.reduce == Reduce::kNone) {
    KILN_ASSIGN_OR_RETURN(value, lower_expr(*s.rhs, scope));
  } else {
    std::vector<LExprRef> conditions;
    scope.skip_conditions = &conditions;
    KILN_ASSIGN_OR_RETURN(LExprRef term, lower_expr(*s.rhs, scope));
    std::vector<LStmtRef> in_place =
        accumulate_in_place(s, target, reduced, loop_vars, term, conditions, note, scope);
    if (!in_place.empty()) return in_place;
    const DType type = term->type;
    const int acc = kernel.local_count++;
    LExprRef acc_value = llocal_load(acc, type, i64(0));
    std::vector<LStmtRef> body = {llocal_store(acc, i64(0), lop(fold_op(s.reduce), type, {acc_value, term}))};
    if (LStmtRef trace = trace_point(scope, acc_value)) body.push_back(trace);
    if (!conditions.empty()) body = {lif(conjunction(conditions), std::move(body))};
    for (size_t r = reduced.size(); r-- > 0;) {
      body = {lfor(loop_vars[reduced[r]], s.indices[reduced[r]].extent, false, std::move(body))};
    }
    body.insert(body.begin(), llocal_store(acc, i64(0), lconst(type, neutral(s.reduce, type))));
    value = acc_value;
    if (s.reduce == Reduce::kMean) {
      int64_t count = 1;
      for (int r : reduced) count *= s.indices[r].extent;
      value = lop(Op::kDiv, type, {value, lconst(type, static_cast<double>(count))});
    }
    // The store below runs inside the accumulator's scope.
    point.push_back(llocal_decl(acc, type, 1, std::move(body)));
  }
  KILN_ASSIGN_OR_RETURN(Place at, place(s.target, target, target_values_, true));
  if (s.accum != Accum::kAssign) {
    LExprRef old = load(at, target.dtype);
    DType common = promote(old->type, value->type);
    value = lop(combine_op(s.accum), common, {cast_to(old, common), cast_to(value, common)});
  }
  LStmtRef write = store(at, cast_to(value, target.dtype));
  if (point.back()->kind != LStmt::Kind::kLocalDecl) {
    // Traced before the store: a read of the target at this point is then its old value.
    if (at.node >= 0) {
      if (LStmtRef trace = trace_point(scope, write->value)) point.push_back(trace);
    }
    point.push_back(write);
  } else {
    auto decl = std::make_shared<LStmt>(*point.back());
    decl->body.push_back(write);
    point.back() = decl;
  }
  return inner_target_loops(s, std::move(point));
}

LStmtRef Lowerer::trace_point(const Scope& scope, LExprRef value) {
  if (!options_.trace_values) return nullptr;
  const Assignment& s = *statement_;
  TraceSite site = trace_site_;
  site.loc = s.loc;
  site.text = print_statement(in_, s);
  site.target = in_.nodes[s.target].name;
  site.lines = options_.trace_lines;
  std::vector<LExprRef> values;
  for (size_t i = 0; i < s.indices.size(); ++i) {
    if (!scope.index_value[i]) continue;
    site.indices.push_back(s.indices[i].name);
    values.push_back(scope.index_value[i]);
  }
  for (const auto& [label, read] : trace_reads_) {
    site.reads.push_back(label);
    values.push_back(read);
  }
  values.push_back(std::move(value));
  TensorNode run;
  run.dtype = DType::kI32;
  run.dims = {1};
  const int run_node = hidden_node(kTraceRunNode, run, Role::kInput, MemoryMode::kHosted);
  kb_->use(run_node);
  const int id = static_cast<int>(out_.trace_sites.size());
  out_.trace_sites.push_back(std::move(site));
  return ltrace(id, options_.trace_lines, lload(run_node, DType::kI32, i64(0)), std::move(values));
}

// One kernel for a group of statements (fusion.h), after a snapshot kernel where its statement
// reads its target elsewhere than the point it writes.
Result<std::vector<Kernel>> Lowerer::lower_group(const Routine& routine, size_t r, size_t g) {
  const KernelGroup& group = plans_[r].groups[g];
  const Assignment& first = routine.statements[group.statements.front()];
  const TensorNode& lead = in_.nodes[first.target];
  KernelBuilder kb;
  kb.kernel.name = kernel_name_prefix(routine.name) + "_" + std::to_string(group.statements.front());
  kb_ = &kb;
  parallel_dims_ = group.parallel_dims;
  row_var_ = parallel_dims_ > 0 ? lvar(kb.kernel.var_count++) : nullptr;
  local_of_.clear();
  const std::vector<int> locals = group_locals_[{r, g}];
  for (int node : locals) local_of_[node] = kb.kernel.local_count++;

  std::vector<LStmtRef> row;
  bool snapshot = false;
  for (size_t i : group.statements) {
    Result<std::vector<LStmtRef>> part = lower_statement(routine, i);
    if (!part.ok()) return part.status().annotate("statement " + std::to_string(i + 1));
    row.insert(row.end(), part->begin(), part->end());
    snapshot = snapshot || needs_snapshot_;
  }
  if (snapshot && group.statements.size() > 1) {
    return internal_error("a fused kernel of routine '" + routine.name + "' needs a snapshot");
  }
  // Local arrays hold one row each, declared inside the parallel loop (innermost: the last).
  for (size_t l = locals.size(); l-- > 0;) {
    const TensorNode& n = in_.nodes[locals[l]];
    int64_t size = 1;
    for (size_t d = static_cast<size_t>(parallel_dims_); d < n.dims.size(); ++d) size *= n.dims[d];
    row = {llocal_decl(local_of_[locals[l]], n.dtype, size, std::move(row))};
  }
  if (parallel_dims_ > 0) {
    // A traced kernel runs its rows in order, in one workgroup (LowerOptions::trace_values).
    kb.kernel.body = lfor(row_var_->var, leading_extent(lead, parallel_dims_), !options_.trace_values, std::move(row));
  } else {
    kb.kernel.body = lblock(std::move(row));
  }

  std::vector<Kernel> kernels;
  if (snapshot) {
    // The statement reads its target elsewhere than the point it writes: copy it first.
    Kernel copy;
    copy.name = kb.kernel.name + "_snapshot";
    copy.nodes = {first.target, snapshot_node_};
    copy.var_count = 1;
    copy.body = lfor(0, lead.element_count(), true,
                     {lstore(snapshot_node_, lvar(0), lload(first.target, lead.dtype, lvar(0)))});
    kernels.push_back(std::move(copy));
  }
  kernels.push_back(std::move(kb.kernel));
  kb_ = nullptr;
  return kernels;
}

Status Lowerer::lower_routine(size_t r, LoweredRoutine* lowered) {
  const Routine& routine = *plans_[r].routine;
  lowered->name = routine.name;
  size_t next_call = 0;
  // The calls that run before statement `before` (all of them for SIZE_MAX), after the kernels so far.
  auto add_calls = [&](size_t before) {
    for (; next_call < routine.calls.size() && static_cast<size_t>(routine.calls[next_call].position) <= before;
         ++next_call) {
      lowered->calls.push_back({routine.calls[next_call], lowered->kernels.size(), next_call_site_++});
    }
  };
  for (size_t g = 0; g < plans_[r].groups.size(); ++g) {
    add_calls(plans_[r].groups[g].statements.front());
    Result<std::vector<Kernel>> kernels = lower_group(routine, r, g);
    if (!kernels.ok()) return kernels.status().annotate("routine '" + routine.name + "'");
    for (Kernel& k : *kernels) lowered->kernels.push_back(std::move(k));
  }
  add_calls(SIZE_MAX);
  return Status();
}

Result<LoweredProgram> Lowerer::run() {
  KILN_RETURN_IF_ERROR(validate_program(in_));
  KILN_RETURN_IF_ERROR(decide_memory());
  KILN_RETURN_IF_ERROR(plan_routines());
  for (size_t r = 0; r < plans_.size(); ++r) {
    LoweredRoutine lowered;
    KILN_RETURN_IF_ERROR(lower_routine(r, &lowered));
    out_.routines.push_back(std::move(lowered));
  }
  return std::move(out_);
}

}  // namespace

Result<LoweredProgram> lower_program(const Program& program, const LowerOptions& options) {
  Program with_calls;
  if (options.auto_calls) {
    // with_library_calls reads nodes by index: only a valid program is rewritten (the Lowerer
    // validates what it is given, the rewritten program included).
    KILN_RETURN_IF_ERROR(validate_program(program));
    with_calls = with_library_calls(program, options.library_calls);
  }
  KILN_ASSIGN_OR_RETURN(LoweredProgram lowered, Lowerer(options.auto_calls ? with_calls : program, options).run());
  if (options.optimize && !options.trace_values) {
    for (LoweredRoutine& routine : lowered.routines) {
      for (Kernel& kernel : routine.kernels) {
        optimize_kernel(kernel, OptimizeOptions{.reassociate = options.reassociate});
      }
    }
  }
  return lowered;
}

int merge_node_of(const LoweredProgram& lowered, int node) {
  const Program& p = lowered.program;
  if (node < 0 || node >= static_cast<int>(p.nodes.size())) return -1;
  const TensorNode* merge = p.find_node(p.nodes[node].name + ".merge");
  return merge ? merge->id : -1;
}

}  // namespace kiln::ir
