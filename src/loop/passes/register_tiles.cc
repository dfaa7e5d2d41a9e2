// Register tiles for contractions: a row-parallel kernel that accumulates into one row at a time
// (c[i, j] += a[i, k] * b[k, j], as lowering writes a matrix product) becomes one that computes a
// block of rows times a block of columns in locals across the reduction, which the C compiler
// keeps in vector registers. See tile_contractions in kiln/loop/optimize.h.
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"
#include "loop/work_count.h"

namespace kiln::ir {

namespace {

using internal::i64_const;
using internal::rewrite_expr;
using internal::rewrite_stmt_exprs;

// Rows of a tile: 6 rows of 2 vectors are 12 accumulators, which with the two vectors of the
// reduced operand and a broadcast fill the 16 vector registers of x86-64 AVX2.
constexpr int64_t kTileRows = 6;

// Columns of a tile: one 64-byte cache line (two 256-bit vectors).
int64_t tile_columns(DType t) { return 64 / static_cast<int64_t>(dtype_size(t)); }

LExprRef i64_op(Op op, LExprRef a, LExprRef b) {
  return lop(op, DType::kI64, {std::move(a), std::move(b)});
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
  std::optional<int64_t> c = var_coefficient(off, j->var);
  if (!c || *c == 0) return {};
  NodeLoads l;
  node_loads(st->value.get(), st->node, &off, false, &l);
  if (!l.any || !l.all_at_offset_unconditional) return {};
  return Contraction{&s, j, st};
}

// The loads of `e` worth copying into a packed local: of a node other than `x`, at an offset that
// depends on variable `uses` but not on `avoids`, loads nothing, and is evaluated whenever `e`
// is (outside select operands). Distinct ones, in order of first appearance.
void operand_loads(const LExprRef& e, int x, int uses, int avoids, bool conditional,
                   std::vector<LExprRef>* out) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kLoad && e->node != x && !conditional &&
      uses_var(e->offset.get(), uses) && !uses_var(e->offset.get(), avoids) &&
      !loads(e->offset.get(), kAnything)) {
    for (const LExprRef& seen : *out) {
      if (same_expr(seen.get(), e.get())) return;
    }
    out->push_back(e);
    return;
  }
  for (size_t i = 0; i < e->args.size(); ++i) {
    const bool skippable = e->kind == LExpr::Kind::kOp && e->op == Op::kSelect && i > 0;
    operand_loads(e->args[i], x, uses, avoids, conditional || skippable, out);
  }
}

// The column operand of a block of k (b[k, j] for one tile's columns) is copied into a local
// array ("packed", as BLAS libraries do) once per tile of columns for all the step's tiles.
// Contiguous, it stays in the cache, where the original rows, often a power-of-two stride apart,
// evict each other. At most this many bytes: half of the 64 KiB that the C dialect keeps on the
// stack (kMaxStackLocalBytes; more goes to the heap). (Packing the row operand too, as BLAS
// does, made GCC 12 spill the accumulators.)
constexpr int64_t kMaxPackedBytes = 32 * 1024;
// A product has one column operand; a value with more distinct ones is not packed.
constexpr size_t kMaxPackedLoads = 4;

class Tiler {
 public:
  explicit Tiler(Kernel& kernel) : kernel_(kernel) {}

  bool run() {
    const LStmt* top = kernel_.body.get();
    // Rows over a size are tiled too, with every step guarded (its count is known only when the
    // kernel runs).
    if (!top || top->kind != LStmt::Kind::kFor || !top->parallel || (!top->extent_expr && top->extent < kTileRows)) {
      return false;
    }
    int contractions = 0;
    for (const LStmtRef& s : top->body) contractions += s && match(*s) ? 1 : 0;
    if (contractions == 0 || kernel_.var_count + 8 > kMaxKernelVars ||
        kernel_.local_count + (kTileRows + static_cast<int>(kMaxPackedLoads)) * contractions > kMaxKernelLocals) {
      return false;
    }
    row_ = top->var;
    rows_ = top->extent;
    rows_value_ = top->extent_expr ? top->extent_expr : i64_const(rows_);
    // A step covers as many whole tiles as fit in kStepRows, so that a packed panel serves them
    // all, but not fewer than 2 steps when there are rows for 2 tiles (both threads get work).
    step_ = top->extent_expr ? kStepRows : std::min(kStepRows, std::max<int64_t>(kTileRows, rows_ / 2 / kTileRows * kTileRows));
    step_var_ = kernel_.var_count++;
    r_ = kernel_.var_count++;
    tile_ = kernel_.var_count++;
    jb_ = kernel_.var_count++;
    jj_ = kernel_.var_count++;
    t_ = kernel_.var_count++;
    kb_ = kernel_.var_count++;
    kk_ = kernel_.var_count++;
    std::vector<LStmtRef> body;
    for (const LStmtRef& s : top->body) jam(s, &body);
    if (top->extent_expr) {
      const LExprRef steps = i64_op(Op::kDiv, i64_op(Op::kAdd, rows_value_, i64_const(step_ - 1)), i64_const(step_));
      kernel_.body = lfor(step_var_, steps, true, std::move(body));
    } else {
      kernel_.body = lfor(step_var_, (rows_ + step_ - 1) / step_, true, std::move(body));
    }
    return true;
  }

 private:
  // Rows per step of the new parallel loop: 8 tiles.
  static constexpr int64_t kStepRows = 8 * kTileRows;

  LExprRef step_first_row() const { return i64_op(Op::kMul, lvar(step_var_), i64_const(step_)); }
  // Row r_ of the step.
  LExprRef step_row() const { return i64_op(Op::kAdd, step_first_row(), lvar(r_)); }
  // The first row of tile tile_ of the step.
  LExprRef tile_first_row() const {
    return i64_op(Op::kAdd, step_first_row(), i64_op(Op::kMul, lvar(tile_), i64_const(kTileRows)));
  }

  // `stmts`, when the step may run past the last row, only where `cond` holds.
  std::vector<LStmtRef> guarded(LExprRef cond, std::vector<LStmtRef> stmts) const {
    if (!rows_known() || rows_ % step_ != 0) return {lif(std::move(cond), std::move(stmts))};
    return stmts;
  }
  bool rows_known() const { return rows_ >= 0; }

  // `e` with each loop variable of `subs` replaced by its expression.
  static LExprRef at(const LExprRef& e, std::initializer_list<std::pair<int, LExprRef>> subs) {
    return rewrite_expr(e, [&](const LExprRef& x) {
      if (x->kind != LExpr::Kind::kVar) return x;
      for (const auto& [var, by] : subs) {
        if (x->var == var) return by;
      }
      return x;
    });
  }

  // `s` for row `row`.
  LStmtRef at_row(const LStmtRef& s, const LExprRef& row) const {
    return rewrite_stmt_exprs(s, [&](const LExprRef& x) {
      return x->kind == LExpr::Kind::kVar && x->var == row_ ? row : x;
    });
  }

  // `s` for every row of the step, in turn.
  LStmtRef each_row(const LStmtRef& s) const {
    return lfor(r_, step_, false,
                guarded(i64_op(Op::kLt, step_row(), rows_value_), {at_row(s, step_row())}));
  }

  // Appends what `s` of the parallel body becomes in a step.
  void jam(const LStmtRef& s, std::vector<LStmtRef>* out) {
    count_lowering_work(1);
    if (!s || s->kind == LStmt::Kind::kComment) {
      if (s) out->push_back(s);
      return;
    }
    std::optional<Contraction> c = match(*s);
    if (!c) {
      out->push_back(each_row(s));
      return;
    }
    const LStmt& k = *c->k_loop;
    const LStmt& j = *c->j_loop;
    const LStmt& st = *c->store;
    const DType type = st.value->type;
    const int64_t cols = tile_columns(type);
    const LExprRef col = i64_op(Op::kAdd, i64_op(Op::kMul, lvar(jb_), i64_const(cols)), lvar(jj_));
    const int64_t tiles = step_ / kTileRows;
    // Packed operands (column operands b[k, j]): panel b_local[kk * cols + jj] for a block of
    // `count` ks.
    std::vector<LExprRef> b_loads;
    operand_loads(st.value, st.node, j.var, row_, false, &b_loads);
    if (b_loads.size() > kMaxPackedLoads) b_loads.clear();
    int64_t bytes_per_k = 0;
    for (const LExprRef& l : b_loads) bytes_per_k += cols * static_cast<int64_t>(dtype_size(l->type));
    const int64_t block_k = bytes_per_k == 0 ? k.extent : std::max<int64_t>(1, kMaxPackedBytes / bytes_per_k);
    std::vector<int> b_locals;
    for (size_t q = 0; q < b_loads.size(); ++q) b_locals.push_back(kernel_.local_count++);
    const LExprRef b_slot = i64_op(Op::kAdd, i64_op(Op::kMul, lvar(kk_), i64_const(cols)), lvar(jj_));
    // Row r of a tile accumulates in its own local acc[r] of `cols` elements (one local per
    // row rather than one array: GCC keeps all of them in registers, where it leaves part of a
    // 6 × cols array in memory).
    std::vector<int> acc;
    for (int64_t r = 0; r < kTileRows; ++r) acc.push_back(kernel_.local_count++);
    auto row = [&](const LExprRef& r) { return i64_op(Op::kAdd, tile_first_row(), r); };
    auto acc_load = [&](int64_t r) { return llocal_load(acc[r], type, lvar(jj_)); };
    auto element = [&](int64_t r) { return at(st.offset, {{row_, row(i64_const(r))}, {j.var, col}}); };
    auto in_range = [&](std::vector<LStmtRef> stmts) {
      return guarded(i64_op(Op::kLe, row(i64_const(kTileRows)), rows_value_), std::move(stmts));
    };
    // One statement per row of the tile, over its columns.
    auto per_row = [&](const std::function<LStmtRef(int64_t)>& make) {
      std::vector<LStmtRef> rows;
      for (int64_t r = 0; r < kTileRows; ++r) rows.push_back(lfor(jj_, cols, false, {make(r)}));
      return rows;
    };
    auto declare = [](const std::vector<int>& locals, const std::vector<LExprRef>& loads, int64_t size,
                      LStmtRef body) {
      for (size_t q = locals.size(); q-- > 0;) body = llocal_decl(locals[q], loads[q]->type, size, {body});
      return body;
    };
    // Ks [first, first + count), k = first + kk: per tile of columns, pack the columns'
    // operands and run the step's tiles.
    auto k_block = [&](const LExprRef& first, int64_t count) {
      const LExprRef kx = first ? i64_op(Op::kAdd, first, lvar(kk_)) : lvar(kk_);
      // The value for row r: X reads the accumulator, packed loads their local (matched before
      // the variables change, so that they compare equal to the originals).
      auto value = [&](int64_t r) {
        const LExprRef from_locals = rewrite_expr(st.value, [&](const LExprRef& x) {
          if (x->kind != LExpr::Kind::kLoad) return x;
          if (x->node == st.node) return acc_load(r);
          for (size_t q = 0; q < b_loads.size(); ++q) {
            if (same_expr(x.get(), b_loads[q].get())) return llocal_load(b_locals[q], x->type, b_slot);
          }
          return x;
        });
        return at(from_locals, {{row_, row(i64_const(r))}, {j.var, col}, {k.var, kx}});
      };
      std::vector<LStmtRef> tile = per_row([&](int64_t r) {
        return llocal_store(acc[r], lvar(jj_), lload(st.node, type, element(r)));
      });
      tile.push_back(lfor(kk_, count, false, per_row([&](int64_t r) {
        return llocal_store(acc[r], lvar(jj_), value(r));
      })));
      for (LStmtRef& s : per_row([&](int64_t r) { return lstore(st.node, element(r), acc_load(r)); })) {
        tile.push_back(std::move(s));
      }
      LStmtRef tile_stmt = lblock(std::move(tile));
      for (int64_t r = kTileRows; r-- > 0;) tile_stmt = llocal_decl(acc[r], type, cols, {tile_stmt});
      std::vector<LStmtRef> columns;
      for (size_t q = 0; q < b_loads.size(); ++q) {
        columns.push_back(lfor(kk_, count, false, {lfor(jj_, cols, false, {
            llocal_store(b_locals[q], b_slot, at(b_loads[q], {{j.var, col}, {k.var, kx}}))})}));
      }
      columns.push_back(lfor(tile_, tiles, false, in_range({tile_stmt})));
      return lfor(jb_, j.extent / cols, false, {declare(b_locals, b_loads, count * cols, lblock(std::move(columns)))});
    };
    if (k.extent <= block_k) {
      out->push_back(k_block(nullptr, k.extent));
    } else {
      out->push_back(lfor(kb_, k.extent / block_k, false,
                          {k_block(i64_op(Op::kMul, lvar(kb_), i64_const(block_k)), block_k)}));
      if (k.extent % block_k != 0) {
        out->push_back(k_block(i64_const(k.extent / block_k * block_k), k.extent % block_k));
      }
    }
    const int64_t whole_cols = j.extent / cols * cols;
    if (j.extent % cols != 0) {
      // The columns past the last whole tile, row by row as before.
      const LExprRef tail = i64_op(Op::kAdd, i64_const(whole_cols), lvar(t_));
      out->push_back(each_row(lfor(k.var, k.extent, false, {lfor(t_, j.extent % cols, false, {
          lstore(st.node, at(st.offset, {{j.var, tail}}), at(st.value, {{j.var, tail}}))})})));
    }
    if (!rows_known() || rows_ % kTileRows != 0) {
      // The rows past the last whole tile, for the whole tiles' columns, as before.
      const LExprRef whole_rows = rows_known() ? i64_const(rows_ / kTileRows * kTileRows)
                                               : i64_op(Op::kMul, i64_op(Op::kDiv, rows_value_, i64_const(kTileRows)),
                                                        i64_const(kTileRows));
      LStmtRef nest = lfor(k.var, k.extent, false, {lfor(j.var, whole_cols, false, {c->j_loop->body[0]})});
      out->push_back(lfor(r_, step_, false, {lif(i64_op(Op::kGe, step_row(), whole_rows),
          {lif(i64_op(Op::kLt, step_row(), rows_value_), {at_row(nest, step_row())})})}));
    }
  }

  Kernel& kernel_;
  int row_ = -1;
  int64_t rows_ = 0, step_ = 0;  // rows_: -1 for rows over a size
  LExprRef rows_value_;           // the rows as an expression: a constant, or of sizes
  int step_var_ = -1, r_ = -1, tile_ = -1, jb_ = -1, jj_ = -1, t_ = -1, kb_ = -1, kk_ = -1;
};

}  // namespace

bool tile_contractions(Kernel& kernel) { return Tiler(kernel).run(); }

}  // namespace kiln::ir
