// Statement completion, reductions inside expressions (language version 2, docs/language.md):
// `o[n, k] = sum(h[n, j] * w[j, k]) + b[k]` means computing the sum into a temporary first. Each
// inner reduction reduces over the indices of its argument that appear neither in the target nor
// in the expression around it (its scope: the right side outside other reductions, or the
// argument of the reduction it is nested in, with that one's scope around it). Completion makes
// each one a hidden `tensor` node and an assignment before the statement, so that everything
// after the front end (fusion, local arrays, code generation) sees the statements it already
// compiles.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ir/statement_internal.h"

namespace kiln::ir::internal {

namespace {

bool same_affine(const Affine& a, const Affine& b) {
  return a.offset == b.offset && a.terms == b.terms && a.gather == b.gather;
}

// Expression `e` with its index numbers (subscript terms, index values) mapped through `number`.
ExprRef renumbered(const ExprRef& e, const std::map<int, int>& number) {
  auto out = std::make_shared<Expr>(*e);
  if (out->kind == Expr::Kind::kIndex) out->index = number.at(out->index);
  for (Affine& a : out->subscripts) {
    for (auto& term : a.terms) term.first = number.at(term.first);
  }
  for (ExprRef& arg : out->args) arg = renumbered(arg, number);
  return out;
}

void used_indices(const Expr& e, std::set<int>* out) {
  if (e.kind == Expr::Kind::kIndex) out->insert(e.index);
  for (const Affine& a : e.subscripts) {
    for (const auto& term : a.terms) out->insert(term.first);
  }
  for (const ExprRef& arg : e.args) used_indices(*arg, out);
}

// Whether `e` calls a function that costs more than a load: a transcendental one.
bool calls_transcendental(const Expr& e) {
  if (e.kind == Expr::Kind::kOp) {
    switch (e.op) {
      case Op::kExp: case Op::kLog: case Op::kSqrt: case Op::kRsqrt: case Op::kTanh: case Op::kSigmoid:
      case Op::kSin: case Op::kCos: case Op::kErf: case Op::kPow:
        return true;
      default:
        break;
    }
  }
  return std::any_of(e.args.begin(), e.args.end(), [](const ExprRef& a) { return a && calls_transcendental(*a); });
}

// `e` with every subexpression equal to `from` replaced by `to`; `replaced` counts them.
ExprRef replaced_expr(const ExprRef& e, const Expr& from, const ExprRef& to, int* replaced) {
  if (same_expr(*e, from)) {
    ++*replaced;
    return to;
  }
  auto out = std::make_shared<Expr>(*e);
  for (ExprRef& arg : out->args) arg = replaced_expr(arg, from, to, replaced);
  return out;
}

}  // namespace

bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.type != b.type || a.literal != b.literal || a.node != b.node || a.index != b.index ||
      a.op != b.op || a.subscripts.size() != b.subscripts.size() || a.args.size() != b.args.size()) {
    return false;
  }
  for (size_t i = 0; i < a.subscripts.size(); ++i) {
    if (!same_affine(a.subscripts[i], b.subscripts[i])) return false;
  }
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (!same_expr(*a.args[i], *b.args[i])) return false;
  }
  return true;
}

void Completer::direct_indices(const RawExpr& e, std::set<int>* out) {
  if (e.kind == RawExpr::Kind::kReduce) return;
  if (e.kind == RawExpr::Kind::kTensor || e.kind == RawExpr::Kind::kMerge) {
    auto ref = refs_.find(&e);
    if (ref == refs_.end()) return;
    for (const NamedAffine& a : ref->second.subs) {
      for (const NamedTerm& t : a.terms) {
        auto number = index_number_.find(t.name);
        if (number != index_number_.end()) out->insert(number->second);
      }
      for (const auto& [term, negative] : a.gathers) direct_indices(*term, out);
    }
    return;
  }
  if (e.kind == RawExpr::Kind::kName && index_names_.count(e.name)) {
    auto number = index_number_.find(e.name);
    if (number != index_number_.end()) out->insert(number->second);
  }
  for (const RawExprRef& a : e.args) {
    if (a) direct_indices(*a, out);
  }
}

void Completer::scope_reductions(const RawExpr& e, std::vector<const RawExpr*>* out) {
  if (e.kind == RawExpr::Kind::kReduce) {
    out->push_back(&e);
    return;
  }
  if (e.kind == RawExpr::Kind::kTensor || e.kind == RawExpr::Kind::kMerge) {
    // Only gathered terms hold values (`z[n, argmax(z[n, k])]`); an affine subscript refuses one.
    auto ref = refs_.find(&e);
    if (ref == refs_.end()) return;
    for (const NamedAffine& a : ref->second.subs) {
      for (const auto& [term, negative] : a.gathers) scope_reductions(*term, out);
    }
    return;
  }
  for (const RawExprRef& a : e.args) {
    if (a) scope_reductions(*a, out);
  }
}

std::set<int> Completer::reduction_scope(const RawExpr& arg, const std::set<int>& around) {
  std::set<int> all;
  direct_indices(arg, &all);
  std::set<int> inner_around = around;
  inner_around.insert(all.begin(), all.end());
  std::vector<const RawExpr*> nested;
  scope_reductions(arg, &nested);
  for (const RawExpr* r : nested) {
    const std::set<int> kept = split_reduction(*r, inner_around);
    all.insert(kept.begin(), kept.end());
  }
  return all;
}

std::set<int> Completer::split_reduction(const RawExpr& r, const std::set<int>& around) {
  InnerReduction& inner = inner_[&r];
  if (r.args.empty() || !r.args[0]) {
    error(r.loc, "the reduction has no argument");
    return {};
  }
  std::set<int> scope = reduction_scope(*r.args[0], around);
  // A reduced index's triangular bound ties the indices it names to the reduction: it keeps
  // those around it and reduces over the others too.
  for (bool grew = true; grew;) {
    grew = false;
    for (int i : std::set<int>(scope)) {
      const std::optional<IndexLimit>& limit = indices_[static_cast<size_t>(i)].limit;
      if (around.count(i) || !limit) continue;
      for (const auto& [j, coeff] : limit->indices) grew = scope.insert(j).second || grew;
    }
  }
  for (int i : scope) (around.count(i) ? inner.kept : inner.reduced).push_back(i);
  if (!unresolved_) check_reduced(r.reduce, inner.reduced, r.loc, true);
  return {inner.kept.begin(), inner.kept.end()};
}

void Completer::check_reduced(Reduce reduce, const std::vector<int>& reduced, SourceLoc loc, bool inner) {
  // A whole right side may reduce over nothing (version 1: `y[i] = mean(y[i])`); an inner
  // reduction that does is a mistake, like `sum(a[i, k]) * b[k]`.
  const std::string why = inner ? "also appears in the target or in the expression around it" : "is on the left side";
  const std::string name(reduce_name(reduce));
  const bool position = reduce == Reduce::kArgmax || reduce == Reduce::kArgmin;
  if (reduce == Reduce::kMean) {
    // mean divides by the number of points in range: a product of counts, one per index.
    for (int i : reduced) {
      const IndexInfo& info = indices_[static_cast<size_t>(i)];
      if (!info.limit) continue;
      for (const auto& [j, coeff] : info.limit->indices) {
        if (std::find(reduced.begin(), reduced.end(), j) == reduced.end()) continue;
        error(info.bound_loc, "mean(...) over '" + info.name + "', whose bound names '" + indices_[static_cast<size_t>(j)].name +
                                  "', which it also reduces over, is not supported: divide a sum by the count yourself");
        return;
      }
    }
  }
  if (reduced.empty() && (inner || position)) {
    error(loc, name + "(...) reduces over no index: every index of its argument " + why +
                   "; reduce over an index that appears only inside it");
  } else if (position && reduced.size() > 1) {
    std::string names;
    for (int i : reduced) names += (names.empty() ? "'" : ", '") + indices_[static_cast<size_t>(i)].name + "'";
    error(loc, name + "(...) gives a position along one index, but it reduces over " +
                   std::to_string(reduced.size()) + " (" + names + ")");
  }
}

std::string Completer::temporary_name(std::string_view kind) const {
  const std::string base = (target_ ? target_->name : s_.target) + "__" + std::string(kind);
  for (int n = 1;; ++n) {
    std::string name = base + std::to_string(n);
    const bool taken = find(name) || std::any_of(temporaries_.begin(), temporaries_.end(),
                                                 [&](const TensorNode& t) { return t.name == name; });
    if (!taken) return name;
  }
}

TensorNode Completer::temporary_node(std::string_view kind, DType type, const std::vector<int>& indices,
                                     SourceLoc loc) const {
  TensorNode node;
  node.id = static_cast<int>(nodes_.size() + temporaries_.size());
  node.name = temporary_name(kind);
  node.temporary = true;
  node.role = Role::kTensor;
  node.dtype = type;
  node.loc = loc;
  bool sized = false;
  for (int i : indices) {
    const SizeExpr& extent = *indices_[static_cast<size_t>(i)].extent;
    node.dims.push_back(extent.is_constant() ? extent.offset : 1);
    node.sized_dims.push_back(extent);
    sized = sized || !extent.is_constant();
  }
  if (!sized) node.sized_dims.clear();
  return node;
}

Completer::Typed Completer::type_inner_reduction(const RawExpr& e) {
  auto found = inner_.find(&e);
  if (found == inner_.end() || e.args.empty() || !e.args[0]) return {};
  const InnerReduction& r = found->second;
  Typed arg = type_expr(*e.args[0]);
  if (!arg.expr || failed_) return {};
  // An argument made only of literals (select(k < 3, 1, 0)) is typed as the target, as in
  // `y[i] = sum(select(k < 3, 1, 0))`.
  if (arg.weak) settle(arg.expr, target_ ? target_->dtype : DType::kF32);
  const DType type = e.reduce == Reduce::kArgmax || e.reduce == Reduce::kArgmin ? DType::kI32
                                                                                 : accumulation_type(e.reduce, arg.expr->type);
  auto read = std::make_shared<Expr>();
  read->kind = Expr::Kind::kTensor;
  read->type = type;
  read->loc = e.loc;
  for (int i : r.kept) read->subscripts.push_back(Affine::index(i));

  // The same reduction of the same argument (softmax's max, written twice) is computed once.
  for (const Temporary& t : temporary_reductions_) {
    if (t.reduce == e.reduce && t.kept == r.kept && t.reduced == r.reduced && same_expr(*t.arg, *arg.expr)) {
      read->node = t.node;
      return {read, false};
    }
  }
  const TensorNode node = temporary_node(reduce_name(e.reduce), type, r.kept, e.loc);
  temporaries_.push_back(node);
  temporary_reductions_.push_back(Temporary{node.id, e.reduce, r.kept, r.reduced, arg.expr, e.loc});
  read->node = node.id;
  return {read, false};
}

std::optional<Assignment> Completer::assignment(int target, const std::vector<int>& target_indices, Accum accum,
                                                Reduce reduce, const ExprRef& rhs, SourceLoc loc) {
  std::set<int> used;
  used_indices(*rhs, &used);
  // The indices that the reduced ones' triangular bounds name (a target index keeps no bound).
  for (bool grew = true; grew;) {
    grew = false;
    for (int i : std::set<int>(used)) {
      const std::optional<IndexLimit>& limit = indices_[static_cast<size_t>(i)].limit;
      if (!limit || std::find(target_indices.begin(), target_indices.end(), i) != target_indices.end()) continue;
      for (const auto& [j, coeff] : limit->indices) grew = used.insert(j).second || grew;
    }
  }
  // Target indices first, then the others in the order the statement numbered them.
  std::vector<int> old_numbers = target_indices;
  for (int i : used) {
    if (std::find(target_indices.begin(), target_indices.end(), i) == target_indices.end()) old_numbers.push_back(i);
  }
  std::map<int, int> number;
  Assignment out;
  out.target = target;
  out.accum = accum;
  out.reduce = reduce;
  out.loc = loc;
  for (size_t n = 0; n < old_numbers.size(); ++n) {
    number[old_numbers[n]] = static_cast<int>(n);
    if (n < target_indices.size()) out.target_indices.push_back(static_cast<int>(n));
    const IndexInfo& info = indices_[static_cast<size_t>(old_numbers[n])];
    IndexVar v{info.name, info.extent->is_constant() ? info.extent->offset : 1, std::nullopt, std::nullopt};
    if (!info.extent->is_constant()) v.sized_extent = *info.extent;
    out.indices.push_back(std::move(v));
  }
  for (size_t n = target_indices.size(); n < old_numbers.size(); ++n) {
    const std::optional<IndexLimit>& limit = indices_[static_cast<size_t>(old_numbers[n])].limit;
    if (!limit) continue;
    IndexLimit renumbered_limit{{}, limit->rest};
    for (const auto& [j, coeff] : limit->indices) renumbered_limit.indices.push_back({number.at(j), coeff});
    std::sort(renumbered_limit.indices.begin(), renumbered_limit.indices.end());
    out.indices[n].limit = std::move(renumbered_limit);
  }
  out.rhs = renumbered(rhs, number);
  if (!check_trip_count(out, old_numbers)) return std::nullopt;
  return out;
}

// Softmax written as one statement, `exp(x[i, j] - max(x[i, m])) / sum(exp(x[i, k] - max(x[i,
// m])))`, computes each exponential twice: for the sum and for the quotient. Where the argument A
// of a reduction over one index r appears outside every reduction with a target index j of the
// same extent in r's place, A becomes a temporary of its own, `TARGET__arg1[kept..., r] = A`,
// that the reduction reads at r and the right side at j: each value is computed once (in a local
// array of the row where the kernel is fused), rounded to its type where it is stored. Only
// for an argument that calls a transcendental function (a read alone is cheaper than a copy) and
// whose type is f32 or f64 (one of f16 or bf16 would be rounded where it is stored).
ExprRef Completer::share_reduced_arguments(const ExprRef& rhs) {
  ExprRef out = rhs;
  for (size_t t = 0; t < temporary_reductions_.size(); ++t) {
    Temporary& reduction = temporary_reductions_[t];
    const ExprRef arg = reduction.arg;
    if (reduction.reduced.size() != 1 || reduction.reduce == Reduce::kArgmax ||
        reduction.reduce == Reduce::kArgmin || (arg->type != DType::kF32 && arg->type != DType::kF64) ||
        !calls_transcendental(*arg)) {
      continue;
    }
    const int r = reduction.reduced[0];
    std::set<int> used;
    used_indices(*arg, &used);
    for (size_t j = 0; j < target_names_.size(); ++j) {
      const int index = static_cast<int>(j);
      if (used.count(index) || indices_[j].extent != indices_[static_cast<size_t>(r)].extent) continue;
      std::map<int, int> rename;
      for (int i : used) rename[i] = i == r ? index : i;
      const ExprRef at_j = renumbered(arg, rename);
      std::vector<int> dims = reduction.kept;
      dims.push_back(r);
      const TensorNode node = temporary_node("arg", arg->type, dims, reduction.loc);
      auto read_at = [&](int last) {
        auto read = std::make_shared<Expr>();
        read->kind = Expr::Kind::kTensor;
        read->type = node.dtype;
        read->node = node.id;
        read->loc = reduction.loc;
        for (int i : reduction.kept) read->subscripts.push_back(Affine::index(i));
        read->subscripts.push_back(Affine::index(last));
        return read;
      };
      int found = 0;
      ExprRef shared = replaced_expr(out, *at_j, read_at(index), &found);
      if (found == 0) continue;
      out = shared;
      temporaries_.push_back(node);
      reduction.arg = read_at(r);
      temporary_reductions_.insert(temporary_reductions_.begin() + static_cast<ptrdiff_t>(t),
                                   Temporary{node.id, Reduce::kNone, dims, {}, arg, reduction.loc});
      ++t;  // past the reduction, which now follows its argument
      break;
    }
  }
  return out;
}

bool Completer::add_temporaries(std::vector<Assignment>* out) {
  for (const Temporary& t : temporary_reductions_) {
    std::optional<Assignment> a = assignment(t.node, t.kept, Accum::kAssign, t.reduce, t.arg, t.loc);
    if (!a) return false;
    out->push_back(std::move(*a));
  }
  return true;
}

}  // namespace kiln::ir::internal
