// Small inner loops written with GCC/Clang vector extensions (dialects with vector_bytes() > 0:
// C). GCC vectorizes most loops by itself, but in the register tiles of products
// (tile_contractions in kiln/loop/optimize.h) its SLP vectorizer loads each broadcast scalar as
// a whole 32-byte vector, often across two cache lines, which costs a third of the product's
// speed; written as vector operations on a scalar, the broadcast comes straight from memory.
//
// A loop qualifies when it is a `for v in [0, E)` (not the split parallel loop) whose body is
// one store (to a node or a local) of an f32/f64 value, E a multiple of the lane count (8 f32,
// 4 f64) and at most kMaxVectorLoopExtent, and:
//  - the store's offset and every load that depends on v is affine in v with coefficient 1
//    (consecutive iterations touch consecutive elements) and loads nothing itself;
//  - the value is an operation (not a plain copy), built from + - * and fma of the store's type
//    over such loads and over subexpressions that do not depend on v (computed once per
//    vector, as scalars);
//  - the stored node or local is read only at the store's own offset (so no iteration reads
//    what another writes).
// Then iterations v .. v + lanes - 1 run as one vector operation, which computes the same
// values: the same IEEE operations lane by lane (fma may round once or twice, as the loop IR
// allows).
#include "codegen/kernel_emitter.h"

namespace kiln::codegen::internal {

namespace {

// Longer loops are left to the C compiler, which vectorizes them well and unrolls them.
constexpr int64_t kMaxVectorLoopExtent = 64;

bool targets(const LExpr& e, const StoreTarget& t) {
  return t.node ? e.kind == LExpr::Kind::kLoad && e.node == t.id
                : e.kind == LExpr::Kind::kLocalLoad && e.local == t.id;
}

// `e` reads the target anywhere.
bool reads_target(const LExpr* e, const StoreTarget& t) {
  if (!e) return false;
  if (targets(*e, t)) return true;
  if (reads_target(e->offset.get(), t)) return true;
  for (const LExprRef& a : e->args) {
    if (reads_target(a.get(), t)) return true;
  }
  return false;
}

bool vectorizable(const LExpr& e, int var, DType type, const StoreTarget& t) {
  if (e.type != type) return false;
  if (!ir::uses_var(&e, var)) return !reads_target(&e, t);
  switch (e.kind) {
    case LExpr::Kind::kLoad:
    case LExpr::Kind::kLocalLoad:
      if (!unit_stride(e.offset.get(), var)) return false;
      return !targets(e, t) || ir::same_expr(e.offset.get(), t.offset);
    case LExpr::Kind::kOp:
      if (e.op != Op::kAdd && e.op != Op::kSub && e.op != Op::kMul && e.op != Op::kFma) return false;
      for (const LExprRef& a : e.args) {
        if (!vectorizable(*a, var, type, t)) return false;
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

bool unit_stride(const LExpr* offset, int var) {
  if (!offset || ir::loads(offset, ir::kAnything)) return false;
  const std::optional<int64_t> c = ir::var_coefficient(*offset, var);
  return c && *c == 1;
}

Result<std::string> KernelEmitter::vector_expr(const LExprRef& e, int var) {
  if (!ir::uses_var(e.get(), var)) {
    // A scalar: C's vector extensions broadcast it in an operation with a vector.
    KILN_ASSIGN_OR_RETURN(Code scalar, expr(e));
    return "(" + scalar.text + ")";
  }
  if (e->kind == LExpr::Kind::kLoad || e->kind == LExpr::Kind::kLocalLoad) {
    KILN_ASSIGN_OR_RETURN(Code element, expr(e));  // checks the local's scope and type
    return helper("vld", e->type) + "(&" + element.text + ")";
  }
  std::vector<std::string> args;
  for (const LExprRef& a : e->args) {
    KILN_ASSIGN_OR_RETURN(std::string arg, vector_expr(a, var));
    args.push_back(std::move(arg));
  }
  switch (e->op) {
    case Op::kAdd: return "(" + args[0] + " + " + args[1] + ")";
    case Op::kSub: return "(" + args[0] + " - " + args[1] + ")";
    case Op::kMul: return "(" + args[0] + " * " + args[1] + ")";
    default: return "(" + args[0] + " * " + args[1] + " + " + args[2] + ")";  // kFma
  }
}

Result<bool> KernelEmitter::vector_loop(const LStmt& loop, Printer& out) {
  const int bytes = d_.vector_bytes();
  if (bytes <= 0 || loop.parallel || loop.body.size() != 1 || !loop.body[0]) return false;
  const LStmt& st = *loop.body[0];
  if ((st.kind != LStmt::Kind::kStore && st.kind != LStmt::Kind::kLocalStore) || !st.value ||
      !st.offset) {
    return false;
  }
  const DType type = st.value->type;
  if (type != DType::kF32 && type != DType::kF64) return false;
  const int64_t lanes = bytes / static_cast<int64_t>(ir::dtype_size(type));
  if (loop.extent < lanes || loop.extent % lanes != 0 || loop.extent > kMaxVectorLoopExtent) return false;
  const StoreTarget target{st.kind == LStmt::Kind::kStore,
                           st.kind == LStmt::Kind::kStore ? st.node : st.local, st.offset.get()};
  // A plain copy is left to the C compiler too: written as vectors, the copies into and out of
  // a tile's accumulators kept GCC from holding them in registers.
  if (st.value->kind != LExpr::Kind::kOp) return false;
  if (!unit_stride(st.offset.get(), loop.var) || !ir::uses_var(st.value.get(), loop.var) ||
      !vectorizable(*st.value, loop.var, type, target)) {
    return false;
  }
  std::string base;
  if (st.kind == LStmt::Kind::kStore) {
    base = bindings_[binding_of_node_.at(st.node)].var;
  } else {
    const std::optional<DType>& declared = local_in_scope_[st.local];
    if (!declared) return error("stores to local l" + std::to_string(st.local) + " outside its scope");
    if (*declared != type) {
      return error("stores " + std::string(ir::dtype_name(type)) + " to local l" +
                   std::to_string(st.local) + " (" + std::string(ir::dtype_name(*declared)) + ")");
    }
    base = local_name(st.local);
  }
  const std::string v = var_name(loop.var);
  const std::string i64(tname(DType::kI64));
  var_extent_[loop.var] = loop.extent;
  Result<Code> at = offset(st.offset);
  Result<std::string> value = at.ok() ? vector_expr(st.value, loop.var) : Result<std::string>(at.status());
  var_extent_[loop.var] = std::nullopt;
  KILN_RETURN_IF_ERROR(value.status());
  out.line("for (" + i64 + " " + v + " = 0; " + v + " < " + std::to_string(loop.extent) + "; " + v +
           " += " + std::to_string(lanes) + ") {");
  out.indent();
  out.line(helper("vst", type) + "(&" + base + "[" + at->text + "], " + *value + ");");
  out.dedent();
  out.line("}");
  return true;
}

}  // namespace kiln::codegen::internal
