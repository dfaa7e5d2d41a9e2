// Statement completion, indices (kiln/ir/statement.h): index names are numbered in order of
// appearance, and each gets its extent from a dimension it stands alone in, or a `where` bound.
#include <algorithm>
#include <functional>
#include <map>
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
                           size_t dim, SourceLoc loc, bool target) {
  auto number = index_number_.find(name);
  if (number == index_number_.end()) {
    error(loc, "internal error: index '" + name + "' has no number");
    return;
  }
  indices_[number->second].alone.push_back(Standing{
      size, "dimension " + std::to_string(dim) + " of '" + node.name + "' (size " + size_expr_text(size, sizes_) + ")",
      loc, target});
}

// An index's range is the size of the dimensions it stands alone in, which must agree, except
// between a number and a size: a target index ranges over the target's dimension, another index
// over the dimensions that are sizes, and its reads through the others are range-checked.
void Completer::resolve_extents() {
  for (IndexInfo& info : indices_) {
    if (info.alone.empty()) continue;
    const Standing* range = &info.alone.front();  // the target's, which comes first, if any
    if (!range->target) {
      for (const Standing& s : info.alone) {
        if (!s.size.is_constant()) {
          range = &s;
          break;
        }
      }
    }
    for (const Standing& s : info.alone) {
      if (&s == range || s.size == range->size || s.size.is_constant() != range->size.is_constant()) continue;
      error(s.loc, "index '" + info.name + "' stands alone in " + s.from + " here, but in " + range->from +
                       " elsewhere; the sizes must agree");
    }
    info.extent = range->size;
    info.extent_from = range->from;
    info.from_target = range->target;
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
    // Integers, integer consts, (language version 2) sizes and other indices of the statement.
    bool bad = false;
    std::map<std::string, int> named_indices;  // index name → number, for a triangular bound
    auto name = [&](const RawExpr& n) {
      NamedAffine a;
      a.loc = n.loc;
      if (size_number(n.name) >= 0) {
        a.terms.push_back({n.name, 1, n.loc});
        return a;
      }
      const TensorNode* node = find(n.name);
      auto index = index_number_.find(n.name);
      std::optional<int64_t> v;
      if (node && node->role == Role::kConst) {
        v = const_value(node, n.loc);
      } else if (!node && n.name == b.index) {
        error(n.loc, "the bound of '" + b.index + "' names '" + b.index + "' itself");
      } else if (!node && index != index_number_.end()) {
        named_indices[n.name] = index->second;
        a.terms.push_back({n.name, 1, n.loc});
        return a;
      } else {
        error(n.loc, "the bound of '" + b.index + "' must be an integer, an integer const, a size or another index of "
                     "the statement; '" + n.name + "' is none");
      }
      a.ok = v.has_value();
      a.offset = v.value_or(0);
      bad = bad || !a.ok;
      return a;
    };
    NamedAffine named = affine_form(*b.limit, name, [&](SourceLoc loc, std::string m) { error(loc, std::move(m)); },
                                    "bound", "a bound is an affine expression of integers, integer consts, sizes "
                                    "and other indices");
    if (!named.ok || bad) continue;
    if (!named_indices.empty()) {
      // A triangular bound (language version 2): a limit on a reduced index.
      NamedAffine sizes_only = named;
      IndexLimit limit;
      std::erase_if(sizes_only.terms, [&](const NamedTerm& t) { return named_indices.count(t.name) > 0; });
      for (const NamedTerm& t : named.terms) {
        if (t.coeff != 0 && named_indices.count(t.name)) limit.indices.push_back({named_indices[t.name], t.coeff});
      }
      std::sort(limit.indices.begin(), limit.indices.end());
      limit.rest = size_expr_of(sizes_only, sizes_);
      if (std::any_of(target_names_.begin(), target_names_.end(), [&](const auto& t) { return t.first == b.index; })) {
        error(b.loc, "'" + b.index + "' is a target index; a bound that names other indices (a triangle, like `where u < "
                     "t + 1`) limits an index the statement reduces over");
        continue;
      }
      if (!limit.indices.empty()) {
        info.limit = std::move(limit);
        continue;
      }
      named = sizes_only;  // the indices' terms cancelled: an ordinary bound
    }
    const SizeExpr limit = size_expr_of(named, sizes_);
    if (limit.is_constant() && limit.offset <= 0) {
      error(b.limit->loc, "the bound of '" + b.index + "' must be positive: '" + b.index +
                              "' runs over [0, N)");
      continue;
    }
    if (info.extent && *info.extent != limit) {
      // A size may give the range of an index that stands alone only in numbered dimensions of
      // the right side: those reads are range-checked.
      const bool sized_range = !limit.is_constant() && info.extent->is_constant() && !info.from_target;
      if (!sized_range) {
        error(b.loc, "where " + b.index + " < " + size_expr_text(limit, sizes_) + " disagrees with " +
                         info.extent_from + ", where '" + b.index +
                         "' stands alone; remove the bound or make them agree");
        continue;
      }
    }
    info.extent = limit;
    info.extent_from = "where " + b.index + " < " + size_expr_text(limit, sizes_);
  }
}

void Completer::limit_extents() {
  // Loops nest: no index may be limited, through others, by itself.
  std::vector<int> state(indices_.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<bool(size_t)> acyclic = [&](size_t i) {
    if (state[i] != 0) return state[i] == 2;
    state[i] = 1;
    if (indices_[i].limit) {
      for (const auto& [j, coeff] : indices_[i].limit->indices) {
        if (!acyclic(static_cast<size_t>(j))) return false;
      }
    }
    state[i] = 2;
    return true;
  };
  for (size_t i = 0; i < indices_.size(); ++i) {
    if (indices_[i].limit && !acyclic(i)) {
      error(indices_[i].bound_loc, "the bound of '" + indices_[i].name + "' depends on '" + indices_[i].name +
                                       "' itself through the bounds of the indices it names; one of them needs "
                                       "a range of its own");
      return;
    }
  }
  // Limited indices standing alone nowhere, in an order where the indices a limit names come first.
  for (bool progress = true; progress;) {
    progress = false;
    for (IndexInfo& info : indices_) {
      if (!info.limit || info.extent) continue;
      // The most the limit reaches: each named index with a positive coefficient at its last value.
      SizeExpr most = info.limit->rest;
      bool known = true, overflow = false;
      for (const auto& [j, coeff] : info.limit->indices) {
        const std::optional<SizeExpr>& extent = indices_[static_cast<size_t>(j)].extent;
        if (!extent) {
          known = false;
          break;
        }
        if (coeff < 0) continue;
        // coeff * (extent - 1)
        overflow = overflow || __builtin_sub_overflow(most.offset, coeff, &most.offset);
        int64_t scaled = 0;
        overflow = overflow || __builtin_mul_overflow(coeff, extent->offset, &scaled) ||
                   __builtin_add_overflow(most.offset, scaled, &most.offset);
        for (const auto& [size, c] : extent->terms) {
          overflow = overflow || __builtin_mul_overflow(coeff, c, &scaled);
          const int number = size;  // Clang 14 cannot capture a structured binding
          auto term = std::find_if(most.terms.begin(), most.terms.end(), [&](const auto& t) { return t.first == number; });
          if (term == most.terms.end()) {
            most.terms.push_back({size, scaled});
          } else {
            overflow = overflow || __builtin_add_overflow(term->second, scaled, &term->second);
          }
        }
      }
      if (!known) continue;
      progress = true;
      std::erase_if(most.terms, [](const auto& t) { return t.second == 0; });
      std::sort(most.terms.begin(), most.terms.end());
      if (overflow) {
        error(info.bound_loc, "the bound of '" + info.name + "' overflows");
        info.extent = SizeExpr::constant(1);
        continue;
      }
      if (most.is_constant() && most.offset <= 0) {
        error(info.bound_loc, "the bound of '" + info.name + "' is below 1 at every point, so '" + info.name +
                                  "' would run over no value");
        info.extent = SizeExpr::constant(1);
        continue;
      }
      info.extent = most;
      info.extent_from = "its bound";
    }
  }
}

void Completer::add_limited(std::set<int>* indices) const {
  std::vector<int> todo(indices->begin(), indices->end());
  while (!todo.empty()) {
    const int i = todo.back();
    todo.pop_back();
    const std::optional<IndexLimit>& limit = indices_[static_cast<size_t>(i)].limit;
    if (!limit) continue;
    for (const auto& [j, coeff] : limit->indices) {
      if (indices->insert(j).second) todo.push_back(j);
    }
  }
}

}  // namespace kiln::ir::internal
