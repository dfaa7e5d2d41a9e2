// Register tiles for contractions: a row-parallel kernel that accumulates into one row at a time
// (c[i, j] += a[i, k] * b[k, j], as lowering writes a matrix product) becomes one that computes a
// block of rows times a block of columns in a local array across the whole reduction, which the C
// compiler keeps in vector registers. See tile_contractions in kiln/loop/optimize.h.
#include <optional>
#include <vector>

#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"
#include "loop/work_count.h"

namespace kiln::ir {

namespace {

using internal::i64_const;
using internal::kAnything;
using internal::loads;
using internal::rewrite_expr;
using internal::rewrite_stmt_exprs;
using internal::same_expr;
using internal::uses_var;

// Rows of a tile: 6 rows of 2 vectors are 12 accumulators, which with the two vectors of the
// reduced operand and a broadcast fill the 16 vector registers of x86-64 AVX2.
constexpr int64_t kTileRows = 6;

// Columns of a tile: one 64-byte cache line (two 256-bit vectors).
int64_t tile_columns(DType t) { return 64 / static_cast<int64_t>(dtype_size(t)); }

LExprRef i64_op(Op op, LExprRef a, LExprRef b) {
  return lop(op, DType::kI64, {std::move(a), std::move(b)});
}

// The coefficient of `var` in the i64 expression `e` if `e` is affine in it (`var` appears only
// under +, -, negation and products by constants), else nothing.
std::optional<int64_t> coefficient(const LExpr& e, int var) {
  if (!uses_var(&e, var)) return 0;
  if (e.kind == LExpr::Kind::kVar) return 1;
  if (e.kind != LExpr::Kind::kOp || e.type != DType::kI64) return {};
  if (e.op == Op::kNeg) {
    std::optional<int64_t> c = coefficient(*e.args[0], var);
    return c ? std::optional<int64_t>(-*c) : std::nullopt;
  }
  if (e.op == Op::kAdd || e.op == Op::kSub) {
    std::optional<int64_t> a = coefficient(*e.args[0], var), b = coefficient(*e.args[1], var);
    if (!a || !b) return {};
    return e.op == Op::kAdd ? *a + *b : *a - *b;
  }
  if (e.op == Op::kMul) {
    for (int side = 0; side < 2; ++side) {
      const LExpr& k = *e.args[side];
      if (k.kind != LExpr::Kind::kConst) continue;
      std::optional<int64_t> c = coefficient(*e.args[1 - side], var);
      if (!c) return {};
      return static_cast<int64_t>(k.value) * *c;
    }
  }
  return {};
}

// How `e` loads node `node`: at all, and only at offsets equal to `offset` and never in an
// operand a select may skip (so the first evaluation of `e` runs that load).
struct NodeLoads {
  bool any = false;
  bool all_at_offset_unconditional = true;
};

void node_loads(const LExpr* e, int node, const LExpr* offset, bool conditional, NodeLoads* out) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kLoad && e->node == node) {
    out->any = true;
    if (conditional || !same_expr(e->offset.get(), offset)) out->all_at_offset_unconditional = false;
  }
  node_loads(e->offset.get(), node, offset, conditional, out);
  for (size_t i = 0; i < e->args.size(); ++i) {
    const bool skippable = e->kind == LExpr::Kind::kOp && e->op == Op::kSelect && i > 0;
    node_loads(e->args[i].get(), node, offset, conditional || skippable, out);
  }
}

// (for vK EK (for vJ EJ (store X OFF V))): for each column j, V folds one term per k into the
// element X[OFF] that it reads back, where OFF does not depend on k and distinct columns are
// distinct elements (OFF = f(i) + c * j with c != 0).
struct Contraction {
  const LStmt* k_loop;
  const LStmt* j_loop;
  const LStmt* store;
};

std::optional<Contraction> match(const LStmt& s) {
  if (s.kind != LStmt::Kind::kFor || s.parallel || s.extent < 1 || s.body.size() != 1) return {};
  const LStmt* j = s.body[0].get();
  if (!j || j->kind != LStmt::Kind::kFor || j->parallel || j->body.size() != 1) return {};
  const LStmt* st = j->body[0].get();
  if (!st || st->kind != LStmt::Kind::kStore || !st->offset || !st->value) return {};
  if (j->extent < tile_columns(st->value->type)) return {};
  const LExpr& off = *st->offset;
  if (uses_var(&off, s.var) || loads(&off, kAnything)) return {};
  std::optional<int64_t> c = coefficient(off, j->var);
  if (!c || *c == 0) return {};
  NodeLoads l;
  node_loads(st->value.get(), st->node, &off, false, &l);
  if (!l.any || !l.all_at_offset_unconditional) return {};
  return Contraction{&s, j, st};
}

class Tiler {
 public:
  explicit Tiler(Kernel& kernel) : kernel_(kernel) {}

  bool run() {
    const LStmt* top = kernel_.body.get();
    if (!top || top->kind != LStmt::Kind::kFor || !top->parallel || top->extent < kTileRows) {
      return false;
    }
    int contractions = 0;
    for (const LStmtRef& s : top->body) contractions += s && match(*s) ? 1 : 0;
    if (contractions == 0 || kernel_.var_count + 5 > kMaxKernelVars ||
        kernel_.local_count + contractions > kMaxKernelLocals) {
      return false;
    }
    row_ = top->var;
    block_ = kernel_.var_count++;
    r_ = kernel_.var_count++;
    jb_ = kernel_.var_count++;
    jj_ = kernel_.var_count++;
    t_ = kernel_.var_count++;
    const int64_t rows = top->extent;
    std::vector<LStmtRef> full;
    for (const LStmtRef& s : top->body) jam(s, &full);
    std::vector<LStmtRef> body;
    if (rows % kTileRows == 0) {
      body = std::move(full);
    } else {
      // The last block has fewer rows: it runs the original body once per row it has.
      const LExprRef end = i64_op(Op::kAdd, first_row(), i64_const(kTileRows));
      body.push_back(lif(i64_op(Op::kLe, end, i64_const(rows)), std::move(full)));
      std::vector<LStmtRef> each;
      for (const LStmtRef& s : top->body) each.push_back(at_row(s));
      body.push_back(lif(i64_op(Op::kGt, end, i64_const(rows)),
                         {lfor(r_, kTileRows, false,
                               {lif(i64_op(Op::kLt, row(), i64_const(rows)), std::move(each))})}));
    }
    kernel_.body = lfor(block_, (rows + kTileRows - 1) / kTileRows, true, std::move(body));
    return true;
  }

 private:
  LExprRef first_row() const { return i64_op(Op::kMul, lvar(block_), i64_const(kTileRows)); }
  // Row r_ of the block: block * kTileRows + r.
  LExprRef row() const { return i64_op(Op::kAdd, first_row(), lvar(r_)); }

  // `e` with the row variable replaced by row(), `var` by `by`, and every load of node
  // `node` (when >= 0) by `replacement`.
  LExprRef at(const LExprRef& e, int var, const LExprRef& by, int node = -1,
              const LExprRef& replacement = nullptr) const {
    const LExprRef r = row();
    return rewrite_expr(e, [&](const LExprRef& x) -> LExprRef {
      if (x->kind == LExpr::Kind::kVar && x->var == row_) return r;
      if (x->kind == LExpr::Kind::kVar && x->var == var) return by;
      if (x->kind == LExpr::Kind::kLoad && x->node == node) return replacement;
      return x;
    });
  }

  // `s` for row r_ of the block.
  LStmtRef at_row(const LStmtRef& s) const {
    const LExprRef r = row();
    return rewrite_stmt_exprs(s, [&](const LExprRef& x) {
      return x->kind == LExpr::Kind::kVar && x->var == row_ ? r : x;
    });
  }

  // Appends what `s` of the parallel body becomes in a full block of kTileRows rows.
  void jam(const LStmtRef& s, std::vector<LStmtRef>* out) {
    count_lowering_work(1);
    if (!s || s->kind == LStmt::Kind::kComment) {
      if (s) out->push_back(s);
      return;
    }
    std::optional<Contraction> c = match(*s);
    if (!c) {
      out->push_back(lfor(r_, kTileRows, false, {at_row(s)}));
      return;
    }
    const LStmt& k = *c->k_loop;
    const LStmt& j = *c->j_loop;
    const LStmt& st = *c->store;
    const DType type = st.value->type;
    const int64_t cols = tile_columns(type);
    const int acc = kernel_.local_count++;
    // Tile element (r, jj) is acc[r * cols + jj], column jb * cols + jj.
    const LExprRef slot = i64_op(Op::kAdd, i64_op(Op::kMul, lvar(r_), i64_const(cols)), lvar(jj_));
    const LExprRef col = i64_op(Op::kAdd, i64_op(Op::kMul, lvar(jb_), i64_const(cols)), lvar(jj_));
    const LExprRef acc_load = llocal_load(acc, type, slot);
    const LExprRef element = at(st.offset, j.var, col);
    auto over_tile = [&](LStmtRef s) {
      return lfor(r_, kTileRows, false, {lfor(jj_, cols, false, {std::move(s)})});
    };
    std::vector<LStmtRef> tile;
    tile.push_back(over_tile(llocal_store(acc, slot, lload(st.node, type, element))));
    tile.push_back(lfor(k.var, k.extent, false,
                        {over_tile(llocal_store(acc, slot, at(st.value, j.var, col, st.node, acc_load)))}));
    tile.push_back(over_tile(lstore(st.node, element, acc_load)));
    out->push_back(lfor(jb_, j.extent / cols, false, {llocal_decl(acc, type, kTileRows * cols, std::move(tile))}));
    if (j.extent % cols != 0) {
      // The columns past the last whole tile, row by row as before.
      const LExprRef tail = i64_op(Op::kAdd, i64_const(j.extent / cols * cols), lvar(t_));
      out->push_back(lfor(r_, kTileRows, false,
                          {lfor(k.var, k.extent, false,
                                {lfor(t_, j.extent % cols, false,
                                      {lstore(st.node, at(st.offset, j.var, tail),
                                              at(st.value, j.var, tail))})})}));
    }
  }

  Kernel& kernel_;
  int row_ = -1, block_ = -1, r_ = -1, jb_ = -1, jj_ = -1, t_ = -1;
};

}  // namespace

bool tile_contractions(Kernel& kernel) { return Tiler(kernel).run(); }

}  // namespace kiln::ir
