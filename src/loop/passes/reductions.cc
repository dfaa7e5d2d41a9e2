// Reductions split into lanes: a loop that folds one value into an accumulator, sequentially,
// becomes K independent accumulators (a local array the C compiler keeps in vector registers)
// combined pairwise at the end. See split_reductions in kiln/loop/optimize.h.
#include <optional>
#include <vector>

#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"
#include "loop/work_count.h"

namespace kiln::ir {

namespace {

using internal::i64_const;
using internal::rewrite_expr;
using internal::with_body;

// 32 lanes of 4 bytes or 16 of 8: four 256-bit vectors of accumulators, enough independent
// additions in flight to hide the adder's latency. Narrower types get 32 too (f16 and bf16 are
// computed in f32; 1- and 2-byte integers fill fewer vectors, which costs nothing).
int64_t lanes_of(DType t) { return dtype_size(t) == 8 ? 16 : 32; }

// `for v in [0, N): acc = op(acc, x(v))` (or op(x(v), acc)), acc a fixed element of a local.
struct Reduction {
  int local;
  LExprRef offset;   // of the accumulator, independent of v
  Op op;
  DType type;
  LExprRef operand;  // x(v)
  bool acc_first;
};

std::optional<Reduction> match(const LStmt& loop, bool reassociate_floats) {
  if (loop.kind != LStmt::Kind::kFor || loop.parallel || loop.body.size() != 1) return {};
  const LStmt* s = loop.body[0].get();
  if (!s || s->kind != LStmt::Kind::kLocalStore || !s->value || !s->offset) return {};
  const LExpr& v = *s->value;
  if (v.kind != LExpr::Kind::kOp || v.args.size() != 2) return {};
  if (v.op != Op::kAdd && v.op != Op::kMul && v.op != Op::kMax && v.op != Op::kMin) return {};
  // Integer arithmetic wraps (and bool's + and * are or and and), so any order gives the same
  // bits; floats only when allowed.
  if (is_float_type(v.type) && !reassociate_floats) return {};
  if (v.type != s->type || v.args[0]->type != v.type || v.args[1]->type != v.type) return {};
  // A loop over a size is split too, behind a check of its extent when it runs (split()).
  if (!loop.extent_expr && loop.extent < 2 * lanes_of(v.type)) return {};
  if (uses_var(s->offset.get(), loop.var) || loads(s->offset.get(), kAnything)) return {};
  for (int acc = 0; acc < 2; ++acc) {
    const LExpr& a = *v.args[acc];
    if (a.kind != LExpr::Kind::kLocalLoad || a.local != s->local) continue;
    if (!same_expr(a.offset.get(), s->offset.get())) continue;
    const LExprRef& x = v.args[1 - acc];
    if (loads(x.get(), s->local)) return {};
    return Reduction{s->local, s->offset, v.op, v.type, x, acc == 0};
  }
  return {};
}

class Splitter {
 public:
  Splitter(Kernel& kernel, bool reassociate_floats)
      : kernel_(kernel), floats_(reassociate_floats) {}

  void run() {
    if (kernel_.body) kernel_.body = statement(kernel_.body);
  }

 private:
  LStmtRef statement(const LStmtRef& s) {
    if (!s) return s;
    count_lowering_work(1);
    if (std::optional<Reduction> r = match(*s, floats_)) {
      if (kernel_.var_count + 3 <= kMaxKernelVars && kernel_.local_count < kMaxKernelLocals) {
        return split(*s, *r);
      }
    }
    std::vector<LStmtRef> body;
    body.reserve(s->body.size());
    for (const LStmtRef& child : s->body) body.push_back(statement(child));
    return with_body(s, std::move(body));
  }

  LExprRef combine(const Reduction& r, LExprRef a, LExprRef b) const {
    return r.acc_first ? lop(r.op, r.type, {std::move(a), std::move(b)})
                       : lop(r.op, r.type, {std::move(b), std::move(a)});
  }

  // x(v) with v replaced by `index`.
  static LExprRef at(const Reduction& r, int var, const LExprRef& index) {
    return rewrite_expr(r.operand, [&](const LExprRef& e) {
      return e->kind == LExpr::Kind::kVar && e->var == var ? index : e;
    });
  }

  // (local lanes T K
  //   (for u K (local_store lanes u x(u)))
  //   (for w N/K-1 (for u K (local_store lanes u (op lanes[u] x((w + 1) * K + u)))))
  //   (for t N%K (local_store acc (op acc x(N/K*K + t))))
  //   (local_store acc (op acc (lanes[0] op lanes[1]) op ... pairwise)))
  LStmtRef split(const LStmt& loop, const Reduction& r) {
    const int64_t k = lanes_of(r.type);
    // Over a size: the split form where the extent reaches 2K when the kernel runs, the loop as
    // it was below that.
    const LExprRef n = loop.extent_expr ? loop.extent_expr : i64_const(loop.extent);
    // Arithmetic of known extents folded, so that their loops keep known extents.
    auto fold = [](LExprRef e) {
      std::optional<int64_t> v = evaluate_extent(*e, {});
      return v ? i64_const(*v) : e;
    };
    const int lanes = kernel_.local_count++;
    const int w = kernel_.var_count++, u = kernel_.var_count++, t = kernel_.var_count++;
    auto lane = [&](LExprRef index) { return llocal_load(lanes, r.type, std::move(index)); };
    auto i64 = [](Op op, LExprRef a, LExprRef b) {
      return lop(op, DType::kI64, {std::move(a), std::move(b)});
    };
    std::vector<LStmtRef> body;
    body.push_back(lfor(u, k, false, {llocal_store(lanes, lvar(u), at(r, loop.var, lvar(u)))}));
    const LExprRef index =
        i64(Op::kAdd, i64(Op::kMul, i64(Op::kAdd, lvar(w), i64_const(1)), i64_const(k)), lvar(u));
    const LExprRef whole = fold(i64(Op::kDiv, n, i64_const(k)));  // N/K
    body.push_back(lfor(w, fold(i64(Op::kSub, whole, i64_const(1))), false,
                        {lfor(u, k, false,
                              {llocal_store(lanes, lvar(u),
                                            combine(r, lane(lvar(u)), at(r, loop.var, index)))})}));
    const LExprRef acc = llocal_load(r.local, r.type, r.offset);
    const LExprRef base = fold(i64(Op::kMul, whole, i64_const(k)));  // N/K*K
    const LExprRef rest = fold(i64(Op::kSub, n, base));               // N%K
    if (!(rest->kind == LExpr::Kind::kConst && rest->value == 0)) {
      const LExprRef tail = i64(Op::kAdd, base, lvar(t));
      body.push_back(lfor(t, rest, false,
                          {llocal_store(r.local, r.offset, combine(r, acc, at(r, loop.var, tail)))}));
    }
    std::vector<LExprRef> level;
    for (int64_t i = 0; i < k; ++i) level.push_back(lane(i64_const(i)));
    while (level.size() > 1) {
      std::vector<LExprRef> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        next.push_back(lop(r.op, r.type, {level[i], level[i + 1]}));
      }
      if (level.size() % 2 != 0) next.push_back(level.back());
      level = std::move(next);
    }
    body.push_back(llocal_store(r.local, r.offset, combine(r, acc, level[0])));
    LStmtRef split = llocal_decl(lanes, r.type, k, std::move(body));
    if (!loop.extent_expr) return split;
    const LExprRef enough = i64(Op::kGe, n, i64_const(2 * k));
    const LStmtRef original = std::make_shared<LStmt>(loop);
    return lblock({lif(enough, {split}), lif(i64(Op::kLt, n, i64_const(2 * k)), {original})});
  }

  Kernel& kernel_;
  bool floats_;
};

}  // namespace

void split_reductions(Kernel& kernel, bool reassociate_floats) {
  Splitter(kernel, reassociate_floats).run();
}

}  // namespace kiln::ir
