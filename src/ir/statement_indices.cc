// Statement completion, indices (kiln/ir/statement.h): index names are numbered in order of
// appearance, and each gets its extent from a dimension it stands alone in, or a `where` bound.
#include <string>

#include "ir/statement_internal.h"
#include "kiln/ir/sizes.h"

namespace kiln::ir::internal {

void Completer::add_index(const std::string& name, SourceLoc loc) {
  if (index_number_.count(name)) return;
  if (indices_.size() == kMaxStatementIndices) {
    error(loc, "a statement with more than " + std::to_string(kMaxStatementIndices) +
                   " indices is not supported");
    unresolved_ = true;
  }
  index_number_[name] = static_cast<int>(indices_.size());
  IndexInfo info;
  info.name = name;
  info.first = loc;
  indices_.push_back(info);
}

void Completer::number_indices(const RawExpr& e) {
  if (e.kind == RawExpr::Kind::kTensor || e.kind == RawExpr::Kind::kMerge) {
    for (const NamedAffine& a : refs_[&e].subs) {
      for (const NamedTerm& t : a.terms) add_index(t.name, t.loc);
      for (const auto& [term, negative] : a.gathers) number_indices(*term);
    }
    return;
  }
  if (e.kind == RawExpr::Kind::kName && index_names_.count(e.name)) add_index(e.name, e.loc);
  for (const RawExprRef& a : e.args) {
    if (a) number_indices(*a);
  }
}

int Completer::size_number(const std::string& name) const { return ir::size_number(sizes_, name); }

void Completer::set_extent(const std::string& name, const SizeExpr& size, const TensorNode& node,
                           size_t dim, SourceLoc loc) {
  auto number = index_number_.find(name);
  if (number == index_number_.end()) {
    error(loc, "internal error: index '" + name + "' has no number");
    return;
  }
  IndexInfo& info = indices_[number->second];
  std::string here = "dimension " + std::to_string(dim) + " of '" + node.name + "' (size " +
                     size_expr_text(size, sizes_) + ")";
  if (!info.extent) {
    info.extent = size;
    info.extent_from = here;
  } else if (*info.extent != size) {
    error(loc, "index '" + name + "' stands alone in " + here + " here, but in " +
                   info.extent_from + " elsewhere; the sizes must agree");
  }
}

void Completer::apply_bounds() {
  std::set<std::string> bounded;
  for (const RawBound& b : s_.where) {
    if (!index_names_.count(b.index)) continue;  // reported above
    auto number = index_number_.find(b.index);
    if (number == index_number_.end()) {
      error(b.loc, "where bound on '" + b.index + "', which is not used in this statement");
      continue;
    }
    if (!bounded.insert(b.index).second) {
      error(b.loc, "index '" + b.index + "' has two where bounds; keep one");
      continue;
    }
    IndexInfo& info = indices_[number->second];
    info.bounded = true;  // even if the bound is wrong: no "needs a bound" on top
    info.bound_loc = b.loc;
    if (!b.limit) {
      error(b.loc, "where bound on '" + b.index + "' has no limit");
      continue;
    }
    // Integers, integer consts and (language version 2) sizes.
    bool bad = false;
    auto name = [&](const RawExpr& n) {
      NamedAffine a;
      a.loc = n.loc;
      if (size_number(n.name) >= 0) {
        a.terms.push_back({n.name, 1, n.loc});
        return a;
      }
      const TensorNode* node = find(n.name);
      std::optional<int64_t> v;
      if (node && node->role == Role::kConst) v = const_value(node, n.loc);
      else error(n.loc, "the bound of '" + b.index + "' must be an integer, an integer const or a size; '" + n.name + "' is none");
      a.ok = v.has_value();
      a.offset = v.value_or(0);
      bad = bad || !a.ok;
      return a;
    };
    NamedAffine named = affine_form(*b.limit, name, [&](SourceLoc loc, std::string m) { error(loc, std::move(m)); },
                                    "bound", "a bound is an affine expression of integers, integer consts and sizes");
    if (!named.ok || bad) continue;
    const SizeExpr limit = size_expr_of(named, sizes_);
    if (limit.is_constant() && limit.offset <= 0) {
      error(b.limit->loc, "the bound of '" + b.index + "' must be positive: '" + b.index +
                              "' runs over [0, N)");
      continue;
    }
    if (info.extent && *info.extent != limit) {
      error(b.loc, "where " + b.index + " < " + size_expr_text(limit, sizes_) +
                       " disagrees with " + info.extent_from + ", where '" + b.index +
                       "' stands alone; remove the bound or make them agree");
      continue;
    }
    info.extent = limit;
  }
}

}  // namespace kiln::ir::internal
