// Lowering of assignments to loop nests: one kernel per statement (plus a snapshot copy where a
// statement reads its own target elsewhere than the point it writes), with single-use
// elementwise intermediates inlined into their reader.
#include "kiln/ir/lower.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

namespace kiln::ir {

namespace {

LExprRef i64(int64_t v) { return lconst(DType::kI64, static_cast<double>(v)); }

bool is_const(const LExprRef& e, double v) {
  return e->kind == LExpr::Kind::kConst && e->value == v;
}

// i64 arithmetic with the trivial cases folded, so that offsets read like hand-written ones.
LExprRef add(LExprRef a, LExprRef b) {
  if (is_const(a, 0)) return b;
  if (is_const(b, 0)) return a;
  if (a->kind == LExpr::Kind::kConst && b->kind == LExpr::Kind::kConst) {
    return i64(static_cast<int64_t>(a->value) + static_cast<int64_t>(b->value));
  }
  return lop(Op::kAdd, DType::kI64, {std::move(a), std::move(b)});
}

LExprRef mul(LExprRef a, LExprRef b) {
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  if (is_const(a, 0) || is_const(b, 0)) return i64(0);
  if (a->kind == LExpr::Kind::kConst && b->kind == LExpr::Kind::kConst) {
    return i64(static_cast<int64_t>(a->value) * static_cast<int64_t>(b->value));
  }
  return lop(Op::kMul, DType::kI64, {std::move(a), std::move(b)});
}

// 0/1 (i64) conjunction of range conditions.
LExprRef conjunction(const std::vector<LExprRef>& conditions) {
  LExprRef all;
  for (const LExprRef& c : conditions) all = all ? lop(Op::kMul, DType::kI64, {all, c}) : c;
  return all;
}

Op cast_op(DType type) {
  switch (type) {
    case DType::kF32: return Op::kCastF32;
    case DType::kF64: return Op::kCastF64;
    default: return Op::kCastI32;
  }
}

double convert_constant(double v, DType type) {
  switch (type) {
    case DType::kF32: return static_cast<double>(static_cast<float>(v));
    case DType::kI32:
      if (std::isnan(v)) return 0;
      if (v >= 2147483647.0) return 2147483647.0;
      if (v <= -2147483648.0) return -2147483648.0;
      return std::trunc(v);
    default: return v;
  }
}

LExprRef cast_to(LExprRef e, DType type) {
  if (e->type == type) return e;
  if (e->kind == LExpr::Kind::kConst) return lconst(type, convert_constant(e->value, type));
  return lop(cast_op(type), type, {std::move(e)});
}

std::vector<int64_t> strides_of(const TensorNode& node) {
  std::vector<int64_t> strides(node.dims.size(), 1);
  for (size_t d = node.dims.size(); d-- > 1;) strides[d - 1] = strides[d] * node.dims[d];
  return strides;
}

struct KernelBuilder {
  Kernel kernel;
  void use(int node) {
    for (int n : kernel.nodes) {
      if (n == node) return;
    }
    kernel.nodes.push_back(node);
  }
};

class Lowerer {
 public:
  Lowerer(const Program& program, const LowerOptions& options)
      : in_(program), out_{program, {}}, options_(options) {}

  Result<LoweredProgram> run();

 private:
  // How one statement's expression is being lowered.
  struct Scope {
    const Assignment* stmt;
    std::vector<LExprRef> index_value;  // statement index number → i64 value
    // Reduction context: range conditions of top-level references skip the point. Otherwise
    // (and always inside inlined definitions) an out-of-range read is 0.
    std::vector<LExprRef>* skip_conditions = nullptr;
  };

  Status decide_memory();
  bool inlinable(int node, const Routine& routine, size_t def, size_t* reader) const;
  Status lower_routine(const Routine& routine, LoweredRoutine* lowered);
  Result<std::vector<Kernel>> lower_statement(const Routine& routine, size_t index);
  LStmtRef accumulate_in_place(const Assignment& s, const TensorNode& target,
                               const std::vector<int>& reduced, const std::vector<int>& loop_vars,
                               const LExprRef& term, const std::vector<LExprRef>& conditions,
                               const LExprRef& target_offset, const LStmtRef& note);
  Result<LExprRef> lower_expr(const Expr& e, Scope& scope);
  Result<LExprRef> lower_read(const Expr& e, Scope& scope);
  int hidden_node(const std::string& name, const TensorNode& like, Role role, MemoryMode mode);

  const Program& in_;
  LoweredProgram out_;
  LowerOptions options_;
  std::map<int, const Assignment*> inline_def_;  // virtual node → its defining statement
  std::map<const Assignment*, bool> skipped_;     // definitions that were inlined away
  // Per statement being lowered.
  KernelBuilder* kb_ = nullptr;
  int target_ = -1;
  std::vector<int> target_vars_;
  bool needs_snapshot_ = false;
  int snapshot_node_ = -1;
};

int Lowerer::hidden_node(const std::string& name, const TensorNode& like, Role role,
                         MemoryMode mode) {
  for (const TensorNode& n : out_.program.nodes) {
    if (n.name == name) return n.id;
  }
  TensorNode node = like;
  node.id = static_cast<int>(out_.program.nodes.size());
  node.name = name;
  node.role = role;
  node.init = Init{};
  node.memory = mode;
  out_.program.nodes.push_back(node);
  return node.id;
}

// Visits every tensor read (kTensor and kMerge) of an expression.
template <typename Fn>
void for_each_read(const Expr& e, Fn&& fn) {
  if (e.kind == Expr::Kind::kTensor || e.kind == Expr::Kind::kMerge) fn(e);
  for (const ExprRef& a : e.args) for_each_read(*a, fn);
}

bool reads_node(const Assignment& s, int node) {
  bool found = false;
  for_each_read(*s.rhs, [&](const Expr& r) { found = found || r.node == node; });
  return found;
}

bool Lowerer::inlinable(int node, const Routine& routine, size_t def, size_t* reader) const {
  const Assignment& d = routine.statements[def];
  if (d.accum != Accum::kAssign || d.reduce != Reduce::kNone || reads_node(d, node)) return false;
  // Written once in the whole program, read by exactly one later statement of this routine,
  // never as a merge buffer, and nothing the definition reads changes in between.
  int readers = 0;
  for (const Routine& r : in_.routines) {
    for (size_t i = 0; i < r.statements.size(); ++i) {
      const Assignment& s = r.statements[i];
      if (&s != &d && s.target == node) return false;
      bool merge = false;
      for_each_read(*s.rhs, [&](const Expr& e) {
        merge = merge || (e.node == node && e.kind == Expr::Kind::kMerge);
      });
      if (merge) return false;
      if (reads_node(s, node)) {
        if (&r != &routine || i <= def) return false;
        ++readers;
        *reader = i;
      }
    }
  }
  if (readers != 1) return false;
  for (size_t i = def + 1; i < *reader; ++i) {
    if (reads_node(d, routine.statements[i].target)) return false;
  }
  return true;
}

Status Lowerer::decide_memory() {
  for (TensorNode& n : out_.program.nodes) {
    switch (n.role) {
      case Role::kInput:
      case Role::kOutput:
      case Role::kParam:
        n.memory = MemoryMode::kHosted;
        break;
      case Role::kConst:
        n.memory = n.init.kind == Init::Kind::kValue ? MemoryMode::kVirtual : MemoryMode::kHosted;
        break;
      case Role::kTensor:
        if (n.memory == MemoryMode::kLocal) {
          return unimplemented_error("tensor '" + n.name +
                                     "': local memory mode is not implemented yet");
        }
        break;
    }
  }
  if (options_.inline_virtual) {
    for (const Routine& routine : in_.routines) {
      for (size_t i = 0; i < routine.statements.size(); ++i) {
        const Assignment& s = routine.statements[i];
        TensorNode& n = out_.program.nodes[s.target];
        if (n.role != Role::kTensor || inline_def_.count(s.target)) continue;
        if (n.memory != MemoryMode::kUnset && n.memory != MemoryMode::kVirtual) continue;
        size_t reader = 0;
        if (inlinable(s.target, routine, i, &reader)) {
          inline_def_[s.target] = &s;
          skipped_[&s] = true;
          n.memory = MemoryMode::kVirtual;
        }
      }
    }
  }
  for (TensorNode& n : out_.program.nodes) {
    if (n.memory == MemoryMode::kVirtual && n.role == Role::kTensor && !inline_def_.count(n.id)) {
      return invalid_argument_error("tensor '" + n.name +
                                    "' cannot be virtual: it is not computed once, elementwise, "
                                    "and read by exactly one later statement");
    }
    if (n.memory == MemoryMode::kUnset) n.memory = MemoryMode::kOnDevice;
  }
  return Status();
}

Result<LExprRef> Lowerer::lower_read(const Expr& e, Scope& scope) {
  int node = e.node;
  const TensorNode& decl = in_.nodes[node];
  // Folded constants.
  if (decl.role == Role::kConst && decl.init.kind == Init::Kind::kValue &&
      e.kind == Expr::Kind::kTensor) {
    return lconst(decl.dtype, convert_constant(decl.init.a, decl.dtype));
  }
  std::vector<LExprRef> subs;
  std::vector<LExprRef> conditions;
  for (size_t d = 0; d < e.subscripts.size(); ++d) {
    const Affine& a = e.subscripts[d];
    LExprRef v = i64(a.offset);
    for (const auto& [index, coeff] : a.terms) v = add(mul(i64(coeff), scope.index_value[index]), v);
    // A bare index of the statement spans exactly its dimension; anything else is checked.
    if (a.bare_index() < 0 || scope.index_value[a.bare_index()]->kind != LExpr::Kind::kVar) {
      conditions.push_back(lop(Op::kGe, DType::kI64, {v, i64(0)}));
      conditions.push_back(lop(Op::kLt, DType::kI64, {v, i64(decl.dims[d])}));
    }
    subs.push_back(std::move(v));
  }

  LExprRef value;
  if (e.kind == Expr::Kind::kTensor && inline_def_.count(node)) {
    // Evaluate the definition at this point, with its own reads as in an elementwise statement.
    const Assignment& def = *inline_def_.at(node);
    Scope inner{&def, std::vector<LExprRef>(def.indices.size()), nullptr};
    for (size_t d = 0; d < def.target_indices.size(); ++d) inner.index_value[def.target_indices[d]] = subs[d];
    for (const LExprRef& v : inner.index_value) {
      if (!v) return internal_error("inlined definition of '" + decl.name + "' has a free index");
    }
    KILN_ASSIGN_OR_RETURN(LExprRef defined, lower_expr(*def.rhs, inner));
    value = cast_to(defined, decl.dtype);
  } else {
    if (e.kind == Expr::Kind::kMerge) {
      node = hidden_node(decl.name + ".merge", decl, Role::kInput, MemoryMode::kHosted);
    } else if (node == target_) {
      bool same_point = subs.size() == target_vars_.size();
      for (size_t d = 0; same_point && d < subs.size(); ++d) {
        same_point = subs[d]->kind == LExpr::Kind::kVar && subs[d]->var == target_vars_[d];
      }
      if (!same_point) {
        needs_snapshot_ = true;
        snapshot_node_ = hidden_node(decl.name + ".prev", decl, Role::kTensor, MemoryMode::kOnDevice);
        node = snapshot_node_;
      }
    }
    std::vector<int64_t> strides = strides_of(decl);
    LExprRef offset = i64(0);
    for (size_t d = 0; d < subs.size(); ++d) offset = add(offset, mul(subs[d], i64(strides[d])));
    kb_->use(node);
    if (!conditions.empty() && !scope.skip_conditions) {
      // Out of range reads 0; the load itself stays in range whichever way select evaluates.
      offset = lop(Op::kSelect, DType::kI64, {conjunction(conditions), offset, i64(0)});
    }
    value = lload(node, decl.dtype, offset);
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
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return lconst(e.type, convert_constant(e.literal, e.type));
    case Expr::Kind::kIndex:
      return cast_to(scope.index_value[e.index], DType::kI32);
    case Expr::Kind::kTensor:
    case Expr::Kind::kMerge: {
      KILN_ASSIGN_OR_RETURN(LExprRef v, lower_read(e, scope));
      return cast_to(v, e.type);
    }
    case Expr::Kind::kOp: {
      std::vector<LExprRef> args;
      for (size_t i = 0; i < e.args.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(LExprRef a, lower_expr(*e.args[i], scope));
        bool is_cast = e.op == Op::kCastF32 || e.op == Op::kCastF64 || e.op == Op::kCastI32;
        bool is_condition = e.op == Op::kSelect && i == 0;
        bool is_comparison = e.op == Op::kLt || e.op == Op::kLe || e.op == Op::kGt ||
                             e.op == Op::kGe || e.op == Op::kEq || e.op == Op::kNe;
        if (!is_cast && !is_condition && !is_comparison) a = cast_to(a, e.type);
        args.push_back(std::move(a));
      }
      if (e.op == Op::kLt || e.op == Op::kLe || e.op == Op::kGt || e.op == Op::kGe ||
          e.op == Op::kEq || e.op == Op::kNe) {
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

double neutral(Reduce reduce, DType type) {
  bool integer = type == DType::kI32;
  switch (reduce) {
    case Reduce::kProd: return 1;
    case Reduce::kMax:
      return integer ? -2147483648.0 : -std::numeric_limits<double>::infinity();
    case Reduce::kMin:
      return integer ? 2147483647.0 : std::numeric_limits<double>::infinity();
    default: return 0;
  }
}

Op combine_op(Accum accum) {
  switch (accum) {
    case Accum::kAdd: return Op::kAdd;
    case Accum::kSub: return Op::kSub;
    default: return Op::kMul;
  }
}

bool loads_node(const LExprRef& e, int node) {
  if (e->kind == LExpr::Kind::kLoad && e->node == node) return true;
  if (e->offset && loads_node(e->offset, node)) return true;
  for (const LExprRef& a : e->args) {
    if (loads_node(a, node)) return true;
  }
  return false;
}

// A reduction into a target of rank >= 2 can fold each term straight into the target, with the
// reduced loops outside the inner target loops: `for i { for k { for j { c[i,j] += a[i,k] *
// b[k,j] } } }` walks b and c contiguously, which the C compiler vectorizes, where the
// accumulator form strides through b. It is the same sum in another order, so it is used only
// where the fold is the statement's own accumulation (= with any reduction, += / -= with sum,
// *= with prod), the term has the target's type, and the right side does not read the target.
LStmtRef Lowerer::accumulate_in_place(const Assignment& s, const TensorNode& target,
                                      const std::vector<int>& reduced,
                                      const std::vector<int>& loop_vars, const LExprRef& term,
                                      const std::vector<LExprRef>& conditions,
                                      const LExprRef& target_offset, const LStmtRef& note) {
  if (s.target_indices.size() < 2 || reduced.empty() || term->type != target.dtype ||
      loads_node(term, s.target) || needs_snapshot_) {
    return nullptr;
  }
  Op fold = Op::kAdd;
  switch (s.accum) {
    case Accum::kAssign:
      fold = s.reduce == Reduce::kProd  ? Op::kMul
             : s.reduce == Reduce::kMax ? Op::kMax
             : s.reduce == Reduce::kMin ? Op::kMin
                                        : Op::kAdd;
      break;
    case Accum::kAdd:
    case Accum::kSub:
      if (s.reduce != Reduce::kSum) return nullptr;
      fold = combine_op(s.accum);
      break;
    case Accum::kMul:
      if (s.reduce != Reduce::kProd) return nullptr;
      fold = Op::kMul;
      break;
  }
  const DType type = target.dtype;
  // Wraps `body` in the target loops after the outermost one (the parallel loop).
  auto inner_target_loops = [&](std::vector<LStmtRef> body) {
    for (size_t d = s.target_indices.size(); d-- > 1;) {
      body = {lfor(target_vars_[d], target.dims[d], false, std::move(body))};
    }
    return body;
  };
  std::vector<LStmtRef> per_row = {note};
  if (s.accum == Accum::kAssign) {
    auto init = inner_target_loops({lstore(s.target, target_offset, lconst(type, neutral(s.reduce, type)))});
    per_row.insert(per_row.end(), init.begin(), init.end());
  }
  LExprRef current = lload(s.target, type, target_offset);
  std::vector<LStmtRef> step = {lstore(s.target, target_offset, lop(fold, type, {current, term}))};
  if (!conditions.empty()) step = {lif(conjunction(conditions), std::move(step))};
  std::vector<LStmtRef> folds = inner_target_loops(std::move(step));
  for (size_t r = reduced.size(); r-- > 0;) {
    folds = {lfor(loop_vars[reduced[r]], s.indices[reduced[r]].extent, false, std::move(folds))};
  }
  per_row.insert(per_row.end(), folds.begin(), folds.end());
  if (s.reduce == Reduce::kMean) {
    int64_t count = 1;
    for (int r : reduced) count *= s.indices[r].extent;
    auto divide = inner_target_loops(
        {lstore(s.target, target_offset, lop(Op::kDiv, type, {current, lconst(type, double(count))}))});
    per_row.insert(per_row.end(), divide.begin(), divide.end());
  }
  return lfor(target_vars_[0], target.dims[0], true, std::move(per_row));
}

Result<std::vector<Kernel>> Lowerer::lower_statement(const Routine& routine, size_t index) {
  const Assignment& s = routine.statements[index];
  KernelBuilder kb;
  kb.kernel.name = routine.name + "_" + std::to_string(index);
  kb_ = &kb;
  target_ = s.target;
  needs_snapshot_ = false;
  const TensorNode& target = in_.nodes[s.target];

  Scope scope{&s, std::vector<LExprRef>(s.indices.size()), nullptr};
  target_vars_.clear();
  std::vector<int> loop_vars(s.indices.size(), -1);
  for (int i : s.target_indices) {
    loop_vars[i] = kb.kernel.var_count++;
    target_vars_.push_back(loop_vars[i]);
  }
  std::vector<int> reduced = s.reduced_indices();
  for (int i : reduced) loop_vars[i] = kb.kernel.var_count++;
  for (size_t i = 0; i < loop_vars.size(); ++i) scope.index_value[i] = lvar(loop_vars[i]);

  std::vector<int64_t> strides = strides_of(target);
  LExprRef target_offset = i64(0);
  for (size_t d = 0; d < s.target_indices.size(); ++d) {
    target_offset = add(target_offset, mul(lvar(target_vars_[d]), i64(strides[d])));
  }

  // What runs at one target point, introduced by where it came from.
  std::vector<LStmtRef> point = {lcomment(target.name + ": statement " + std::to_string(index + 1) +
                                         " of routine " + routine.name +
                                         (s.loc.line ? ", line " + std::to_string(s.loc.line) : ""))};
  LExprRef value;
  if (s.reduce == Reduce::kNone) {
    KILN_ASSIGN_OR_RETURN(value, lower_expr(*s.rhs, scope));
  } else {
    std::vector<LExprRef> conditions;
    scope.skip_conditions = &conditions;
    KILN_ASSIGN_OR_RETURN(LExprRef term, lower_expr(*s.rhs, scope));
    if (LStmtRef in_place = accumulate_in_place(s, target, reduced, loop_vars, term, conditions,
                                                target_offset, point.front())) {
      kb.use(s.target);
      kb.kernel.body = in_place;
      std::vector<Kernel> kernels;
      kernels.push_back(std::move(kb.kernel));
      kb_ = nullptr;
      return kernels;
    }
    const DType type = term->type;
    const int acc = kb.kernel.local_count++;
    LExprRef acc_value = llocal_load(acc, type, i64(0));
    Op fold = s.reduce == Reduce::kProd  ? Op::kMul
              : s.reduce == Reduce::kMax ? Op::kMax
              : s.reduce == Reduce::kMin ? Op::kMin
                                         : Op::kAdd;
    std::vector<LStmtRef> body = {llocal_store(acc, i64(0), lop(fold, type, {acc_value, term}))};
    if (!conditions.empty()) body = {lif(conjunction(conditions), std::move(body))};
    for (size_t r = reduced.size(); r-- > 0;) {
      body = {lfor(loop_vars[reduced[r]], s.indices[reduced[r]].extent, false, std::move(body))};
    }
    body.insert(body.begin(), llocal_store(acc, i64(0), lconst(type, neutral(s.reduce, type))));
    LStmtRef decl = llocal_decl(acc, type, 1, std::move(body));
    value = acc_value;
    if (s.reduce == Reduce::kMean) {
      int64_t count = 1;
      for (int r : reduced) count *= s.indices[r].extent;
      value = lop(Op::kDiv, type, {value, lconst(type, static_cast<double>(count))});
    }
    // The store below runs inside the accumulator's scope.
    point.push_back(decl);
  }
  kb.use(s.target);
  if (s.accum != Accum::kAssign) {
    LExprRef old = lload(s.target, target.dtype, target_offset);
    DType common = promote(old->type, value->type);
    value = lop(combine_op(s.accum), common, {cast_to(old, common), cast_to(value, common)});
  }
  LStmtRef write = lstore(s.target, target_offset, cast_to(value, target.dtype));
  if (point.back()->kind != LStmt::Kind::kLocalDecl) {
    point.push_back(write);
  } else {
    auto decl = std::make_shared<LStmt>(*point.back());
    decl->body.push_back(write);
    point.back() = decl;
  }
  std::vector<LStmtRef> body = std::move(point);
  for (size_t d = s.target_indices.size(); d-- > 0;) {
    body = {lfor(target_vars_[d], target.dims[d], d == 0, std::move(body))};
  }
  kb.kernel.body = body.size() == 1 && body[0]->kind == LStmt::Kind::kFor ? body[0] : lblock(body);

  std::vector<Kernel> kernels;
  if (needs_snapshot_) {
    // The statement reads its target elsewhere than the point it writes: copy it first.
    Kernel copy;
    copy.name = kb.kernel.name + "_snapshot";
    copy.nodes = {s.target, snapshot_node_};
    copy.var_count = 1;
    copy.body = lfor(0, target.element_count(), true,
                         {lstore(snapshot_node_, lvar(0), lload(s.target, target.dtype, lvar(0)))});
    kernels.push_back(std::move(copy));
  }
  kernels.push_back(std::move(kb.kernel));
  kb_ = nullptr;
  return kernels;
}

Status Lowerer::lower_routine(const Routine& routine, LoweredRoutine* lowered) {
  lowered->name = routine.name;
  for (size_t i = 0; i < routine.statements.size(); ++i) {
    if (skipped_.count(&routine.statements[i])) continue;  // inlined into its reader
    Result<std::vector<Kernel>> kernels = lower_statement(routine, i);
    if (!kernels.ok()) {
      return kernels.status().annotate("routine '" + routine.name + "', statement " +
                                       std::to_string(i + 1));
    }
    for (Kernel& k : *kernels) lowered->kernels.push_back(std::move(k));
  }
  return Status();
}

Result<LoweredProgram> Lowerer::run() {
  KILN_RETURN_IF_ERROR(validate_program(in_));
  KILN_RETURN_IF_ERROR(decide_memory());
  for (const Routine& routine : in_.routines) {
    LoweredRoutine lowered;
    KILN_RETURN_IF_ERROR(lower_routine(routine, &lowered));
    out_.routines.push_back(std::move(lowered));
  }
  return std::move(out_);
}

}  // namespace

Result<LoweredProgram> lower_program(const Program& program, const LowerOptions& options) {
  return Lowerer(program, options).run();
}

int merge_node_of(const LoweredProgram& lowered, int node) {
  const Program& p = lowered.program;
  if (node < 0 || node >= static_cast<int>(p.nodes.size())) return -1;
  const TensorNode* merge = p.find_node(p.nodes[node].name + ".merge");
  return merge ? merge->id : -1;
}

}  // namespace kiln::ir
