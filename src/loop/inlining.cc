// The inlining decision (inlining.h).
#include "loop/inlining.h"
#include "loop/work_count.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "loop/access.h"

namespace kiln::ir::lowering {

namespace {

void collect_read_nodes(const Expr& e, std::vector<int>* out) {
  count_lowering_work(1);
  if (e.kind == Expr::Kind::kTensor || e.kind == Expr::Kind::kMerge) out->push_back(e.node);
  for (const ExprRef& a : e.args) collect_read_nodes(*a, out);
}

bool reads_merge_of(const Expr& e, int node) {
  if (e.kind == Expr::Kind::kMerge && e.node == node) return true;
  return std::any_of(e.args.begin(), e.args.end(), [&](const ExprRef& a) { return reads_merge_of(*a, node); });
}

bool same_subscript(const Affine& a, const Affine& b) {
  return a.gather < 0 && b.gather < 0 && a.offset == b.offset && a.terms == b.terms;
}

// The nodes `e` reads at two different points (x[i - 1] and x[i + 1]; a gather counts as
// different from everything), into `several`; `first` holds each node's first point seen.
void collect_several_points(const Expr& e, std::unordered_map<int, const std::vector<Affine>*>* first,
                            std::unordered_set<int>* several) {
  count_lowering_work(1);
  if (e.kind == Expr::Kind::kTensor) {
    auto [at, inserted] = first->emplace(e.node, &e.subscripts);
    const std::vector<Affine>& a = *at->second;
    if (!inserted && (a.size() != e.subscripts.size() ||
                      !std::equal(a.begin(), a.end(), e.subscripts.begin(), same_subscript))) {
      several->insert(e.node);
    }
  }
  for (const ExprRef& a : e.args) collect_several_points(*a, first, several);
}

}  // namespace

std::vector<int> InlineCandidates::read_nodes(const Assignment& s) {
  std::vector<int> nodes;
  collect_read_nodes(*s.rhs, &nodes);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

InlineCandidates::InlineCandidates(const Program& program) {
  for (const Routine& r : program.routines) {
    for (const Call& c : r.calls) calls_at_[&r].push_back(static_cast<size_t>(c.position));
    auto& writes = writes_at_[&r];
    for (size_t i = 0; i < r.statements.size(); ++i) {
      const Assignment& s = r.statements[i];
      ++uses_[s.target].writers;
      writes[s.target].push_back(i);
      std::unordered_map<int, const std::vector<Affine>*> first_points;
      std::unordered_set<int> several_points;
      collect_several_points(*s.rhs, &first_points, &several_points);
      for (int node : read_nodes(s)) {
        Uses& u = uses_[node];
        u.readers.push_back({&r, i});
        u.merge_read = u.merge_read || reads_merge_of(*s.rhs, node);
        u.several_points = u.several_points || several_points.count(node);
      }
    }
  }
}

bool InlineCandidates::inlinable(int node, const Routine& routine, size_t def, size_t* reader) const {
  const Assignment& d = routine.statements[def];
  if (d.accum != Accum::kAssign || d.reduce != Reduce::kNone) return false;
  const std::vector<int> reads = read_nodes(d);
  if (std::binary_search(reads.begin(), reads.end(), node)) return false;
  auto u = uses_.find(node);
  if (u == uses_.end() || u->second.writers != 1 || u->second.merge_read) return false;
  if (u->second.readers.size() != 1) return false;
  const auto [reading_routine, at] = u->second.readers.front();
  if (reading_routine != &routine || at <= def) return false;
  // A call at position p runs after statement p - 1: one with def < p <= at runs in between.
  if (auto calls = calls_at_.find(&routine); calls != calls_at_.end()) {
    auto next = std::upper_bound(calls->second.begin(), calls->second.end(), def);
    if (next != calls->second.end() && *next <= at) return false;
  }
  // Nothing the definition reads is written between it and its reader.
  auto routine_writes = writes_at_.find(&routine);
  if (routine_writes == writes_at_.end()) return false;
  for (int n : reads) {
    count_lowering_work(1);
    auto w = routine_writes->second.find(n);
    if (w == routine_writes->second.end()) continue;
    auto next = std::upper_bound(w->second.begin(), w->second.end(), def);
    if (next != w->second.end() && *next < at) return false;
  }
  *reader = at;
  return true;
}

bool InlineCandidates::read_at_several_points(int node) const {
  auto u = uses_.find(node);
  return u != uses_.end() && u->second.several_points;
}

int InlinedDepths::expr_depth(const Expr& e, const InlineDefs& inlined) const {
  count_lowering_work(1);
  if (e.kind == Expr::Kind::kTensor && inlined.count(e.node)) {
    auto it = depth_.find(e.node);
    return (it == depth_.end() ? 1 : it->second) + 2;
  }
  int deepest = 0;
  for (const ExprRef& a : e.args) deepest = std::max(deepest, expr_depth(*a, inlined));
  return 1 + deepest;
}

int InlinedDepths::of(const Assignment& s, const InlineDefs& inlined) const {
  return expr_depth(*s.rhs, inlined);
}

int InlinedDepths::deepest_inlined_read(const Assignment& s, const InlineDefs& inlined) const {
  int best = -1, best_depth = -1;
  for (int node : InlineCandidates::read_nodes(s)) {
    if (!inlined.count(node)) continue;
    auto it = depth_.find(node);
    const int depth = it == depth_.end() ? 1 : it->second;
    if (depth > best_depth) best = node, best_depth = depth;
  }
  return best;
}

}  // namespace kiln::ir::lowering
