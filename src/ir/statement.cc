// Statement completion (kiln/ir/statement.h): names → indices and nodes, subscripts → affine
// forms, index extents, rule checks. Subscripts are in statement_subscripts.cc, indices and
// their extents in statement_indices.cc, typing of the right side in statement_typing.cc.
#include "kiln/ir/statement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ir/statement_internal.h"
#include "kiln/ir/loop_extents.h"

namespace kiln::ir {

namespace internal {

namespace {

// Depth of `e` greater than `limit`? Recursion is bounded by `limit`.
bool deeper_than(const RawExpr* e, int limit) {
  if (!e) return false;
  if (limit <= 0) return true;
  for (const RawExprRef& a : e->args) {
    if (deeper_than(a.get(), limit - 1)) return true;
  }
  return false;
}

}  // namespace

std::string dims_text(size_t n) {
  return std::to_string(n) + (n == 1 ? " dimension" : " dimensions");
}

void Completer::error(SourceLoc loc, std::string message) {
  diagnostics_->push_back(Diagnostic{loc, std::move(message)});
  failed_ = true;
}

const TensorNode* Completer::find(const std::string& name) const {
  if (lookup_) return lookup_->find(name);
  for (const TensorNode& n : nodes_) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

int Completer::position(const TensorNode* node) const {
  return static_cast<int>(node - nodes_.data());
}

bool Completer::visible(const TensorNode* node) const {
  return static_cast<size_t>(node - nodes_.data()) < visible_;
}

void Completer::report_later(const TensorNode* node, SourceLoc loc) {
  std::string where = node->loc.line > 0 ? " on line " + std::to_string(node->loc.line) : "";
  error(loc, "'" + node->name + "' is used before its declaration" + where +
                 "; declare it before the statements that use it");
}

void Completer::collect_refs(const RawExpr& e) {
  if (e.kind == RawExpr::Kind::kTensor || e.kind == RawExpr::Kind::kMerge) {
    Ref ref;
    ref.raw = &e;
    for (const RawExprRef& s : e.args) ref.subs.push_back(subscript(s.get(), e.loc));
    for (const NamedAffine& a : ref.subs) {
      for (const auto& [term, negative] : a.gathers) collect_refs(*term);  // the reads a gather makes
    }
    const TensorNode* node = find(e.name);
    if (!node) {
      error(e.loc, "unknown tensor '" + e.name + "'; declare it before the statements that use it");
      unresolved_ = true;
    } else if (!visible(node)) {
      report_later(node, e.loc);
      unresolved_ = true;
    } else if (e.kind == RawExpr::Kind::kMerge && node->role == Role::kConst) {
      error(e.loc, "const '" + node->name +
                       "' has no merge buffer; merge reads are of tensors copied from another "
                       "stream or device");
    } else if (ref.subs.size() != node->dims.size()) {
      error(e.loc, subscript_count_message(*node, ref.subs.size()));
      unresolved_ = true;
    } else {
      ref.node = node;
    }
    refs_[&e] = std::move(ref);
    ref_order_.push_back(&e);
    return;
  }
  for (const RawExprRef& a : e.args) {
    if (a) collect_refs(*a);
  }
}

std::string Completer::subscript_count_message(const TensorNode& node, size_t given) {
  if (node.dims.empty()) {
    return "'" + node.name + "' is a scalar; write it without subscripts";
  }
  return "'" + node.name + "' has " + dims_text(node.dims.size()) + " but " +
         std::to_string(given) + (given == 1 ? " subscript is" : " subscripts are") +
         " given; write exactly one subscript per dimension";
}

void Completer::check_target() {
  const RawStatement& s = s_;
  const TensorNode* node = find(s.target);
  if (!node) {
    error(s.loc, "unknown tensor '" + s.target +
                     "'; declare it before assigning to it, e.g. `output " + s.target + " : f32[N]`");
    unresolved_ = true;
  } else if (!visible(node)) {
    report_later(node, s.loc);
    unresolved_ = true;
  } else {
    if (node->role == Role::kInput) {
      error(s.loc, "cannot assign to input '" + node->name +
                       "': inputs are read-only inside routines (declare it as a param to update it)");
    } else if (node->role == Role::kConst) {
      error(s.loc, "cannot assign to const '" + node->name + "': consts are fixed values");
    }
    if (s.target_subscripts.size() != node->dims.size()) {
      error(s.loc, subscript_count_message(*node, s.target_subscripts.size()));
      unresolved_ = true;
    } else {
      target_ = node;
    }
  }
  std::set<std::string> seen;
  for (size_t d = 0; d < s.target_subscripts.size(); ++d) {
    const RawExpr* e = s.target_subscripts[d].get();
    SourceLoc loc = e ? e->loc : s.loc;
    if (!e || e->kind != RawExpr::Kind::kName) {
      error(loc, "target subscripts must be bare index names, one per dimension (like y[i, j]); "
                 "move offsets and constants to the right side");
      target_ = nullptr;
      unresolved_ = true;
      continue;
    }
    const TensorNode* named = find(e->name);
    if (named || size_number(e->name) >= 0) {
      error(loc, "target subscripts must be index names, but '" + e->name + "' is a " +
                     (!named ? "size" : named->role == Role::kConst ? "const" : "tensor"));
      target_ = nullptr;
      unresolved_ = true;
      continue;
    }
    if (!seen.insert(e->name).second) {
      error(loc, "index '" + e->name + "' appears twice in the target; target indices must be distinct");
      target_ = nullptr;
      unresolved_ = true;
      continue;
    }
    target_names_.push_back({e->name, loc});
  }
}

std::optional<CompletedStatement> Completer::run() {
  if (!s_.rhs) {
    error(s_.loc, "the statement has no right side");
    return std::nullopt;
  }
  if (deeper_than(s_.rhs.get(), kMaxExprDepth) ||
      std::any_of(s_.target_subscripts.begin(), s_.target_subscripts.end(),
                  [](const RawExprRef& e) { return deeper_than(e.get(), kMaxExprDepth); })) {
    error(s_.loc, "expression nested deeper than " + std::to_string(kMaxExprDepth) +
                      " levels; split the statement");
    return std::nullopt;
  }
  check_target();
  collect_refs(*s_.rhs);

  // Indices: target names, and every name with a non-zero coefficient in a right-side subscript.
  for (const auto& [name, loc] : target_names_) index_names_.insert(name);
  for (const auto& [raw, ref] : refs_) {
    for (const NamedAffine& a : ref.subs) {
      for (const NamedTerm& t : a.terms) index_names_.insert(t.name);
    }
  }
  // A name with a `where` bound is an index too (it may appear only as a value).
  for (const RawBound& b : s_.where) {
    const TensorNode* node = find(b.index);
    if (node) {
      error(b.loc, "'" + b.index + "' is a " + (node->role == Role::kConst ? "const" : "tensor") +
                       ", so it cannot be an index");
    } else if (size_number(b.index) >= 0) {
      error(b.loc, "'" + b.index + "' is a size, so it cannot be an index");
    } else {
      index_names_.insert(b.index);
    }
  }
  for (const auto& [name, loc] : target_names_) add_index(name, loc);
  number_indices(*s_.rhs);

  // Extents: where an index stands alone, then `where` bounds.
  if (target_) {
    for (size_t d = 0; d < target_names_.size(); ++d) {
      set_extent(target_names_[d].first, target_->dimension(d), *target_, d, target_names_[d].second, true);
    }
  }
  for (const RawExpr* raw : ref_order_) {
    const Ref& ref = refs_[raw];
    if (!ref.node) continue;
    for (size_t d = 0; d < ref.subs.size(); ++d) {
      const NamedAffine& a = ref.subs[d];
      if (a.ok && a.terms.size() == 1 && a.terms[0].coeff == 1 && a.offset == 0 && a.gathers.empty()) {
        set_extent(a.terms[0].name, ref.node->dimension(d), *ref.node, d, a.loc, false);
      }
    }
  }
  resolve_extents();
  apply_bounds();
  limit_extents();
  if (!unresolved_) {
    for (const IndexInfo& info : indices_) {
      if (!info.extent && !info.bounded) {
        error(info.first, "the range of index '" + info.name +
                              "' is unknown: it never stands alone as a whole subscript; add a "
                              "bound like `where " + info.name + " < N`");
      }
    }
  }

  // Which indices each reduction keeps (reduced indices appear only inside it), from the
  // outside in; then the right side's own indices must all be on the left, unless it is a
  // reduction as a whole (version 1), which reduces over the rest.
  const RawExpr* rhs = s_.rhs.get();
  Reduce reduce = Reduce::kNone;
  if (rhs->kind == RawExpr::Kind::kReduce) {
    reduce = rhs->reduce;
    rhs = rhs->args.empty() ? nullptr : rhs->args[0].get();
    if (!rhs) {
      error(s_.rhs->loc, "the reduction has no argument");
      return std::nullopt;
    }
  }
  std::set<int> target_numbers;
  for (size_t i = 0; i < target_names_.size(); ++i) target_numbers.insert(static_cast<int>(i));
  std::set<int> own = reduction_scope(*rhs, target_numbers);
  add_limited(&own);  // a triangular bound's indices reduce with the index it limits
  std::vector<int> reduced;
  for (int i : own) {
    if (!target_numbers.count(i)) reduced.push_back(i);
  }
  if (reduce == Reduce::kNone && !unresolved_) {
    for (int i : reduced) {
      error(indices_[static_cast<size_t>(i)].first,
            "index '" + indices_[static_cast<size_t>(i)].name +
                "' is not on the left side; reduce over it with sum(...) (or prod, max, min, mean, argmax, "
                "argmin), or add it to the target");
    }
  } else if (!unresolved_) {
    check_reduced(reduce, reduced, s_.rhs->loc, false);
  }

  ExprRef typed = type_rhs(*rhs, target_ ? target_->dtype : DType::kF32);
  if (!failed_ && (!typed || !target_ ||
                   std::any_of(indices_.begin(), indices_.end(),
                               [](const IndexInfo& info) { return !info.extent; }))) {
    error(s_.loc, "internal error: the statement could not be completed");
  }
  if (failed_) return std::nullopt;
  typed = share_reduced_arguments(typed);
  CompletedStatement out;
  if (!add_temporaries(&out.assignments)) return std::nullopt;
  std::vector<int> target_indices(target_numbers.begin(), target_numbers.end());
  std::optional<Assignment> statement = assignment(position(target_), target_indices, s_.accum, reduce, typed, s_.loc);
  if (!statement) return std::nullopt;
  out.assignments.push_back(std::move(*statement));
  out.temporaries = std::move(temporaries_);
  return out;
}

bool Completer::check_trip_count(const Assignment& out, const std::vector<int>& old_numbers) {
  const std::vector<int64_t> extents = loop_extents(out, nodes_);
  if (loop_trip_count(extents)) return true;
  // Blame the bound that runs furthest (a bound can be far beyond its subscripts' reach only
  // where no subscript constrains its index).
  const IndexInfo* widest = nullptr;
  int64_t widest_extent = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const IndexInfo& info = indices_[static_cast<size_t>(old_numbers[i])];
    if (info.bounded && (!widest || extents[i] > widest_extent)) {
      widest = &info;
      widest_extent = extents[i];
    }
  }
  std::string counts;
  for (size_t i = 0; i < extents.size(); ++i) counts += (i ? " x " : "") + std::to_string(extents[i]);
  error(widest ? widest->bound_loc : s_.loc,
        "the statement's loops would visit " + counts + " points, more than 2^63 - 1, which no device's "
        "loop counters can count" + (widest ? "; lower the bound of '" + widest->name + "'" : std::string()) +
        " (a reduced index bounded by `where` already stops where its subscripts leave their tensors)");
  return false;
}

}  // namespace internal

std::string at_source(SourceLoc loc, const std::string& message) {
  if (loc.line <= 0) return message;
  return std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " + message;
}

std::optional<Diagnostic> located_diagnostic(std::string_view message) {
  auto number = [&](int* out) {
    size_t n = 0;
    int value = 0;
    while (n < message.size() && n < 9 && message[n] >= '0' && message[n] <= '9') value = value * 10 + (message[n++] - '0');
    if (n == 0 || n == message.size() || message[n] != ':') return false;
    *out = value;
    message.remove_prefix(n + 1);
    return true;
  };
  Diagnostic d;
  if (!number(&d.loc.line) || !number(&d.loc.column) || d.loc.line <= 0 || message.substr(0, 1) != " ") return std::nullopt;
  d.message = std::string(message.substr(1));
  return d;
}

NodeLookup::NodeLookup(const std::vector<TensorNode>& nodes) : nodes_(&nodes) { add_appended(); }

void NodeLookup::add_appended() {
  for (; indexed_ < nodes_->size(); ++indexed_) positions_.emplace((*nodes_)[indexed_].name, indexed_);  // first wins
}

const TensorNode* NodeLookup::find(std::string_view name) const {
  auto it = positions_.find(name);
  return it == positions_.end() ? nullptr : &(*nodes_)[it->second];
}

std::optional<CompletedStatement> complete_statement(const RawStatement& statement,
                                             const std::vector<TensorNode>& nodes,
                                             size_t visible_nodes,
                                             std::vector<Diagnostic>* diagnostics,
                                             const NodeLookup* lookup,
                                             const std::vector<SizeDecl>* sizes) {
  std::vector<Diagnostic> local;
  if (!diagnostics) diagnostics = &local;
  static const std::vector<SizeDecl> kNoSizes;
  return internal::Completer(statement, nodes, std::min(visible_nodes, nodes.size()), diagnostics,
                             lookup, sizes ? *sizes : kNoSizes)
      .run();
}

}  // namespace kiln::ir
