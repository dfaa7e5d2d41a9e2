#include "kiln/ir/library_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/ir/gemm_groups.h"

namespace kiln::ir {

namespace {

// A product found in a statement: the operands, whether each is transposed, the number of
// leading batch dimensions, and M·N·K of one of its products.
struct Product {
  int a = -1, b = -1;
  bool transpose_a = false, transpose_b = false;
  int batch = 0;
  int64_t volume = 0;
};

// What a dimension counts for in deciding whether a product is worth a call: its value, or for
// one that names sizes (unknown until it runs) a stand-in, as if the size were a typical batch.
constexpr int64_t kSizeStandIn = 1024;
int64_t planning_value(const SizeExpr& e) {
  if (e.is_constant()) return e.offset;
  int64_t v = e.offset;
  for (const auto& [size, coefficient] : e.terms) v += coefficient * kSizeStandIn;
  return std::max<int64_t>(v, 1);
}

// The index of each subscript of a tensor read, or nullopt unless every subscript is one bare
// index.
std::optional<std::vector<int>> bare_indices(const Expr& read) {
  if (read.kind != Expr::Kind::kTensor) return std::nullopt;
  std::vector<int> out;
  for (const Affine& subscript : read.subscripts) {
    const int i = subscript.bare_index();
    if (i < 0) return std::nullopt;
    out.push_back(i);
  }
  return out;
}

// Whether x[x_from, x_from + n) and y[y_from, y_from + n) hold the same indices in one order.
bool same_run(const std::vector<int>& x, int x_from, const std::vector<int>& y, int y_from, int n) {
  return std::equal(x.begin() + x_from, x.begin() + x_from + n, y.begin() + y_from);
}

// Whether every index of `read` spans the whole dimension it subscripts (no `where` narrowing,
// no zero padding): the same numbers, or the same expressions of sizes.
bool spans_whole_dimensions(const Assignment& s, const std::vector<int>& read, const TensorNode& node) {
  for (size_t d = 0; d < read.size(); ++d) {
    if (s.indices[static_cast<size_t>(read[d])].range() != node.dimension(d)) return false;
  }
  return true;
}

// The product of the extents of read[from, from + n), each as planning_value counts it,
// saturating at INT64_MAX.
int64_t planned_extent(const Assignment& s, const std::vector<int>& read, int from, int n, int64_t times = 1) {
  __int128 v = times;
  for (int d = from; d < from + n; ++d) {
    v = std::min<__int128>(v * planning_value(s.indices[static_cast<size_t>(read[static_cast<size_t>(d)])].range()), INT64_MAX);
  }
  return static_cast<int64_t>(v);
}

// `left` and `right` read as gemm's a and b of c[target] with these transposes: the blocks of
// gemm_groups hold the same indices in the same order (the target's rows in a, its cols in b,
// the reduced indices, each once, in both).
bool blocks_match(const std::vector<int>& target, const std::vector<int>& left, const std::vector<int>& right,
                  const GemmGroups& g, bool ta, bool tb, const std::vector<int>& reduced) {
  const auto [a_rows, a_depth, b_depth, b_cols] = g.starts(ta, tb);
  if (!same_run(left, a_rows, target, g.batch, g.rows) || !same_run(right, b_cols, target, g.batch + g.rows, g.cols) ||
      !same_run(left, a_depth, right, b_depth, g.depth)) {
    return false;
  }
  std::vector<int> depth(left.begin() + a_depth, left.begin() + a_depth + g.depth), want = reduced;
  std::sort(depth.begin(), depth.end());
  std::sort(want.begin(), want.end());
  return depth == want;
}

std::optional<Product> match_product(const Program& program, const Assignment& s) {
  const TensorNode& c = program.nodes[static_cast<size_t>(s.target)];
  if (s.reduce != Reduce::kSum || (s.accum != Accum::kAssign && s.accum != Accum::kAdd)) return std::nullopt;
  if (c.dtype != DType::kF32 && c.dtype != DType::kF64) return std::nullopt;
  const std::vector<int> reduced = s.reduced_indices();
  const std::vector<int>& target = s.target_indices;
  if (reduced.empty() || target.size() != c.dims.size()) return std::nullopt;
  // A triangular bound leaves out part of the product: not gemm's.
  if (std::any_of(s.indices.begin(), s.indices.end(), [](const IndexVar& v) { return v.limit.has_value(); })) {
    return std::nullopt;
  }
  const Expr& e = *s.rhs;
  if (e.kind != Expr::Kind::kOp || e.op != Op::kMul || e.type != c.dtype || e.args.size() != 2) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    const Expr& left = *e.args[static_cast<size_t>(order)];
    const Expr& right = *e.args[static_cast<size_t>(1 - order)];
    const std::optional<std::vector<int>> ia = bare_indices(left), ib = bare_indices(right);
    if (!ia || !ib) return std::nullopt;
    const TensorNode& a = program.nodes[static_cast<size_t>(left.node)];
    const TensorNode& b = program.nodes[static_cast<size_t>(right.node)];
    if (a.dtype != c.dtype || b.dtype != c.dtype || a.id == c.id || b.id == c.id) return std::nullopt;
    // An index of the target that both operands read is a batch index, and so must lead all
    // three: the batch is their longest common prefix.
    int batch = 0;
    while (static_cast<size_t>(batch) < std::min({target.size(), ia->size(), ib->size()}) &&
           target[static_cast<size_t>(batch)] == (*ia)[static_cast<size_t>(batch)] &&
           target[static_cast<size_t>(batch)] == (*ib)[static_cast<size_t>(batch)]) {
      ++batch;
    }
    const std::optional<GemmGroups> g = gemm_groups(static_cast<int64_t>(ia->size()), static_cast<int64_t>(ib->size()),
                                                    static_cast<int64_t>(target.size()), batch);
    if (!g || static_cast<size_t>(g->depth) != reduced.size()) continue;
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        if (!blocks_match(target, *ia, *ib, *g, ta, tb, reduced)) continue;
        if (!spans_whole_dimensions(s, *ia, a) || !spans_whole_dimensions(s, *ib, b) ||
            !spans_whole_dimensions(s, target, c)) {
          return std::nullopt;
        }
        const int64_t volume = planned_extent(s, *ia, g->starts(ta, tb).a_depth, g->depth, planned_extent(s, target, g->batch, g->rows + g->cols));
        return Product{a.id, b.id, ta, tb, g->batch, volume};
      }
    }
  }
  return std::nullopt;
}

Call gemm_call(const Assignment& s, const Product& p, int position) {
  Call call;
  call.function = "gemm";
  call.args.push_back(CallArg{p.a, "", 0, s.loc});
  call.args.push_back(CallArg{p.b, "", 0, s.loc});
  if (p.transpose_a) call.args.push_back(CallArg{-1, "transpose_a", 1, s.loc});
  if (p.transpose_b) call.args.push_back(CallArg{-1, "transpose_b", 1, s.loc});
  if (s.accum == Accum::kAdd) call.args.push_back(CallArg{-1, "beta", 1, s.loc});
  if (p.batch > 0) call.args.push_back(CallArg{-1, "batch", static_cast<double>(p.batch), s.loc});
  call.outputs = {s.target};
  call.position = position;
  call.loc = s.loc;
  call.function_loc = s.loc;
  return call;
}

}  // namespace

Program with_library_calls(const Program& program, const LibraryCallOptions& options, int* replaced) {
  Program out = program;
  int count = 0;
  for (Routine& routine : out.routines) {
    std::vector<Assignment> statements;
    std::vector<Call> calls;
    size_t next_call = 0;  // of the routine's own calls, in order
    for (size_t i = 0; i < routine.statements.size(); ++i) {
      // The routine's calls before statement i keep their place, now after statements.size().
      for (; next_call < routine.calls.size() && static_cast<size_t>(routine.calls[next_call].position) <= i; ++next_call) {
        calls.push_back(routine.calls[next_call]);
        calls.back().position = static_cast<int>(statements.size());
      }
      const Assignment& s = routine.statements[i];
      std::optional<Product> p = match_product(program, s);
      if (p && p->volume >= options.min_gemm_volume) {
        calls.push_back(gemm_call(s, *p, static_cast<int>(statements.size())));
        ++count;
      } else {
        statements.push_back(s);
      }
    }
    for (; next_call < routine.calls.size(); ++next_call) {
      calls.push_back(routine.calls[next_call]);
      calls.back().position = static_cast<int>(statements.size());
    }
    routine.statements = std::move(statements);
    routine.calls = std::move(calls);
  }
  if (replaced) *replaced = count;
  return out;
}

}  // namespace kiln::ir
