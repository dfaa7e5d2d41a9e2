// Work-group reductions, for dialects whose workgroups have work-items and shared memory
// (OpenCL): the lanes of a split reduction (loop/passes/reductions.cc) are shared by the
// work-items of a workgroup instead of being private to one.
//
// Such a kernel is printed twice, chosen at run time: when a workgroup has at least as many rows
// as work-items, each work-item takes rows of its own, as before, and they are all busy. When
// it has fewer (few rows, many work-items), the workgroup walks its rows together instead, each
// work-item computing every private value (so they agree across work-items) except in the loops
// that fill a lane array: there, work-item i takes lanes i, i + n, ... of an array in shared
// memory (element j always belongs to work-item j mod n, so these loops need no barrier between
// them), and a statement that reads the lanes of others (the pairwise join) is fenced by
// barriers before and after. Stores to device memory are made by work-item 0 alone, so the
// kernel may not read back a node it stores (other work-items would not see the value in time).
// Each lane gets the same operations in the same order as on one work-item, so results are
// bit-identical to the interpreter's.
#include <algorithm>
#include <functional>
#include <map>

#include "codegen/kernel_emitter.h"

namespace kiln::codegen::internal {

namespace {

// The most bytes of shared lane arrays one kernel may use; the smallest local memory OpenCL
// guarantees is 32 KiB.
constexpr int64_t kMaxGroupBytes = 16 * 1024;

bool is_var(const LExprRef& e, int var) { return e && e->kind == LExpr::Kind::kVar && e->var == var; }

void each_local_load(const LExprRef& e, const std::function<void(const LExpr&)>& fn) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kLocalLoad) fn(*e);
  each_local_load(e->offset, fn);
  for (const LExprRef& arg : e->args) each_local_load(arg, fn);
}

void each_statement(const std::vector<LStmtRef>& list, const std::function<void(const LStmt&)>& fn) {
  for (const LStmtRef& s : list) {
    fn(*s);
    each_statement(s->body, fn);
  }
}

}  // namespace

int lane_loop_target(const LStmt& s) {
  if (s.kind != LStmt::Kind::kFor || s.body.empty()) return -1;
  const int target = s.body.front()->local;
  for (const LStmtRef& b : s.body) {
    if (b->kind != LStmt::Kind::kLocalStore || b->local != target || !is_var(b->offset, s.var)) {
      return -1;
    }
  }
  return target;
}

void KernelEmitter::plan_work_groups() {
  group_locals_.clear();
  lane_loops_.clear();
  if (d_.group_barrier().empty() || d_.work_item_index().empty()) return;
  if (!trace_counters_.empty()) return;  // a traced kernel keeps one work-item's order
  const std::vector<LStmtRef>& rows = kernel_.body->body;
  std::map<int, int> declarations, stores, lane_stores;
  std::map<int, int64_t> bytes;
  std::vector<const LStmt*> loops;
  each_statement(rows, [&](const LStmt& s) {
    if (s.kind == LStmt::Kind::kLocalDecl) {
      ++declarations[s.local];
      bytes[s.local] = s.local_size * type_size(s.type);
    }
    if (s.kind == LStmt::Kind::kLocalStore) ++stores[s.local];
    if (int target = lane_loop_target(s); target >= 0) {
      loops.push_back(&s);
      lane_stores[target] += static_cast<int>(s.body.size());
    }
  });
  // Shared: declared once, and written only by lane loops.
  for (const auto& [local, count] : lane_stores) {
    if (declarations[local] == 1 && stores[local] == count) group_locals_.insert(local);
  }
  // A lane loop may read shared lanes only at its own lane; where one reads another's, its
  // target stays private (and so on, until nothing changes).
  for (bool changed = true; changed;) {
    changed = false;
    for (const LStmt* loop : loops) {
      const int target = lane_loop_target(*loop);
      if (!group_locals_.count(target)) continue;
      bool own_lanes = true;
      for (const LStmtRef& store : loop->body) {
        each_local_load(store->value, [&](const LExpr& load) {
          if (group_locals_.count(load.local) && !is_var(load.offset, loop->var)) own_lanes = false;
        });
      }
      if (!own_lanes) {
        group_locals_.erase(target);
        changed = true;
      }
    }
  }
  int64_t total = 0;
  for (int local : group_locals_) total += bytes[local];
  if (total > kMaxGroupBytes) group_locals_.clear();
  const ir::NodeAccess access = ir::node_access(kernel_);
  for (int node : access.written) {
    if (std::binary_search(access.read.begin(), access.read.end(), node)) group_locals_.clear();
  }
  for (const LStmt* loop : loops) {
    if (group_locals_.count(lane_loop_target(*loop))) lane_loops_.insert(loop);
  }
}

bool KernelEmitter::reads_group_lanes(const LStmt& stmt) const {
  if (!in_group_mode_ || in_lane_loop_) return false;
  bool reads = false;
  auto check = [&](const LExpr& load) { reads = reads || group_locals_.count(load.local) > 0; };
  each_local_load(stmt.cond, check);
  each_local_load(stmt.offset, check);
  each_local_load(stmt.value, check);
  return reads;
}

Status KernelEmitter::parallel_rows(Printer& out) {
  if (group_locals_.empty()) return for_loop(*kernel_.body, out, /*split=*/true);
  // Shared arrays are declared at kernel scope; each declaration inside zeroes its lanes.
  each_statement(kernel_.body->body, [&](const LStmt& s) {
    if (s.kind == LStmt::Kind::kLocalDecl && group_locals_.count(s.local)) {
      out.line(d_.group_array(tname(s.type), "w" + std::to_string(s.local), s.local_size));
    }
  });
  if (options_.comments) {
    out.line("/* fewer rows than work items: they share each row, and its reduction lanes in w* */");
  }
  const std::string i64(tname(DType::kI64));
  const std::string groups = "(" + i64 + ")" + d_.workgroup_count();
  KILN_ASSIGN_OR_RETURN(const std::string rows, extent_text(*kernel_.body));
  out.line("if ((" + rows + " + " + groups + " - 1) / " + groups + " < (" + i64 + ")" +
           d_.work_item_count() + ") {");
  out.indent();
  in_group_mode_ = true;
  Status status = for_loop(*kernel_.body, out, /*split=*/true);
  in_group_mode_ = false;
  KILN_RETURN_IF_ERROR(status);
  out.dedent();
  out.line("} else {");
  out.indent();
  KILN_RETURN_IF_ERROR(for_loop(*kernel_.body, out, /*split=*/true));
  out.dedent();
  out.line("}");
  return Status();
}

}  // namespace kiln::codegen::internal
