// Lowering of assignments to loop nests. The decisions are made by separate analyses: which
// intermediates are inlined (here), which statements share a kernel and over which loop it is
// parallel (fusion.h), which intermediates are local arrays (local_arrays.h), what a statement
// overwrites (overwrite.h); this file turns those decisions into kernels, and
// lower_statement.cc lowers each statement.
#include "kiln/loop/lower.h"

#include <cstdint>
#include <set>
#include <string>

#include "kiln/ir/call.h"
#include "kiln/ir/memory_mode.h"
#include "kiln/ir/sizes.h"
#include "kiln/loop/optimize.h"
#include "kiln/ir/statement.h"
#include "loop/lower_arith.h"
#include "loop/lowerer.h"
#include "loop/shared_buffers.h"
#include "loop/overwrite.h"

namespace kiln::ir {

namespace lowering {

namespace {

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

}  // namespace

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
          return invalid_argument_error(at_source(n.loc, "tensor '" + n.name + "' cannot be " +
                                        std::string(memory_mode_name(requested)) + ": call " + call.function +
                                        " (routine '" + routine.name + "', line " + std::to_string(call.loc.line) +
                                        ") passes it whole, so it needs a buffer"));
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
      // The taps of a window written out (x[i - 1] * w0 + x[i] * w1 + x[i + 1] * w2) would compute
      // an inlined x three times per result: stored, it is computed once.
      if (n.memory == MemoryMode::kUnset && candidates.read_at_several_points(s.target)) continue;
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
      return invalid_argument_error(at_source(n.loc, "tensor '" + n.name + "' cannot be virtual: inlining it would nest an "
                                    "expression deeper than " + std::to_string(kMaxExprDepth) + " levels"));
    } else if (requested) {
      return invalid_argument_error(at_source(n.loc, "tensor '" + n.name +
                                    "' cannot be virtual: it is not computed once, elementwise, "
                                    "and read by exactly one later statement"));
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
      return invalid_argument_error(at_source(n.loc, "tensor '" + n.name + "' cannot be local: " + at.why_not));
    }
  }
  for (TensorNode& n : out_.program.nodes) {
    if (n.memory == MemoryMode::kUnset) n.memory = MemoryMode::kOnDevice;
  }
  return Status();
}

// One kernel for a group of statements (fusion.h), after a snapshot kernel where its statement
// reads its target elsewhere than the point it writes.
Result<std::vector<Kernel>> Lowerer::lower_group(const Routine& routine, size_t r, size_t g) {
  const KernelGroup& group = plans_[r].groups[g];
  const Assignment& first = routine.statements[group.statements.front()];
  const TensorNode& lead = in_.nodes[first.target];
  KernelBuilder kb;
  kb.kernel.name = kernel_name_prefix(routine.name) + "_" + std::to_string(group.statements.front());
  // Every kernel of a program with sizes takes them all: one dispatch convention per program.
  kb.kernel.size_count = static_cast<int>(in_.sizes.size());
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
    kb.kernel.body = lfor(row_var_->var, leading_extent_value(lead, parallel_dims_), !options_.trace_values, std::move(row));
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
    copy.size_count = kb.kernel.size_count;
    copy.body = lfor(0, element_count_value(lead), true,
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
  const NodeUses uses = options_.shared_buffers ? node_uses(plans_, inline_def_) : NodeUses{};
  for (size_t r = 0; r < plans_.size(); ++r) {
    LoweredRoutine lowered;
    KILN_RETURN_IF_ERROR(lower_routine(r, &lowered));
    if (options_.shared_buffers) lowered.shared = plan_shared_buffer(in_, out_.program, plans_, uses, r, lowered);
    out_.routines.push_back(std::move(lowered));
  }
  return std::move(out_);
}

}  // namespace lowering

Result<LoweredProgram> lower_program(const Program& program, const LowerOptions& options) {
  Program with_calls;
  if (options.auto_calls) {
    // with_library_calls reads nodes by index: only a valid program is rewritten (the Lowerer
    // validates what it is given, the rewritten program included).
    KILN_RETURN_IF_ERROR(validate_program(program));
    with_calls = with_library_calls(program, options.library_calls);
  }
  KILN_ASSIGN_OR_RETURN(LoweredProgram lowered, lowering::Lowerer(options.auto_calls ? with_calls : program, options).run());
  optimize_lowered(lowered, options);
  return lowered;
}

void optimize_lowered(LoweredProgram& lowered, const LowerOptions& options) {
  if (!options.optimize || options.trace_values) return;
  for (LoweredRoutine& routine : lowered.routines) {
    for (Kernel& kernel : routine.kernels) {
      optimize_kernel(kernel, OptimizeOptions{.reassociate = options.reassociate});
    }
  }
}

int merge_node_of(const LoweredProgram& lowered, int node) {
  const Program& p = lowered.program;
  if (node < 0 || node >= static_cast<int>(p.nodes.size())) return -1;
  const TensorNode* merge = p.find_node(p.nodes[node].name + ".merge");
  return merge ? merge->id : -1;
}

}  // namespace kiln::ir
