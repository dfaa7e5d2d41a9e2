// Statement completion, indices (kiln/ir/statement.h): index names are numbered in order of
// appearance, and each gets its extent from a dimension it stands alone in, or a `where` bound.
#include <string>

#include "ir/statement_internal.h"

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
    }
    return;
  }
  if (e.kind == RawExpr::Kind::kName && index_names_.count(e.name)) add_index(e.name, e.loc);
  for (const RawExprRef& a : e.args) {
    if (a) number_indices(*a);
  }
}

void Completer::set_extent(const std::string& name, int64_t size, const TensorNode& node,
                           size_t dim, SourceLoc loc) {
  auto number = index_number_.find(name);
  if (number == index_number_.end()) {
    error(loc, "internal error: index '" + name + "' has no number");
    return;
  }
  IndexInfo& info = indices_[number->second];
  std::string here = "dimension " + std::to_string(dim) + " of '" + node.name + "' (size " +
                     std::to_string(size) + ")";
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
    NamedAffine limit = affine(*b.limit);
    if (!limit.ok) continue;
    if (!limit.terms.empty()) {
      error(b.limit->loc, "the bound of '" + b.index + "' must be an integer or an integer const");
      continue;
    }
    if (limit.offset <= 0) {
      error(b.limit->loc, "the bound of '" + b.index + "' must be positive: '" + b.index +
                              "' runs over [0, N)");
      continue;
    }
    if (info.extent && *info.extent != limit.offset) {
      error(b.loc, "where " + b.index + " < " + std::to_string(limit.offset) +
                       " disagrees with " + info.extent_from + ", where '" + b.index +
                       "' stands alone; remove the bound or make them agree");
      continue;
    }
    info.extent = limit.offset;
  }
}

}  // namespace kiln::ir::internal
