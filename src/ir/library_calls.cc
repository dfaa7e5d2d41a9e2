#include "kiln/ir/library_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kiln::ir {

namespace {

// A matrix product found in a statement: the operands, whether each is transposed, and M·N·K.
struct Product {
  int a = -1, b = -1;
  bool transpose_a = false, transpose_b = false;
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

// Which of (row, col) the bare subscripts of a rank-2 read are: (row, col) → false,
// (col, row) → true; nullopt for anything else.
std::optional<bool> transposed(const Expr& read, int row, int col) {
  if (read.kind != Expr::Kind::kTensor || read.subscripts.size() != 2) return std::nullopt;
  const int s0 = read.subscripts[0].bare_index(), s1 = read.subscripts[1].bare_index();
  if (s0 == row && s1 == col) return false;
  if (s0 == col && s1 == row) return true;
  return std::nullopt;
}

std::optional<Product> match_product(const Program& program, const Assignment& s) {
  const TensorNode& c = program.nodes[static_cast<size_t>(s.target)];
  if (s.reduce != Reduce::kSum || (s.accum != Accum::kAssign && s.accum != Accum::kAdd)) return std::nullopt;
  if (c.dims.size() != 2 || (c.dtype != DType::kF32 && c.dtype != DType::kF64)) return std::nullopt;
  if (s.indices.size() != 3 || s.target_indices.size() != 2) return std::nullopt;
  const std::vector<int> reduced = s.reduced_indices();
  if (reduced.size() != 1) return std::nullopt;
  const int i = s.target_indices[0], j = s.target_indices[1], k = reduced[0];
  const Expr& e = *s.rhs;
  if (e.kind != Expr::Kind::kOp || e.op != Op::kMul || e.type != c.dtype || e.args.size() != 2) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    const Expr& left = *e.args[order];
    const Expr& right = *e.args[1 - order];
    const std::optional<bool> ta = transposed(left, i, k), tb = transposed(right, k, j);
    if (!ta || !tb) continue;
    const TensorNode& a = program.nodes[static_cast<size_t>(left.node)];
    const TensorNode& b = program.nodes[static_cast<size_t>(right.node)];
    if (a.dtype != c.dtype || b.dtype != c.dtype || a.id == c.id || b.id == c.id) return std::nullopt;
    // Every index spans whole dimensions (no `where` narrowing, no zero padding): the same
    // numbers, or the same expressions of sizes.
    const SizeExpr m = s.indices[i].range(), n = s.indices[j].range(), depth = s.indices[k].range();
    const SizeExpr a_rows = a.dimension(*ta ? 1 : 0), a_cols = a.dimension(*ta ? 0 : 1);
    const SizeExpr b_rows = b.dimension(*tb ? 1 : 0), b_cols = b.dimension(*tb ? 0 : 1);
    if (m != c.dimension(0) || n != c.dimension(1) || m != a_rows || depth != a_cols || depth != b_rows || n != b_cols) {
      return std::nullopt;
    }
    const __int128 volume = static_cast<__int128>(planning_value(m)) * planning_value(n) * planning_value(depth);
    return Product{a.id, b.id, *ta, *tb, static_cast<int64_t>(std::min<__int128>(volume, INT64_MAX))};
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
