// One statement's part of a kernel: its loops over the target dimensions after the parallel
// ones and over the reduced dimensions, its expression with reads placed in buffers or local
// arrays (inlined definitions expanded), and its trace points (lowerer.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/loop_extents.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "loop/access.h"
#include "loop/lower_arith.h"
#include "loop/lowerer.h"
#include "loop/overwrite.h"

namespace kiln::ir::lowering {

namespace {

// The reduced indices of `s` in the order their loops nest, outermost first: the indices a
// triangular bound names come before the index it limits (validation excludes cycles).
std::vector<int> reduced_loop_order(const Assignment& s) {
  std::vector<int> pending = s.reduced_indices(), order;
  while (!pending.empty()) {
    auto ready = std::find_if(pending.begin(), pending.end(), [&](int r) {
      const std::optional<IndexLimit>& limit = s.indices[static_cast<size_t>(r)].limit;
      return !limit || std::none_of(limit->indices.begin(), limit->indices.end(), [&](const auto& term) {
        return std::find(pending.begin(), pending.end(), term.first) != pending.end();
      });
    });
    if (ready == pending.end()) ready = pending.begin();  // a cycle, which validation refuses
    order.push_back(*ready);
    pending.erase(ready);
  }
  return order;
}

// Whether a read in `e` has `index` alone as one of its subscripts: the index spans a dimension.
bool stands_alone(const Expr& e, int index) {
  if (e.kind == Expr::Kind::kTensor) {
    for (const Affine& a : e.subscripts) {
      if (a.bare_index() == index) return true;
    }
  }
  return std::any_of(e.args.begin(), e.args.end(), [&](const ExprRef& a) { return a && stands_alone(*a, index); });
}

}  // namespace

LExprRef Lowerer::limit_value(const Assignment& s, int i, const Scope& scope) const {
  const IndexLimit& limit = *s.indices[static_cast<size_t>(i)].limit;
  LExprRef v = i64(0);
  for (const auto& [j, coeff] : limit.indices) v = add(v, mul(i64(coeff), scope.index_value[static_cast<size_t>(j)]));
  return add(v, size_value(limit.rest));
}

// What `mean` divides by: the number of points of its reduced indices by their own extents (the
// points its loops skip count, contributing 0), in `type`: a constant (computed as a double,
// which no extents overflow), or where an extent is a size, the product of the extents as the
// kernel computes it. An index under a triangular bound counts the points below its limit.
LExprRef Lowerer::mean_count(const Assignment& s, DType type, const Scope& scope) const {
  double count = 1;
  LExprRef sized = i64(1);
  for (int r : s.reduced_indices()) {
    const IndexVar& index = s.indices[static_cast<size_t>(r)];
    if (index.limit) {
      const LExprRef below = lop(Op::kMin, DType::kI64, {extent_value(index), limit_value(s, r, scope)});
      sized = mul(sized, lop(Op::kMax, DType::kI64, {below, i64(0)}));
    } else if (index.sized_extent) {
      sized = mul(sized, extent_value(index));
    } else {
      count *= static_cast<double>(index.extent);
    }
  }
  if (is_const(sized, 1)) return lconst(type, count);
  return lop(Op::kMul, type, {cast_to(sized, type), lconst(type, count)});
}

LStmtRef Lowerer::gather_check(const Assignment& s, const Expr& read, const TensorNode& decl, size_t d,
                               const LExprRef& position, const LExprRef& in_range) {
  std::string where = in_.file.empty() ? std::string("program") : in_.file;
  if (s.loc.line > 0) where += ":" + std::to_string(s.loc.line);
  const std::string message =
      where + ": index out of range: dimension " + std::to_string(d) + " of '" + decl.name + "' has size " +
      size_expr_text(decl.dimension(d), in_.sizes) + ", but " + print_expr(in_, s, read) + " in routine '" +
      trace_site_.routine + "' (" + print_statement(in_, s) + ") reads index ";
  const int site = kb_->failure_site(message);
  return lif(lop(Op::kEq, DType::kI64, {in_range, i64(0)}), {lfail(site, message, position)});
}

// `subs` are the subscripts of an access to `node` (declared as `decl`); `row` says its first k
// subscripts are the parallel loop's indices, so that its row starts at row_var * row stride.
Result<Lowerer::Place> Lowerer::place(int node, const TensorNode& decl,
                                      const std::vector<LExprRef>& subs, bool row) {
  const std::vector<LExprRef> strides = strides_of(decl);
  const size_t first = row ? static_cast<size_t>(parallel_dims_) : 0;
  LExprRef in_row = i64(0);
  for (size_t d = first; d < subs.size(); ++d) in_row = add(in_row, mul(subs[d], strides[d]));
  auto local = local_of_.find(node);
  if (local != local_of_.end()) {
    if (!row || parallel_dims_ < 1) {
      return internal_error("local array '" + decl.name + "' is accessed outside its row");
    }
    return Place{-1, local->second, in_row};
  }
  kb_->use(node);
  if (row && parallel_dims_ > 0) {
    return Place{node, -1, add(mul(row_var_, strides[first - 1]), in_row)};
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
    if (a.gather >= 0) {
      // A gather: the value read, which any point may take (it is checked like a compound subscript).
      KILN_ASSIGN_OR_RETURN(LExprRef gathered, lower_expr(*e.args[static_cast<size_t>(a.gather)], scope));
      v = add(v, cast_to(gathered, DType::kI64));
    }
    // A bare index that spans exactly its dimension needs no check; anything else is checked (an
    // index whose range is a size reads a numbered dimension so, language version 2).
    if (bare < 0 || !scope.in_range[bare] || scope.stmt->indices[static_cast<size_t>(bare)].range() != decl.dimension(d)) {
      const LExprRef low = lop(Op::kGe, DType::kI64, {v, i64(0)});
      const LExprRef high = lop(Op::kLt, DType::kI64, {v, dim_value(decl, d)});
      conditions.push_back(low);
      conditions.push_back(high);
      if (a.gather >= 0 && scope.checks) {
        scope.checks->push_back(gather_check(*scope.stmt, e, decl, d, v, conjunction({low, high})));
      }
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
    Scope inner{&def, std::vector<LExprRef>(n), std::vector<int>(n, -1), std::vector<bool>(n, false), nullptr,
                scope.checks};
    for (size_t d = 0; d < def.target_indices.size(); ++d) {
      const int t = def.target_indices[d], bare = e.subscripts[d].bare_index();
      inner.index_value[t] = subs[d];
      inner.target_dim[t] = bare < 0 ? -1 : scope.target_dim[bare];
      inner.in_range[t] = bare >= 0 && scope.in_range[bare] &&
                          scope.stmt->indices[static_cast<size_t>(bare)].range() == decl.dimension(d);
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
    case Expr::Kind::kSize:  // the kernel reads it from the dispatch
      return cast_to(lsize(e.index), e.type);
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
      const bool is_comparison = ir::is_comparison(e.op);
      const bool is_cast = cast_target(e.op).has_value();
      std::vector<LExprRef> args;
      for (size_t i = 0; i < e.args.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(LExprRef a, lower_expr(*e.args[i], scope));
        // Neither select's condition nor a shift's amount takes the op's type.
        const bool own_type = (e.op == Op::kSelect && i == 0) || ((e.op == Op::kShl || e.op == Op::kShr) && i == 1);
        if (!is_cast && !own_type && !is_comparison) a = cast_to(a, e.type);
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
    body = {lfor(target_values_[d]->var, dim_value(target, d), false, std::move(body))};
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
                                                   const std::vector<LStmtRef>& checks,
                                                   const LStmtRef& note, const Scope& scope) {
  if (static_cast<int>(s.target_indices.size()) <= parallel_dims_ || reduced.empty() ||
      term->type != target.dtype || loads_node(term, s.target) || needs_snapshot_ ||
      (local_of_.count(s.target) && loads_local(term, local_of_[s.target]))) {
    return {};
  }
  // Inner target loops of one point each (ONNX's ReduceMean keeps its reduced axis as an extent
  // of 1) walk nothing contiguously, and reduced loops of one point each that span no dimension
  // (a slice written as a sum over `q < 1`, read at `i - q`) fold nothing: the accumulator form
  // keeps the value in a register and stores it once, where this one fills the target first and
  // then loads and stores it per term. (A product over a dimension of 1 keeps this form, which
  // register tiles take.)
  bool one_point = true;
  for (size_t d = static_cast<size_t>(parallel_dims_); one_point && d < s.target_indices.size(); ++d) {
    one_point = target.dimension(d) == SizeExpr::constant(1);
  }
  bool one_term = true;
  for (int r : reduced) {
    const LExprRef& extent = loop_extents_[static_cast<size_t>(r)];
    one_term = one_term && extent->kind == LExpr::Kind::kConst && extent->value == 1 && !stands_alone(*s.rhs, r);
  }
  if (one_point || one_term) return {};
  // The reduced loops run outside the inner target loops: a triangular bound may name only the
  // parallel loop's indices and reduced ones.
  for (int r : reduced) {
    const std::optional<IndexLimit>& limit = s.indices[static_cast<size_t>(r)].limit;
    if (!limit) continue;
    for (const auto& [j, coeff] : limit->indices) {
      if (scope.target_dim[static_cast<size_t>(j)] >= parallel_dims_) return {};
    }
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
  step.insert(step.begin(), checks.begin(), checks.end());
  std::vector<LStmtRef> folds = inner_target_loops(s, std::move(step));
  for (size_t r = reduced.size(); r-- > 0;) {
    folds = {lfor(loop_vars[reduced[r]], loop_extents_[reduced[r]], false, std::move(folds))};
  }
  per_row.insert(per_row.end(), folds.begin(), folds.end());
  if (s.reduce == Reduce::kMean) {
    auto divide = inner_target_loops(s, {store(*at, lop(Op::kDiv, type, {current, mean_count(s, type, scope)}))});
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
  for (size_t d = 0; d < s.target_indices.size(); ++d) {
    const int i = s.target_indices[d];
    scope.target_dim[i] = static_cast<int>(d);
    if (static_cast<int>(d) < parallel_dims_) {
      // An empty dimension leaves no row to run: 1 keeps the arithmetic defined. (A size's
      // dimension needs no such care: i64 division by 0 is 0 in the loop IR.)
      auto dim = [&](size_t e) { return target.is_sized() ? dim_value(target, e) : i64(std::max<int64_t>(target.dims[e], 1)); };
      LExprRef below = i64(1);
      for (size_t e = d + 1; e < static_cast<size_t>(parallel_dims_); ++e) below = mul(below, dim(e));
      LExprRef v = div(row_var_, below);
      target_values_[d] = d == 0 ? v : mod(v, dim(d));
    } else {
      loop_vars[i] = kernel.var_count++;
      target_values_[d] = lvar(loop_vars[i]);
    }
    scope.index_value[i] = target_values_[d];
  }
  const std::vector<int> reduced = reduced_loop_order(s);
  loop_extents_.clear();
  if (in_.has_sizes()) {
    // Extents that are sizes: each loop runs its index's whole extent.
    for (const IndexVar& index : s.indices) loop_extents_.push_back(extent_value(index));
  } else {
    for (int64_t extent : loop_extents(s, in_.nodes)) loop_extents_.push_back(i64(extent));
  }
  for (int i : reduced) {
    loop_vars[i] = kernel.var_count++;
    scope.index_value[i] = lvar(loop_vars[i]);
  }
  // A triangular bound: the loop stops at its limit too (a triangular loop, kiln/loop/loop.h).
  for (int i : reduced) {
    if (!s.indices[static_cast<size_t>(i)].limit) continue;
    loop_extents_[static_cast<size_t>(i)] =
        lop(Op::kMin, DType::kI64, {loop_extents_[static_cast<size_t>(i)], limit_value(s, i, scope)});
  }
  std::vector<LStmtRef> checks;  // LowerOptions::check_bounds: the gathers' checks at one point
  if (options_.check_bounds) scope.checks = &checks;

  // What runs at one target point, introduced by where it came from.
  LStmtRef note = lcomment(target.name + ": statement " + std::to_string(index + 1) + " of routine " +
                           routine.name + (s.loc.line ? ", line " + std::to_string(s.loc.line) : ""));
  std::vector<LStmtRef> point = {note};
  LExprRef value;
  if (s.reduce == Reduce::kNone) {
    KILN_ASSIGN_OR_RETURN(value, lower_expr(*s.rhs, scope));
    point.insert(point.end(), checks.begin(), checks.end());
  } else if (s.reduce == Reduce::kArgmax || s.reduce == Reduce::kArgmin) {
    std::vector<LExprRef> conditions;
    scope.skip_conditions = &conditions;
    KILN_ASSIGN_OR_RETURN(LExprRef term, lower_expr(*s.rhs, scope));
    value = arg_reduction(s, term, conditions, checks, loop_vars[reduced[0]], &point);
  } else {
    std::vector<LExprRef> conditions;
    scope.skip_conditions = &conditions;
    KILN_ASSIGN_OR_RETURN(LExprRef term, lower_expr(*s.rhs, scope));
    // Sums and products of integers (or bool) into an integer target no wider than their
    // accumulation type give the same bits when they accumulate in the target's type, which
    // wraps alike: that keeps such a reduction in place (and register-tiled where it is a product).
    const DType accumulate = accumulation_type(s.reduce, term->type);
    const bool wraps_alike = (s.reduce == Reduce::kSum || s.reduce == Reduce::kProd) && is_integer_type(target.dtype) &&
                             !is_float_type(term->type) && dtype_bits(target.dtype) <= dtype_bits(accumulate);
    term = cast_to(term, wraps_alike ? target.dtype : accumulate);
    std::vector<LStmtRef> in_place =
        accumulate_in_place(s, target, reduced, loop_vars, term, conditions, checks, note, scope);
    if (!in_place.empty()) return in_place;
    const DType type = term->type;
    const int acc = kernel.local_count++;
    LExprRef acc_value = llocal_load(acc, type, i64(0));
    std::vector<LStmtRef> body = {llocal_store(acc, i64(0), lop(fold_op(s.reduce), type, {acc_value, term}))};
    if (LStmtRef trace = trace_point(scope, acc_value)) body.push_back(trace);
    if (!conditions.empty()) body = {lif(conjunction(conditions), std::move(body))};
    body.insert(body.begin(), checks.begin(), checks.end());
    for (size_t r = reduced.size(); r-- > 0;) {
      body = {lfor(loop_vars[reduced[r]], loop_extents_[reduced[r]], false, std::move(body))};
    }
    body.insert(body.begin(), llocal_store(acc, i64(0), lconst(type, neutral(s.reduce, type))));
    value = acc_value;
    if (s.reduce == Reduce::kMean) {
      value = lop(Op::kDiv, type, {value, mean_count(s, type, scope)});
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

// argmax / argmin: the loop over the one reduced index keeps the best value and its position; a
// point replaces them when no position is held yet, when its value is NaN and the best is not,
// or when it compares beyond the best (so the first of equal values stays). Appends the loop, in
// the scope of the position's local, to `point`, and returns the position (-1 for no point).
LExprRef Lowerer::arg_reduction(const Assignment& s, const LExprRef& term, const std::vector<LExprRef>& conditions,
                                const std::vector<LStmtRef>& checks, int var, std::vector<LStmtRef>* point) {
  Kernel& kernel = kb_->kernel;
  const DType type = term->type;
  const int at = kernel.local_count++, best = kernel.local_count++, v = kernel.local_count++;
  const LExprRef at_value = llocal_load(at, DType::kI64, i64(0));
  const LExprRef best_value = llocal_load(best, type, i64(0));
  const LExprRef v_value = llocal_load(v, type, i64(0));
  const Op beyond = s.reduce == Reduce::kArgmax ? Op::kGt : Op::kLt;
  auto is = [](Op op, LExprRef a, LExprRef b) { return lop(op, DType::kI64, {std::move(a), std::move(b)}); };
  const LExprRef better =
      lop(Op::kMax, DType::kI64,
          {lop(Op::kMax, DType::kI64, {is(Op::kLt, at_value, i64(0)), is(beyond, v_value, best_value)}),
           lop(Op::kMul, DType::kI64, {is(Op::kNe, v_value, v_value), is(Op::kEq, best_value, best_value)})});
  std::vector<LStmtRef> step = {llocal_store(v, i64(0), term),
                                lif(better, {llocal_store(best, i64(0), v_value), llocal_store(at, i64(0), lvar(var))})};
  if (!conditions.empty()) step = {lif(conjunction(conditions), std::move(step))};
  step.insert(step.begin(), checks.begin(), checks.end());
  const int reduced = s.reduced_indices()[0];
  LStmtRef loop = lfor(var, loop_extents_[reduced], false, std::move(step));
  point->push_back(llocal_decl(at, DType::kI64, 1,
                               {llocal_store(at, i64(0), i64(-1)),
                                llocal_decl(best, type, 1, {llocal_decl(v, type, 1, {loop})})}));
  return at_value;
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

}  // namespace kiln::ir::lowering
