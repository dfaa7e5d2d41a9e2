// Register tiles for contractions: a row-parallel kernel that accumulates into one row at a time
// (c[i, j] += a[i, k] * b[k, j], as lowering writes a matrix product) becomes one that computes a
// block of rows times a block of columns in locals across the reduction, which the C compiler
// keeps in vector registers, over copies of both operands packed for the caches (as GotoBLAS and
// BLIS do). See tile_contractions in kiln/loop/optimize.h and docs/optimize.md.
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

// An i64 operation; of two constants, the constant (so that a loop over it has a known extent).
LExprRef i64_op(Op op, LExprRef a, LExprRef b) {
  if (a->kind == LExpr::Kind::kConst && b->kind == LExpr::Kind::kConst) {
    const auto x = static_cast<int64_t>(a->value), y = static_cast<int64_t>(b->value);
    switch (op) {
      case Op::kAdd: return i64_const(x + y);
      case Op::kSub: return i64_const(x - y);
      case Op::kMul: return i64_const(x * y);
      case Op::kDiv: if (y != 0) return i64_const(x / y); break;
      case Op::kMax: return i64_const(std::max(x, y));
      default: break;
    }
  }
  return lop(op, DType::kI64, {std::move(a), std::move(b)});
}

// A loop's extent as an expression: a constant, or of sizes.
LExprRef extent_of(const LStmt& loop) { return loop.extent_expr ? loop.extent_expr : i64_const(loop.extent); }
bool is_const(const LExprRef& e) { return e->kind == LExpr::Kind::kConst; }

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

// Whether some load of `e`, of a node other than `x`, is shared by a tile's rows (its offset
// does not depend on the row variable) or by its columns (not on the column variable): what a
// tile keeps in registers and reuses. Without one (a reduction along the last axis, such as a
// mean over a row) a tile only reorders strided loads, and the C compiler's work on the kernel
// grows tenfold.
bool reuses_a_load(const LExpr* e, int x, int row, int column) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kLoad && e->node != x &&
      (!uses_var(e->offset.get(), row) || !uses_var(e->offset.get(), column))) {
    return true;
  }
  for (const LExprRef& a : e->args) {
    if (reuses_a_load(a.get(), x, row, column)) return true;
  }
  return false;
}

std::optional<Contraction> match(const LStmt& s, int row) {
  // The reduction and the columns may be over sizes (their loops then run when they are not 0).
  if (s.kind != LStmt::Kind::kFor || s.parallel || (!s.extent_expr && s.extent < 1) || s.body.size() != 1) return {};
  const LStmt* j = s.body[0].get();
  if (!j || j->kind != LStmt::Kind::kFor || j->parallel || j->body.size() != 1) return {};
  const LStmt* st = j->body[0].get();
  if (!st || st->kind != LStmt::Kind::kStore || !st->offset || !st->value) return {};
  if (!j->extent_expr && j->extent < tile_columns(st->value->type)) return {};
  const LExpr& off = *st->offset;
  if (uses_var(&off, s.var) || loads(&off, kAnything)) return {};
  std::optional<int64_t> c = var_coefficient(off, j->var);
  if (!c || *c == 0) return {};
  NodeLoads l;
  node_loads(st->value.get(), st->node, &off, false, &l);
  if (!l.any || !l.all_at_offset_unconditional) return {};
  if (!reuses_a_load(st->value.get(), st->node, row, j->var)) return {};
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

// The operands are packed into local arrays, as BLAS libraries do (GotoBLAS, BLIS):
//  - the column operand (b[k, j] for one tile of columns) for a block of ks: a panel
//    bpack[kk * W + jj] that every tile of the step reads; at most kMaxPanelBytes, so that it
//    stays in the L1 cache, where the original rows, often a power-of-two stride apart, evict
//    each other;
//  - the row operand (a[i, k]) for the same block of ks and all the step's rows, tile after tile
//    with the tile's 6 rows side by side: apack[(tile * KC + kk) * 6 + r]. A tile then reads its
//    6 values of one k from one cache line, where it read 6 rows a row's length apart, and the
//    step's block of rows (up to 264 KiB) is read from the L2 cache by every panel of columns.
constexpr int64_t kMaxPanelBytes = 16 * 1024;
// A product has one column operand and one row operand; a value with more distinct ones of a
// kind does not pack that kind.
constexpr size_t kMaxPackedLoads = 4;
// A packed row block over this many bytes is declared at least kHeapBytes long, so that the C
// dialect puts it on the heap (it keeps at most 64 KiB of locals on the stack,
// kMaxStackLocalBytes): the panel (16 KiB) and the accumulators declared inside it stay on the
// stack. A smaller one stays on the stack too (no allocation per step: small products run often).
constexpr int64_t kMaxStackRowBlockBytes = 40 * 1024;
constexpr int64_t kHeapBytes = 64 * 1024 + 64;
// Rows of a step (whole tiles) at most: the packed rows of a block of 256 ks (264 KiB of f32) fit
// the L2 cache, and each panel of b is packed once per 264 rows. (1024^3 f32 on one core of the
// development machine, an AMD EPYC with 1 MiB of L2: 0.87x OpenBLAS's time with 132 rows, 0.96x
// with 264, 0.95x with 516.)
constexpr int64_t kMaxStepRows = 264;

// Ops that cannot fail or trap on any value: a tile may compute them on padding (values of no
// element, never stored).
bool safe_on_padding(Op op) {
  switch (op) {
    case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kNeg: case Op::kFma: case Op::kMax:
    case Op::kMin:
      return true;
    default:
      return cast_target(op).has_value();  // every cast is defined on every value
  }
}

// Whether a tile may compute `e` on rows past the last row and columns past the last column,
// with the packed operands padded: every load of `e` is of X (the accumulator), one of the
// packed ones, or one at an offset that depends neither on the row nor on the column, and every
// op is safe on padding. Then the tails are tiles too, whose padding is never stored.
bool paddable(const LExpr* e, int x, const std::vector<LExprRef>& packed, int row, int col) {
  if (!e) return true;
  switch (e->kind) {
    case LExpr::Kind::kLocalLoad:
      return false;
    case LExpr::Kind::kLoad:
      if (e->node == x) return true;
      for (const LExprRef& p : packed) {
        if (same_expr(p.get(), e)) return true;
      }
      return !uses_var(e->offset.get(), row) && !uses_var(e->offset.get(), col);
    case LExpr::Kind::kOp:
      if (!safe_on_padding(e->op)) return false;
      for (const LExprRef& a : e->args) {
        if (!paddable(a.get(), x, packed, row, col)) return false;
      }
      return true;
    default:
      return true;
  }
}

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
    // A triangular loop (a `where u < t + 1` bound) runs as far as its row: rows run together in
    // a tile would need a loop of their own each. Such kernels are left as they are.
    if (has_triangular_loop(kernel_.body)) return false;
    int contractions = 0;
    for (const LStmtRef& s : top->body) contractions += s && match(*s, top->var) ? 1 : 0;
    if (contractions == 0 || kernel_.var_count + 9 > kMaxKernelVars ||
        kernel_.local_count + (kTileRows + 2 * static_cast<int>(kMaxPackedLoads)) * contractions > kMaxKernelLocals) {
      return false;
    }
    row_ = top->var;
    rows_ = top->extent;
    rows_value_ = top->extent_expr ? top->extent_expr : i64_const(rows_);
    // Rows over a size: the same rule, computed when the kernel runs; the packed rows are sized
    // for the most rows a step can have.
    step_ = top->extent_expr ? kMaxStepRows : step_rows(rows_);
    step_value_ = top->extent_expr ? step_rows(rows_value_) : i64_const(step_);
    step_var_ = kernel_.var_count++;
    r_ = kernel_.var_count++;
    tile_ = kernel_.var_count++;
    jb_ = kernel_.var_count++;
    jj_ = kernel_.var_count++;
    t_ = kernel_.var_count++;
    kb_ = kernel_.var_count++;
    kk_ = kernel_.var_count++;
    pr_ = kernel_.var_count++;
    std::vector<LStmtRef> body;
    for (const LStmtRef& s : top->body) jam(s, &body);
    if (top->extent_expr) {
      const LExprRef steps = i64_op(Op::kDiv, i64_op(Op::kAdd, rows_value_, i64_op(Op::kSub, step_value_, i64_const(1))), step_value_);
      kernel_.body = lfor(step_var_, steps, true, std::move(body));
    } else {
      kernel_.body = lfor(step_var_, (rows_ + step_ - 1) / step_, true, std::move(body));
    }
    return true;
  }

 private:
  // Whole tiles per step, as few steps as keep a step within kMaxStepRows, an even number of
  // them (the rows split evenly between 2 threads), and at least 2 when there are rows for 2
  // tiles.
  static int64_t step_rows(int64_t rows) {
    int64_t steps = std::max<int64_t>(2, (rows + kMaxStepRows - 1) / kMaxStepRows);
    steps += steps % 2;
    const int64_t per_step = (rows + steps - 1) / steps;
    return std::max(kTileRows, (per_step + kTileRows - 1) / kTileRows * kTileRows);
  }
  // The same of rows known when the kernel runs (at most kMaxStepRows, a multiple of 6).
  static LExprRef step_rows(const LExprRef& rows) {
    auto div = [](LExprRef a, int64_t b) { return i64_op(Op::kDiv, std::move(a), i64_const(b)); };
    auto plus = [](LExprRef a, int64_t b) { return i64_op(Op::kAdd, std::move(a), i64_const(b)); };
    const LExprRef at_most = div(plus(rows, kMaxStepRows - 1), kMaxStepRows);
    const LExprRef steps = i64_op(Op::kMul, div(plus(i64_op(Op::kMax, i64_const(2), at_most), 1), 2), i64_const(2));
    const LExprRef per_step = i64_op(Op::kDiv, i64_op(Op::kAdd, rows, i64_op(Op::kSub, steps, i64_const(1))), steps);
    return i64_op(Op::kMax, i64_const(kTileRows), i64_op(Op::kMul, div(plus(per_step, kTileRows - 1), kTileRows), i64_const(kTileRows)));
  }

  LExprRef step_first_row() const { return i64_op(Op::kMul, lvar(step_var_), step_value_); }
  LExprRef step_tiles() const { return i64_op(Op::kDiv, step_value_, i64_const(kTileRows)); }  // a constant when step_value_ is
  // Row r_ of the step.
  LExprRef step_row() const { return i64_op(Op::kAdd, step_first_row(), lvar(r_)); }
  // The first row of tile tile_ of the step, and its row `r`.
  LExprRef tile_first_row() const {
    return i64_op(Op::kAdd, step_first_row(), i64_op(Op::kMul, lvar(tile_), i64_const(kTileRows)));
  }
  LExprRef tile_row(const LExprRef& r) const { return i64_op(Op::kAdd, tile_first_row(), r); }

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
    return lfor(r_, step_value_, false,
                guarded(i64_op(Op::kLt, step_row(), rows_value_), {at_row(s, step_row())}));
  }

  // Appends what `s` of the parallel body becomes in a step.
  void jam(const LStmtRef& s, std::vector<LStmtRef>* out);

  class Product;

  Kernel& kernel_;
  int row_ = -1;
  int64_t rows_ = 0, step_ = 0;  // rows_: -1 for rows over a size; step_: the most rows of a step
  LExprRef step_value_;           // the rows of a step: a constant, or of sizes
  LExprRef rows_value_;           // the rows as an expression: a constant, or of sizes
  int step_var_ = -1, r_ = -1, tile_ = -1, jb_ = -1, jj_ = -1, t_ = -1, kb_ = -1, kk_ = -1, pr_ = -1;
};

// One contraction of the parallel body, tiled: its operands, how they are packed, and the
// statements of a step.
class Tiler::Product {
 public:
  Product(Tiler& t, const Contraction& c)
      : t_(t), k_(*c.k_loop), j_(*c.j_loop), st_(*c.store), type_(st_.value->type), cols_(tile_columns(type_)),
        ek_(extent_of(k_)), ej_(extent_of(j_)) {
    operand_loads(st_.value, st_.node, j_.var, t_.row_, false, &b_loads_);
    operand_loads(st_.value, st_.node, t_.row_, j_.var, false, &a_loads_);
    if (b_loads_.size() > kMaxPackedLoads) b_loads_.clear();
    if (a_loads_.size() > kMaxPackedLoads) a_loads_.clear();
    std::vector<LExprRef> packed = a_loads_;
    packed.insert(packed.end(), b_loads_.begin(), b_loads_.end());
    pad_ = paddable(st_.value.get(), st_.node, packed, t_.row_, j_.var);
    // A block of ks: as many as fill the panel (256 f32), split evenly over a known reduction.
    int64_t panel_bytes_per_k = 0;
    for (const LExprRef& l : b_loads_) panel_bytes_per_k += cols_ * static_cast<int64_t>(dtype_size(l->type));
    const int64_t max_block = std::max<int64_t>(1, kMaxPanelBytes / std::max<int64_t>(panel_bytes_per_k, 64));
    const int64_t blocks = (k_.extent + max_block - 1) / max_block;
    block_k_ = k_.extent_expr ? max_block : (k_.extent + blocks - 1) / blocks;
    for (size_t q = 0; q < b_loads_.size(); ++q) b_locals_.push_back(t_.kernel_.local_count++);
    for (size_t q = 0; q < a_loads_.size(); ++q) a_locals_.push_back(t_.kernel_.local_count++);
    for (int64_t r = 0; r < kTileRows; ++r) acc_.push_back(t_.kernel_.local_count++);
  }

  void emit(std::vector<LStmtRef>* out) {
    std::vector<LStmtRef> blocks;
    const LExprRef whole_blocks = i64_op(Op::kDiv, ek_, i64_const(block_k_));
    const LExprRef rest = i64_op(Op::kSub, ek_, i64_op(Op::kMul, whole_blocks, i64_const(block_k_)));
    if (!k_.extent_expr && k_.extent <= block_k_) {
      blocks.push_back(k_block(nullptr, ek_));
    } else {
      blocks.push_back(lfor(t_.kb_, whole_blocks, false,
                            {k_block(i64_op(Op::kMul, lvar(t_.kb_), i64_const(block_k_)), i64_const(block_k_))}));
      const LExprRef first = i64_op(Op::kMul, whole_blocks, i64_const(block_k_));
      if (!is_const(rest)) {
        blocks.push_back(lif(i64_op(Op::kGt, rest, i64_const(0)), {k_block(first, rest)}));
      } else if (rest->value != 0) {
        blocks.push_back(k_block(first, rest));
      }
    }
    // The panels outermost, so that they and the accumulators stay on the stack.
    LStmtRef nest = lblock(std::move(blocks));
    for (size_t q = a_locals_.size(); q-- > 0;) {
      const int64_t size = t_.step_ * block_k_;
      const int64_t elem = static_cast<int64_t>(dtype_size(a_loads_[q]->type));
      const int64_t declared = size * elem > kMaxStackRowBlockBytes ? std::max(size, kHeapBytes / elem) : size;
      nest = llocal_decl(a_locals_[q], a_loads_[q]->type, declared, {nest});
    }
    for (size_t q = b_locals_.size(); q-- > 0;) {
      nest = llocal_decl(b_locals_[q], b_loads_[q]->type, block_k_ * cols_, {nest});
    }
    // Over sizes: nothing runs (nothing is loaded) when the reduction or the columns are empty.
    if (k_.extent_expr || j_.extent_expr) {
      nest = lif(i64_op(Op::kGt, i64_op(Op::kMin, ek_, ej_), i64_const(0)), {nest});
    }
    out->push_back(nest);
    if (!pad_) untiled_tails(out);
  }

 private:
  LExprRef whole_cols() const { return i64_op(Op::kMul, i64_op(Op::kDiv, ej_, i64_const(cols_)), i64_const(cols_)); }
  LExprRef tail_cols() const { return i64_op(Op::kSub, ej_, whole_cols()); }
  // Rows past the last row occur in a step (the last one): guard them.
  bool partial_rows() const { return !t_.rows_known() || t_.rows_ % t_.step_ != 0; }
  LExprRef row_exists(const LExprRef& r) const { return i64_op(Op::kLt, t_.tile_row(r), t_.rows_value_); }
  // The tile's statements, only for tiles that exist (padded) or that are whole (not padded).
  std::vector<LStmtRef> tile_guard(std::vector<LStmtRef> stmts) const {
    if (!partial_rows()) return stmts;
    if (pad_) return {lif(row_exists(i64_const(0)), std::move(stmts))};
    return {lif(i64_op(Op::kLe, t_.tile_row(i64_const(kTileRows)), t_.rows_value_), std::move(stmts))};
  }
  // A padded tile's statement for its row `r`, only when that row exists (row 0 does: the tile
  // is guarded).
  LStmtRef row_guard(const LExprRef& r, LStmtRef s) const {
    if (!pad_ || !partial_rows() || (is_const(r) && r->value == 0)) return s;
    return lif(row_exists(r), {std::move(s)});
  }
  // k of a block starting at `first`.
  LExprRef k_at(const LExprRef& first) const { return first ? i64_op(Op::kAdd, first, lvar(t_.kk_)) : lvar(t_.kk_); }
  LExprRef b_slot(const LExprRef& jj) const {
    return i64_op(Op::kAdd, i64_op(Op::kMul, lvar(t_.kk_), i64_const(cols_)), jj);
  }
  LExprRef a_slot(const LExprRef& r) const {
    const LExprRef k_row = i64_op(Op::kAdd, i64_op(Op::kMul, lvar(t_.tile_), i64_const(block_k_)), lvar(t_.kk_));
    return i64_op(Op::kAdd, i64_op(Op::kMul, k_row, i64_const(kTileRows)), r);
  }

  // The row operands of the step's rows for ks [first, first + count).
  std::vector<LStmtRef> pack_rows(const LExprRef& first, const LExprRef& count) const {
    std::vector<LStmtRef> out;
    const LExprRef row = t_.tile_row(lvar(t_.pr_));
    for (size_t q = 0; q < a_loads_.size(); ++q) {
      LStmtRef copy = lfor(t_.kk_, count, false, {llocal_store(a_locals_[q], a_slot(lvar(t_.pr_)),
                                                               at(a_loads_[q], {{t_.row_, row}, {k_.var, k_at(first)}}))});
      out.push_back(lfor(t_.tile_, t_.step_tiles(), false,
                         tile_guard({lfor(t_.pr_, kTileRows, false, {row_guard(lvar(t_.pr_), copy)})})));
    }
    return out;
  }

  // The column operands of `n` columns from `col0` for ks [first, first + count), padded with
  // zeros to a whole tile.
  std::vector<LStmtRef> pack_columns(const LExprRef& first, const LExprRef& count, const LExprRef& col0,
                                     const LExprRef& n) const {
    std::vector<LStmtRef> out;
    const LExprRef col = i64_op(Op::kAdd, col0, lvar(t_.jj_));
    const LExprRef padding = i64_op(Op::kSub, i64_const(cols_), n);
    for (size_t q = 0; q < b_loads_.size(); ++q) {
      std::vector<LStmtRef> per_k = {lfor(t_.jj_, n, false, {llocal_store(
          b_locals_[q], b_slot(lvar(t_.jj_)), at(b_loads_[q], {{j_.var, col}, {k_.var, k_at(first)}}))})};
      if (!is_const(padding) || padding->value > 0) {
        per_k.push_back(lfor(t_.jj_, padding, false, {llocal_store(
            b_locals_[q], b_slot(i64_op(Op::kAdd, lvar(t_.jj_), n)), lconst(b_loads_[q]->type, 0))}));
      }
      out.push_back(lfor(t_.kk_, count, false, std::move(per_k)));
    }
    return out;
  }

  // The value for row r of the tile: X reads the accumulator, packed loads their local (matched
  // before the variables change, so that they compare equal to the originals).
  LExprRef value(int64_t r, const LExprRef& first, const LExprRef& col) const {
    const LExprRef from_locals = rewrite_expr(st_.value, [&](const LExprRef& x) {
      if (x->kind != LExpr::Kind::kLoad) return x;
      if (x->node == st_.node) return llocal_load(acc_[r], type_, lvar(t_.jj_));
      for (size_t q = 0; q < b_loads_.size(); ++q) {
        if (same_expr(x.get(), b_loads_[q].get())) return llocal_load(b_locals_[q], x->type, b_slot(lvar(t_.jj_)));
      }
      for (size_t q = 0; q < a_loads_.size(); ++q) {
        if (same_expr(x.get(), a_loads_[q].get())) return llocal_load(a_locals_[q], x->type, a_slot(i64_const(r)));
      }
      return x;
    });
    return at(from_locals, {{t_.row_, t_.tile_row(i64_const(r))}, {j_.var, col}, {k_.var, k_at(first)}});
  }

  // The step's tiles over `n` columns from `col0`: each row of a tile accumulates in its own
  // local acc[r] of W elements (one local per row rather than one array: GCC keeps all of them
  // in registers, where it leaves part of a 6 × W array in memory).
  LStmtRef tiles(const LExprRef& first, const LExprRef& count, const LExprRef& col0, const LExprRef& n) const {
    const LExprRef col = i64_op(Op::kAdd, col0, lvar(t_.jj_));
    auto element = [&](int64_t r) { return at(st_.offset, {{t_.row_, t_.tile_row(i64_const(r))}, {j_.var, col}}); };
    std::vector<LStmtRef> tile;
    for (int64_t r = 0; r < kTileRows; ++r) {
      tile.push_back(row_guard(i64_const(r), lfor(t_.jj_, n, false, {
          llocal_store(acc_[r], lvar(t_.jj_), lload(st_.node, type_, element(r)))})));
    }
    std::vector<LStmtRef> per_k;
    for (int64_t r = 0; r < kTileRows; ++r) {
      per_k.push_back(lfor(t_.jj_, cols_, false, {llocal_store(acc_[r], lvar(t_.jj_), value(r, first, col))}));
    }
    tile.push_back(lfor(t_.kk_, count, false, std::move(per_k)));
    for (int64_t r = 0; r < kTileRows; ++r) {
      tile.push_back(row_guard(i64_const(r), lfor(t_.jj_, n, false, {
          lstore(st_.node, element(r), llocal_load(acc_[r], type_, lvar(t_.jj_)))})));
    }
    LStmtRef tile_stmt = lblock(std::move(tile));
    for (int64_t r = kTileRows; r-- > 0;) tile_stmt = llocal_decl(acc_[r], type_, cols_, {tile_stmt});
    return lfor(t_.tile_, t_.step_tiles(), false, tile_guard({tile_stmt}));
  }

  // Ks [first, first + count): the step's rows packed, then per tile of columns, its columns
  // packed and the step's tiles run; with padding, the last columns too.
  LStmtRef k_block(const LExprRef& first, const LExprRef& count) const {
    std::vector<LStmtRef> out = pack_rows(first, count);
    const LExprRef col0 = i64_op(Op::kMul, lvar(t_.jb_), i64_const(cols_));
    const LExprRef whole = i64_const(cols_);
    std::vector<LStmtRef> panel = pack_columns(first, count, col0, whole);
    panel.push_back(tiles(first, count, col0, whole));
    out.push_back(lfor(t_.jb_, i64_op(Op::kDiv, ej_, i64_const(cols_)), false, std::move(panel)));
    const LExprRef tail = tail_cols();
    if (pad_ && (!is_const(tail) || tail->value != 0)) {
      std::vector<LStmtRef> last = pack_columns(first, count, whole_cols(), tail);
      last.push_back(tiles(first, count, whole_cols(), tail));
      if (is_const(tail)) {
        for (LStmtRef& s : last) out.push_back(std::move(s));
      } else {
        out.push_back(lif(i64_op(Op::kGt, tail, i64_const(0)), std::move(last)));
      }
    }
    return lblock(std::move(out));
  }

  // Without padding: the columns past the last whole tile, and the rows past the last whole
  // tile, run the original loops.
  void untiled_tails(std::vector<LStmtRef>* out) const {
    const LExprRef tail = tail_cols();
    if (!is_const(tail) || tail->value != 0) {
      const LExprRef col = i64_op(Op::kAdd, whole_cols(), lvar(t_.t_));
      out->push_back(t_.each_row(lfor(k_.var, ek_, false, {lfor(t_.t_, tail, false, {
          lstore(st_.node, at(st_.offset, {{j_.var, col}}), at(st_.value, {{j_.var, col}}))})})));
    }
    if (!t_.rows_known() || t_.rows_ % kTileRows != 0) {
      const LExprRef whole_rows =
          i64_op(Op::kMul, i64_op(Op::kDiv, t_.rows_value_, i64_const(kTileRows)), i64_const(kTileRows));
      LStmtRef nest = lfor(k_.var, ek_, false, {lfor(j_.var, whole_cols(), false, {j_.body[0]})});
      out->push_back(lfor(t_.r_, t_.step_value_, false, {lif(i64_op(Op::kGe, t_.step_row(), whole_rows),
          {lif(i64_op(Op::kLt, t_.step_row(), t_.rows_value_), {t_.at_row(nest, t_.step_row())})})}));
    }
  }

  Tiler& t_;
  const LStmt& k_;
  const LStmt& j_;
  const LStmt& st_;
  const DType type_;
  const int64_t cols_;
  const LExprRef ek_, ej_;  // the reduction's and the columns' extents: constants, or of sizes
  std::vector<LExprRef> a_loads_, b_loads_;  // row operands a[i, k], column operands b[k, j]
  std::vector<int> a_locals_, b_locals_, acc_;
  bool pad_ = false;
  int64_t block_k_ = 0;
};

void Tiler::jam(const LStmtRef& s, std::vector<LStmtRef>* out) {
  count_lowering_work(1);
  if (!s || s->kind == LStmt::Kind::kComment) {
    if (s) out->push_back(s);
    return;
  }
  std::optional<Contraction> c = match(*s, row_);
  if (!c) {
    out->push_back(each_row(s));
    return;
  }
  Product p(*this, *c);
  p.emit(out);
}

}  // namespace

bool tile_contractions(Kernel& kernel) { return Tiler(kernel).run(); }

}  // namespace kiln::ir
