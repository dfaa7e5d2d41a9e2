// Constructors of the loop IR. Its text form is in loop_text.cc.
#include "kiln/loop/loop.h"

#include "kiln/loop/op_eval.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::ir {

LExprRef lconst(DType type, double value) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kConst;
  e->type = type;
  e->value = value;
  return e;
}

LExprRef lvar(int var) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kVar;
  e->type = DType::kI64;
  e->var = var;
  return e;
}

LExprRef lsize(int size) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kSize;
  e->type = DType::kI64;
  e->size = size;
  return e;
}

LExprRef lload(int node, DType type, LExprRef offset) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kLoad;
  e->type = type;
  e->node = node;
  e->offset = std::move(offset);
  return e;
}

LExprRef llocal_load(int local, DType type, LExprRef offset) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kLocalLoad;
  e->type = type;
  e->local = local;
  e->offset = std::move(offset);
  return e;
}

LExprRef lop(Op op, DType type, std::vector<LExprRef> args) {
  auto e = std::make_shared<LExpr>();
  e->kind = LExpr::Kind::kOp;
  e->type = type;
  e->op = op;
  e->args = std::move(args);
  return e;
}

namespace {
std::shared_ptr<LStmt> statement(LStmt::Kind kind) {
  auto s = std::make_shared<LStmt>();
  s->kind = kind;
  return s;
}
}  // namespace

LStmtRef lblock(std::vector<LStmtRef> body) {
  auto s = statement(LStmt::Kind::kBlock);
  s->body = std::move(body);
  return s;
}

LStmtRef lfor(int var, int64_t extent, bool parallel, std::vector<LStmtRef> body) {
  auto s = statement(LStmt::Kind::kFor);
  s->var = var;
  s->extent = extent;
  s->parallel = parallel;
  s->body = std::move(body);
  return s;
}

LStmtRef lfor(int var, const LExprRef& extent, bool parallel, std::vector<LStmtRef> body) {
  if (extent->kind == LExpr::Kind::kConst) {
    return lfor(var, static_cast<int64_t>(extent->value), parallel, std::move(body));
  }
  auto s = statement(LStmt::Kind::kFor);
  s->var = var;
  s->extent = -1;
  s->extent_expr = extent;
  s->parallel = parallel;
  s->body = std::move(body);
  return s;
}

LStmtRef lif(LExprRef cond, std::vector<LStmtRef> body) {
  auto s = statement(LStmt::Kind::kIf);
  s->cond = std::move(cond);
  s->body = std::move(body);
  return s;
}

LStmtRef lstore(int node, LExprRef offset, LExprRef value) {
  auto s = statement(LStmt::Kind::kStore);
  s->node = node;
  s->type = value->type;
  s->offset = std::move(offset);
  s->value = std::move(value);
  return s;
}

LStmtRef llocal_decl(int local, DType type, int64_t size, std::vector<LStmtRef> body) {
  auto s = statement(LStmt::Kind::kLocalDecl);
  s->local = local;
  s->type = type;
  s->local_size = size;
  s->body = std::move(body);
  return s;
}

LStmtRef llocal_store(int local, LExprRef offset, LExprRef value) {
  auto s = statement(LStmt::Kind::kLocalStore);
  s->local = local;
  s->type = value->type;
  s->offset = std::move(offset);
  s->value = std::move(value);
  return s;
}

LStmtRef lcomment(std::string text) {
  auto s = statement(LStmt::Kind::kComment);
  s->text = std::move(text);
  return s;
}

LStmtRef ltrace(int site, int64_t limit, LExprRef run, std::vector<LExprRef> values) {
  auto s = statement(LStmt::Kind::kTrace);
  s->site = site;
  s->extent = limit;
  s->value = std::move(run);
  s->values = std::move(values);
  return s;
}

LStmtRef lfail(int site, std::string text, LExprRef value) {
  auto s = statement(LStmt::Kind::kFail);
  s->site = site;
  s->text = std::move(text);
  s->value = std::move(value);
  return s;
}

namespace {

void collect_failures(const LStmtRef& s, std::vector<std::string>& messages) {
  if (!s) return;
  if (s->kind == LStmt::Kind::kFail && s->site >= 0) {
    if (messages.size() <= static_cast<size_t>(s->site)) messages.resize(static_cast<size_t>(s->site) + 1);
    messages[static_cast<size_t>(s->site)] = s->text;
  }
  for (const LStmtRef& child : s->body) collect_failures(child, messages);
}

bool reads_var(const LExpr* e) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kVar) return true;
  if (reads_var(e->offset.get())) return true;
  for (const LExprRef& a : e->args) {
    if (reads_var(a.get())) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> failure_messages(const Kernel& kernel) {
  std::vector<std::string> messages;
  collect_failures(kernel.body, messages);
  return messages;
}

bool is_triangular(const LStmt& loop) { return loop.kind == LStmt::Kind::kFor && reads_var(loop.extent_expr.get()); }

bool has_triangular_loop(const LStmtRef& s) {
  if (!s) return false;
  if (is_triangular(*s)) return true;
  for (const LStmtRef& child : s->body) {
    if (has_triangular_loop(child)) return true;
  }
  return false;
}

bool same_expr(const LExpr* a, const LExpr* b) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (a->kind != b->kind || a->type != b->type) return false;
  switch (a->kind) {
    case LExpr::Kind::kConst:
      if (std::isnan(a->value) || std::isnan(b->value)) {
        return std::isnan(a->value) && std::isnan(b->value);
      }
      return std::memcmp(&a->value, &b->value, sizeof(double)) == 0;
    case LExpr::Kind::kVar:
      return a->var == b->var;
    case LExpr::Kind::kSize:
      return a->size == b->size;
    case LExpr::Kind::kLoad:
      return a->node == b->node && same_expr(a->offset.get(), b->offset.get());
    case LExpr::Kind::kLocalLoad:
      return a->local == b->local && same_expr(a->offset.get(), b->offset.get());
    case LExpr::Kind::kOp:
      if (a->op != b->op || a->args.size() != b->args.size()) return false;
      for (size_t i = 0; i < a->args.size(); ++i) {
        if (!same_expr(a->args[i].get(), b->args[i].get())) return false;
      }
      return true;
  }
  return false;
}

bool uses_var(const LExpr* e, int var) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kVar) return e->var == var;
  if (uses_var(e->offset.get(), var)) return true;
  for (const LExprRef& a : e->args) {
    if (uses_var(a.get(), var)) return true;
  }
  return false;
}


bool loads(const LExpr* e, int local) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kLoad && local == kAnything) return true;
  if (e->kind == LExpr::Kind::kLocalLoad && (local == kAnything || e->local == local)) return true;
  if (loads(e->offset.get(), local)) return true;
  for (const LExprRef& a : e->args) {
    if (loads(a.get(), local)) return true;
  }
  return false;
}

std::optional<int64_t> var_coefficient(const LExpr& e, int var) {
  if (!uses_var(&e, var)) return 0;
  if (e.kind == LExpr::Kind::kVar) return 1;
  if (e.kind != LExpr::Kind::kOp || e.type != DType::kI64) return {};
  if (e.op == Op::kNeg) {
    std::optional<int64_t> c = var_coefficient(*e.args[0], var);
    int64_t negated = 0;
    if (!c || __builtin_sub_overflow(int64_t{0}, *c, &negated)) return {};
    return negated;
  }
  if (e.op == Op::kAdd || e.op == Op::kSub) {
    std::optional<int64_t> a = var_coefficient(*e.args[0], var), b = var_coefficient(*e.args[1], var);
    int64_t sum = 0;
    if (!a || !b || (e.op == Op::kAdd ? __builtin_add_overflow(*a, *b, &sum) : __builtin_sub_overflow(*a, *b, &sum))) {
      return {};
    }
    return sum;
  }
  if (e.op == Op::kMul) {
    for (int side = 0; side < 2; ++side) {
      const LExpr& k = *e.args[side];
      if (k.kind != LExpr::Kind::kConst) continue;
      std::optional<int64_t> c = var_coefficient(*e.args[1 - side], var);
      int64_t product = 0;
      // i64 constants hold integers; beyond 2^53 a double may not convert exactly.
      if (!c || !(std::abs(k.value) <= 9007199254740992.0) ||
          __builtin_mul_overflow(static_cast<int64_t>(k.value), *c, &product)) {
        return {};
      }
      return product;
    }
  }
  return {};
}

}  // namespace kiln::ir

namespace kiln::ir {

namespace {

void collect_access(const LExprRef& e, std::vector<int>& read) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kLoad) read.push_back(e->node);
  collect_access(e->offset, read);
  for (const LExprRef& a : e->args) collect_access(a, read);
}

void collect_access(const LStmtRef& s, NodeAccess& access) {
  if (!s) return;
  if (s->kind == LStmt::Kind::kStore) access.written.push_back(s->node);
  collect_access(s->cond, access.read);
  collect_access(s->offset, access.read);
  collect_access(s->value, access.read);
  for (const LExprRef& v : s->values) collect_access(v, access.read);
  for (const LStmtRef& child : s->body) collect_access(child, access);
}

void sort_unique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::vector<uint32_t> size_constants(const std::vector<int64_t>& values) {
  std::vector<uint32_t> constants;
  for (int64_t v : values) {
    const uint64_t u = static_cast<uint64_t>(v);
    constants.push_back(static_cast<uint32_t>(u));
    constants.push_back(static_cast<uint32_t>(u >> 32));
  }
  return constants;
}

std::optional<int64_t> evaluate_extent(const LExpr& e, const std::vector<int64_t>& values) {
  switch (e.kind) {
    case LExpr::Kind::kConst:
      return static_cast<int64_t>(e.value);
    case LExpr::Kind::kSize:
      if (e.size < 0 || static_cast<size_t>(e.size) >= values.size()) return std::nullopt;
      return values[static_cast<size_t>(e.size)];
    case LExpr::Kind::kOp: {
      if (e.type != DType::kI64 || e.op == Op::kSelect) return std::nullopt;
      std::vector<Scalar> args;
      std::vector<DType> types;
      for (const LExprRef& a : e.args) {
        std::optional<int64_t> v = evaluate_extent(*a, values);
        if (!v || a->type != DType::kI64) return std::nullopt;
        args.push_back(Scalar{0, *v});
        types.push_back(DType::kI64);
      }
      return eval_op(e.op, DType::kI64, types, args).i;
    }
    default:
      return std::nullopt;
  }
}

namespace {

// `e` with the sizes' values in place of the sizes.
LExprRef with_size_values(const LExprRef& e, const std::vector<int64_t>& values) {
  if (!e) return e;
  if (e->kind == LExpr::Kind::kSize && e->size >= 0 && static_cast<size_t>(e->size) < values.size()) {
    return lconst(DType::kI64, static_cast<double>(values[static_cast<size_t>(e->size)]));
  }
  if (e->args.empty()) return e;
  auto copy = std::make_shared<LExpr>(*e);
  for (LExprRef& a : copy->args) a = with_size_values(a, values);
  return copy;
}

LStmtRef statement_at_sizes(const LStmtRef& s, const std::vector<int64_t>& values) {
  if (!s) return s;
  bool changed = false;
  std::vector<LStmtRef> body;
  for (const LStmtRef& child : s->body) {
    body.push_back(statement_at_sizes(child, values));
    changed = changed || body.back() != child;
  }
  if (!changed && !s->extent_expr) return s;
  auto copy = std::make_shared<LStmt>(*s);
  copy->body = std::move(body);
  if (is_triangular(*s)) {
    copy->extent_expr = with_size_values(s->extent_expr, values);  // still read the loops' variables
  } else if (s->extent_expr) {
    copy->extent = std::max<int64_t>(0, evaluate_extent(*s->extent_expr, values).value_or(0));
    copy->extent_expr = nullptr;
  }
  return copy;
}

}  // namespace

Kernel kernel_at_sizes(const Kernel& kernel, const std::vector<int64_t>& values) {
  Kernel k = kernel;
  k.body = statement_at_sizes(kernel.body, values);
  return k;
}

namespace {

void collect_sizes(const LExpr* e, std::set<int>& sizes) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kSize) sizes.insert(e->size);
  collect_sizes(e->offset.get(), sizes);
  for (const LExprRef& a : e->args) collect_sizes(a.get(), sizes);
}

void collect_sizes(const LStmt* s, std::set<int>& sizes) {
  if (!s) return;
  for (const LExpr* e : {s->extent_expr.get(), s->cond.get(), s->offset.get(), s->value.get()}) collect_sizes(e, sizes);
  for (const LExprRef& v : s->values) collect_sizes(v.get(), sizes);
  for (const LStmtRef& child : s->body) collect_sizes(child.get(), sizes);
}

}  // namespace

std::set<int> sizes_read(const Kernel& kernel) {
  std::set<int> sizes;
  collect_sizes(kernel.body.get(), sizes);
  return sizes;
}

NodeAccess node_access(const Kernel& kernel) {
  NodeAccess access;
  collect_access(kernel.body, access);
  sort_unique(access.read);
  sort_unique(access.written);
  return access;
}

}  // namespace kiln::ir
