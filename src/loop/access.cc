// Accesses of a statement through inlined definitions (access.h).
#include "loop/access.h"

#include <algorithm>

#include "loop/work_count.h"

namespace kiln::ir::lowering {

Affine substitute(const Affine& inner, const std::vector<Affine>& outer) {
  std::map<int, int64_t> terms;
  Affine out;
  out.offset = inner.offset;
  out.gather = inner.gather;
  for (const auto& [index, coeff] : inner.terms) {
    const Affine& o = outer[static_cast<size_t>(index)];
    out.offset += coeff * o.offset;
    if (o.gather >= 0) out.gather = 0;  // still not affine
    for (const auto& [oi, oc] : o.terms) terms[oi] += coeff * oc;
  }
  for (const auto& [index, coeff] : terms) {
    if (coeff != 0) out.terms.push_back({index, coeff});
  }
  return out;
}

namespace {

// Reads of `e`, with `env` mapping the indices of the statement `e` belongs to onto the
// accessing statement's; `depth` guards against a cycle of definitions (which validation and
// the inlining rule exclude, but an analysis must not recurse forever on bad input).
void collect_reads(const Expr& e, const std::vector<Affine>& env, const InlineDefs& inlined,
                   int depth, std::vector<Access>* out) {
  count_lowering_work(1);
  if (e.kind == Expr::Kind::kTensor || e.kind == Expr::Kind::kMerge) {
    std::vector<Affine> subs;
    for (const Affine& a : e.subscripts) subs.push_back(substitute(a, env));
    auto def = inlined.find(e.node);
    if (e.kind == Expr::Kind::kTensor && def != inlined.end() && depth < kMaxExprDepth) {
      const Assignment& d = *def->second;
      std::vector<Affine> inner(d.indices.size());
      for (size_t k = 0; k < d.target_indices.size() && k < subs.size(); ++k) {
        inner[static_cast<size_t>(d.target_indices[k])] = subs[k];
      }
      collect_reads(*d.rhs, inner, inlined, depth + 1, out);
      for (const ExprRef& a : e.args) collect_reads(*a, env, inlined, depth, out);  // gathers' reads
      return;
    }
    out->push_back(Access{e.node, std::move(subs), false, e.kind == Expr::Kind::kMerge});
  }
  for (const ExprRef& a : e.args) collect_reads(*a, env, inlined, depth, out);
}

}  // namespace

std::vector<Access> statement_accesses(const Assignment& s, const InlineDefs& inlined) {
  std::vector<Affine> identity;
  for (size_t i = 0; i < s.indices.size(); ++i) identity.push_back(Affine::index(static_cast<int>(i)));
  std::vector<Affine> target_point;
  for (int t : s.target_indices) target_point.push_back(Affine::index(t));
  std::vector<Access> out;
  collect_reads(*s.rhs, identity, inlined, 0, &out);
  if (s.accum != Accum::kAssign) out.push_back(Access{s.target, target_point, false, false});
  out.push_back(Access{s.target, target_point, true, false});
  return out;
}

bool at_target_point(const Assignment& s, const Access& a) {
  if (a.subscripts.size() != s.target_indices.size()) return false;
  for (size_t d = 0; d < a.subscripts.size(); ++d) {
    if (a.subscripts[d].bare_index() != s.target_indices[d]) return false;
  }
  return true;
}

bool reads_target_elsewhere(const Assignment& s, const InlineDefs& inlined) {
  return reads_target_elsewhere(s, statement_accesses(s, inlined));
}

bool reads_target_elsewhere(const Assignment& s, const std::vector<Access>& accesses) {
  return std::any_of(accesses.begin(), accesses.end(), [&](const Access& a) {
    return a.node == s.target && !a.write && !a.merge && !at_target_point(s, a);
  });
}

}  // namespace kiln::ir::lowering
