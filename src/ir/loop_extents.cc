#include "kiln/ir/loop_extents.h"

#include <algorithm>
#include <limits>

namespace kiln::ir {

namespace {

using Wide = __int128;

// Calls `visit` with every subscript (and the read node's size in that dimension) of `e`.
template <typename Visit>
void each_subscript(const Expr& e, const std::vector<TensorNode>& nodes, const Visit& visit) {
  if ((e.kind == Expr::Kind::kTensor || e.kind == Expr::Kind::kMerge) && e.node >= 0 &&
      static_cast<size_t>(e.node) < nodes.size()) {
    const std::vector<int64_t>& dims = nodes[e.node].dims;
    for (size_t d = 0; d < e.subscripts.size() && d < dims.size(); ++d) {
      if (e.subscripts[d].gather < 0) visit(e.subscripts[d], dims[d]);  // a gather may reach any point
    }
  }
  for (const ExprRef& a : e.args) {
    if (a) each_subscript(*a, nodes, visit);
  }
}

// How many values of index `j` (from 0) can keep 0 <= a < size, given the other indices'
// extents: beyond that, every point has `a` out of range.
Wide reach(const Affine& a, int64_t size, int j, const std::vector<int64_t>& extents) {
  Wide low = a.offset, high = a.offset, coeff = 0;  // the rest of `a` ranges over [low, high]
  for (const auto& [index, c] : a.terms) {
    if (index == j) {
      coeff = c;
      continue;
    }
    const Wide span = Wide{c} * (extents[index] - 1);
    (c > 0 ? high : low) += span;
  }
  // coeff * v + rest in [0, size) for some rest in [low, high]: for coeff > 0,
  // v <= (size - 1 - low) / coeff; for coeff < 0, v <= high / -coeff.
  const Wide room = coeff > 0 ? Wide{size} - 1 - low : high;
  if (room < 0) return 1;  // no value reaches: one step that contributes nothing
  return room / (coeff > 0 ? coeff : -coeff) + 1;
}

}  // namespace

std::vector<int64_t> loop_extents(const Assignment& s, const std::vector<TensorNode>& nodes) {
  std::vector<int64_t> extents;
  for (const IndexVar& index : s.indices) extents.push_back(index.extent);
  if (s.reduce == Reduce::kNone || !s.rhs) return extents;
  // Clamping one index can narrow another's reach (`a - b`): a few rounds, each only narrowing.
  for (int round = 0; round < 4; ++round) {
    bool narrowed = false;
    for (int j : s.reduced_indices()) {
      each_subscript(*s.rhs, nodes, [&](const Affine& a, int64_t size) {
        if (a.bare_index() == j && size >= extents[j]) return;  // always in range
        const bool has_j = std::any_of(a.terms.begin(), a.terms.end(), [&](const auto& t) { return t.first == j; });
        if (!has_j) return;
        const Wide r = reach(a, size, j, extents);
        if (r < extents[j]) {
          extents[j] = static_cast<int64_t>(std::max<Wide>(r, 1));
          narrowed = true;
        }
      });
    }
    if (!narrowed) break;
  }
  return extents;
}

std::optional<int64_t> loop_trip_count(const std::vector<int64_t>& extents) {
  Wide count = 1;
  for (int64_t e : extents) {
    count *= std::max<int64_t>(e, 0);
    if (count > std::numeric_limits<int64_t>::max()) return std::nullopt;
  }
  return static_cast<int64_t>(count);
}

}  // namespace kiln::ir
