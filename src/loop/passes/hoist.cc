// Loop-invariant code motion: an expression that every iteration of a loop computes the same
// way is computed once before it, into a size-1 local. Loops are visited outermost first, so an
// expression invariant in several nested loops goes straight before the outermost of them.
#include <algorithm>
#include <set>
#include <vector>

#include "kiln/loop/optimize.h"
#include "loop/passes/optimize_internal.h"
#include "loop/work_count.h"

namespace kiln::ir {

namespace {

using internal::i64_const;
using internal::with_body;
using internal::with_parts;

// Ops worth a local even without a load: a call or a division.
bool is_costly(const LExpr& e) {
  switch (e.op) {
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kSin:
    case Op::kCos:
    case Op::kErf:
    case Op::kPow:
      return true;
    case Op::kDiv:
      return is_float_type(e.type);
    default:
      return false;
  }
}

// What the statements of one loop bind and write; an expression depending on any of it varies.
struct LoopWrites {
  std::set<int> vars;    // the loop's variable and those of loops nested in it
  std::set<int> nodes;   // nodes stored
  std::set<int> locals;  // locals stored or declared
};

void collect(const LStmt& s, LoopWrites* w) {
  switch (s.kind) {
    case LStmt::Kind::kFor: w->vars.insert(s.var); break;
    case LStmt::Kind::kStore: w->nodes.insert(s.node); break;
    case LStmt::Kind::kLocalStore:
    case LStmt::Kind::kLocalDecl: w->locals.insert(s.local); break;
    default: break;
  }
  for (const LStmtRef& child : s.body) {
    if (child) collect(*child, w);
  }
}

// Whether the body of `s` runs whenever `s` does (not an `if`, nor a loop that may run zero times).
bool body_runs_with(const LStmt& s) {
  return s.kind == LStmt::Kind::kBlock || s.kind == LStmt::Kind::kLocalDecl || (s.kind == LStmt::Kind::kFor && s.extent >= 1);
}

// Whether argument i of `e` is evaluated whenever `e` is: select evaluates only the operand it picks.
bool argument_always_evaluated(const LExpr& e, size_t i) { return !(e.op == Op::kSelect && i > 0); }

struct ExprFacts {
  bool invariant = true;  // the same value on every iteration
  bool loads = false;     // loads a node or a local (which the reference checks)
  bool worth = false;     // contains a node load or a costly op
};

ExprFacts facts_of(const LExpr* e, const LoopWrites& w) {
  ExprFacts f;
  if (!e) {
    f.invariant = false;  // malformed: never moved
    return f;
  }
  switch (e->kind) {
    case LExpr::Kind::kConst:
    case LExpr::Kind::kSize:
      return f;
    case LExpr::Kind::kVar:
      f.invariant = !w.vars.count(e->var);
      return f;
    case LExpr::Kind::kLoad:
      f = facts_of(e->offset.get(), w);
      f.invariant = f.invariant && !w.nodes.count(e->node);
      f.loads = f.worth = true;
      return f;
    case LExpr::Kind::kLocalLoad:
      f = facts_of(e->offset.get(), w);
      f.invariant = f.invariant && !w.locals.count(e->local);
      f.loads = true;  // as cheap as the local it would be copied into: not worth by itself
      return f;
    case LExpr::Kind::kOp:
      for (const LExprRef& arg : e->args) {
        const ExprFacts a = facts_of(arg.get(), w);
        f.invariant = f.invariant && a.invariant;
        f.loads = f.loads || a.loads;
        f.worth = f.worth || a.worth;
      }
      f.worth = f.worth || is_costly(*e);
      return f;
  }
  f.invariant = false;
  return f;
}

class Hoister {
 public:
  explicit Hoister(Kernel& kernel) : kernel_(kernel) {}

  void run() {
    const LStmtRef& body = kernel_.body;
    if (!body) return;
    if (body->kind == LStmt::Kind::kFor && body->parallel) {
      // Hoisting out of the top parallel loop would make the body a local declaration, which
      // the dispatch convention runs in one workgroup: only its inner loops are optimized.
      kernel_.body = with_body(body, statements(body->body));
    } else {
      kernel_.body = statement(body);
    }
  }

 private:
  // One value computed before the loop being optimized.
  struct Hoisted {
    LExprRef expr;
    int local;
  };

  std::vector<LStmtRef> statements(const std::vector<LStmtRef>& body) {
    std::vector<LStmtRef> out;
    out.reserve(body.size());
    for (const LStmtRef& s : body) out.push_back(statement(s));
    return out;
  }

  LStmtRef statement(const LStmtRef& s) {
    if (!s) return s;
    if (s->kind != LStmt::Kind::kFor || s->extent < 2) return with_body(s, statements(s->body));
    // This loop first, then the loops inside it (which no longer see what moved out).
    writes_ = LoopWrites();
    collect(*s, &writes_);
    hoisted_.clear();
    safe_loads_.clear();
    for (const LStmtRef& child : s->body) collect_safe_loads(child, true);
    std::vector<LStmtRef> body;
    body.reserve(s->body.size());
    for (const LStmtRef& child : s->body) body.push_back(in_loop(child, true));
    std::vector<Hoisted> hoisted = std::move(hoisted_);
    hoisted_.clear();
    LStmtRef out = with_body(s, statements(body));
    for (size_t i = hoisted.size(); i-- > 0;) {
      const Hoisted& h = hoisted[i];
      out = llocal_decl(h.local, h.expr->type, 1,
                        {llocal_store(h.local, i64_const(0), h.expr), std::move(out)});
    }
    return out;
  }

  // A statement of the loop's body with its invariant expressions replaced; `always` says
  // whether it runs on every iteration of the loop.
  LStmtRef in_loop(const LStmtRef& s, bool always) {
    if (!s) return s;
    std::vector<LStmtRef> body;
    body.reserve(s->body.size());
    const bool body_always = always && body_runs_with(*s);
    for (const LStmtRef& child : s->body) body.push_back(in_loop(child, body_always));
    LExprRef cond = in_loop(s->cond, always);
    LExprRef offset = in_loop(s->offset, always);
    LExprRef value = in_loop(s->value, always);
    if (auto copy = with_parts(s, std::move(body), std::move(cond), std::move(offset),
                               std::move(value))) {
      return copy;
    }
    return s;
  }

  LExprRef in_loop(const LExprRef& e, bool always) {
    if (!e || e->kind == LExpr::Kind::kConst || e->kind == LExpr::Kind::kVar || e->kind == LExpr::Kind::kSize) return e;
    count_lowering_work(1);
    const ExprFacts f = facts_of(e.get(), writes_);
    if (f.invariant && f.worth && (always || !f.loads || loads_are_safe(*e))) {
      if (LExprRef local = hoist(e)) return local;
    } else if (f.invariant && f.worth) {
      // Computed before the loop already (a gather's range check, which its clamped offset repeats).
      if (LExprRef local = hoisted_load(e)) return local;
    }
    // Not moved as a whole: perhaps parts of it. Select evaluates only the operand it picks.
    LExprRef offset = in_loop(e->offset, always);
    std::vector<LExprRef> args;
    args.reserve(e->args.size());
    bool changed = offset != e->offset;
    for (size_t i = 0; i < e->args.size(); ++i) {
      args.push_back(in_loop(e->args[i], always && argument_always_evaluated(*e, i)));
      changed = changed || args.back() != e->args[i];
    }
    if (!changed) return e;
    auto copy = std::make_shared<LExpr>(*e);
    copy->offset = std::move(offset);
    copy->args = std::move(args);
    return copy;
  }

  // A load of the local that holds `e` (one local per distinct expression), or null when no
  // local number is left.
  LExprRef hoist(const LExprRef& e) {
    if (LExprRef local = hoisted_load(e)) return local;
    if (kernel_.local_count >= kMaxKernelLocals) return nullptr;
    const int local = kernel_.local_count++;
    hoisted_.push_back({e, local});
    return llocal_load(local, e->type, i64_const(0));
  }

  // The loads every iteration of the loop evaluates (outside select's branches and conditional
  // statements): moving one before the loop reads nothing the loop would not. A gather's
  // position is one (its range check reads it), so the row it reads starts before the loop too.
  void collect_safe_loads(const LStmtRef& s, bool always) {
    if (!s) return;
    for (const LStmtRef& child : s->body) collect_safe_loads(child, always && body_runs_with(*s));
    for (const LExprRef& e : {s->cond, s->offset, s->value}) collect_safe_loads(e, always);
  }
  void collect_safe_loads(const LExprRef& e, bool always) {
    if (!e || !always) return;
    count_lowering_work(1);
    if (e->kind == LExpr::Kind::kLoad && facts_of(e.get(), writes_).invariant) safe_loads_.push_back(e);
    collect_safe_loads(e->offset, always);
    for (size_t i = 0; i < e->args.size(); ++i) collect_safe_loads(e->args[i], argument_always_evaluated(*e, i));
  }
  // Whether every load in `e` is one the loop evaluates anyway.
  bool loads_are_safe(const LExpr& e) const {
    if (e.kind == LExpr::Kind::kLocalLoad) return false;
    if (e.kind == LExpr::Kind::kLoad) {
      return std::any_of(safe_loads_.begin(), safe_loads_.end(),
                         [&](const LExprRef& safe) { return same_expr(safe.get(), &e); });
    }
    if (e.offset && !loads_are_safe(*e.offset)) return false;
    return std::all_of(e.args.begin(), e.args.end(), [&](const LExprRef& a) { return !a || loads_are_safe(*a); });
  }

  // A load of the local that already holds `e`, or null.
  LExprRef hoisted_load(const LExprRef& e) {
    for (const Hoisted& h : hoisted_) {
      count_lowering_work(1);
      if (same_expr(h.expr.get(), e.get())) return llocal_load(h.local, e->type, i64_const(0));
    }
    return nullptr;
  }

  Kernel& kernel_;
  LoopWrites writes_;             // of the loop being optimized
  std::vector<Hoisted> hoisted_;  // out of it
  std::vector<LExprRef> safe_loads_;  // of it (collect_safe_loads)
};

}  // namespace

void hoist_invariants(Kernel& kernel) { Hoister(kernel).run(); }

}  // namespace kiln::ir
