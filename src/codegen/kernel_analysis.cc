// Pass 1 of the kernel emitter (kernel_emitter.h): shape checks of the kernel, what each binding
// is used for, and the frame the dialect prints the kernel's signature from.
#include <limits>

#include "codegen/kernel_emitter.h"
#include "kiln/ir/printer.h"

namespace kiln::codegen {

uint64_t binding_min_bytes(const ir::TensorNode& n) {
  // The node's byte size, when it is a sensible one (validate_program bounds it).
  internal::Wide bytes = internal::type_size(n.dtype);
  for (size_t d = 0; d < n.dims.size(); ++d) {
    // A dimension that is a size has no byte size before the kernel runs.
    const int64_t dim = n.is_sized() && !n.sized_dims[d].is_constant() ? -1 : n.dims[d];
    const bool sensible = bytes > 0 && dim > 0 && bytes <= std::numeric_limits<int64_t>::max();
    bytes = sensible ? bytes * dim : -1;
  }
  return bytes > 0 && bytes <= std::numeric_limits<int64_t>::max() ? static_cast<uint64_t>(bytes) : 0;
}

namespace internal {

Status KernelEmitter::analyze(const LExprRef& expr) {
  if (!expr) return error("missing expression");
  switch (expr->kind) {
    case LExpr::Kind::kConst:
      return Status();
    case LExpr::Kind::kVar:
      if (expr->var < 0 || expr->var >= kernel_.var_count) {
        return error("loop variable v" + std::to_string(expr->var) + " is out of range (vars " +
                     std::to_string(kernel_.var_count) + ")");
      }
      return Status();
    case LExpr::Kind::kLoad: {
      if (!binding_of_node_.count(expr->node)) {
        return error("loads node " + std::to_string(expr->node) + ", which is not bound");
      }
      NodeUse& use = node_use_[expr->node];
      use.used = true;
      use.load_types.insert(expr->type);
      return analyze(expr->offset);
    }
    case LExpr::Kind::kSize:
      if (expr->size < 0 || expr->size >= kernel_.size_count) {
        return error("size s" + std::to_string(expr->size) + " is out of range (sizes " +
                     std::to_string(kernel_.size_count) + ")");
      }
      return Status();
    case LExpr::Kind::kLocalLoad:
      if (expr->local < 0 || expr->local >= kernel_.local_count) {
        return error("local l" + std::to_string(expr->local) + " is out of range (locals " +
                     std::to_string(kernel_.local_count) + ")");
      }
      return analyze(expr->offset);
    case LExpr::Kind::kOp:
      if (static_cast<int>(expr->args.size()) != ir::op_arity(expr->op)) {
        return error("op '" + std::string(ir::op_name(expr->op)) + "' takes " +
                     std::to_string(ir::op_arity(expr->op)) + " operands, not " +
                     std::to_string(expr->args.size()));
      }
      for (const LExprRef& arg : expr->args) KILN_RETURN_IF_ERROR(analyze(arg));
      return Status();
  }
  return error("unknown expression kind");
}

Status KernelEmitter::analyze(const LStmtRef& stmt) {
  if (!stmt) return error("missing statement");
  switch (stmt->kind) {
    case LStmt::Kind::kFor:
      if (stmt->extent_expr) KILN_RETURN_IF_ERROR(analyze(stmt->extent_expr));
      break;
    case LStmt::Kind::kBlock:
    case LStmt::Kind::kComment:
      break;
    case LStmt::Kind::kIf:
      KILN_RETURN_IF_ERROR(analyze(stmt->cond));
      break;
    case LStmt::Kind::kFail:
      KILN_RETURN_IF_ERROR(analyze(stmt->value));
      if (stmt->value->type != DType::kI64) return error("a failure's value is not i64");
      if (stmt->site < 0 || stmt->site > INT32_MAX - ir::kFirstFailureCode) {
        return error("failure site " + std::to_string(stmt->site) + " is out of range");
      }
      fails_ = true;
      break;
    case LStmt::Kind::kTrace:
      KILN_RETURN_IF_ERROR(analyze(stmt->value));
      for (const LExprRef& v : stmt->values) KILN_RETURN_IF_ERROR(analyze(v));
      trace_counters_.emplace(stmt.get(), static_cast<int>(trace_counters_.size()));
      break;
    case LStmt::Kind::kStore: {
      if (!binding_of_node_.count(stmt->node)) {
        return error("stores to node " + std::to_string(stmt->node) + ", which is not bound");
      }
      KILN_RETURN_IF_ERROR(analyze(stmt->offset));
      KILN_RETURN_IF_ERROR(analyze(stmt->value));
      NodeUse& use = node_use_[stmt->node];
      use.used = use.written = true;
      use.store_types.insert(stmt->value->type);
      break;
    }
    case LStmt::Kind::kLocalDecl:
    case LStmt::Kind::kLocalStore:
      if (stmt->local < 0 || stmt->local >= kernel_.local_count) {
        return error("local l" + std::to_string(stmt->local) + " is out of range (locals " +
                     std::to_string(kernel_.local_count) + ")");
      }
      if (stmt->kind == LStmt::Kind::kLocalStore) {
        KILN_RETURN_IF_ERROR(analyze(stmt->offset));
        KILN_RETURN_IF_ERROR(analyze(stmt->value));
      }
      break;
  }
  for (const LStmtRef& child : stmt->body) KILN_RETURN_IF_ERROR(analyze(child));
  return Status();
}

Status KernelEmitter::make_frame(KernelFrame* frame) {
  for (size_t i = 0; i < kernel_.nodes.size(); ++i) {
    int node = kernel_.nodes[i];
    if (node < 0) return error("binding " + std::to_string(i) + " has no node");
    if (!binding_of_node_.emplace(node, static_cast<int>(i)).second) {
      return error("node " + std::to_string(node) + " is bound twice");
    }
    if (program_ && node >= static_cast<int>(program_->nodes.size())) {
      return error("node " + std::to_string(node) + " is not in the program");
    }
  }
  if (!kernel_.body) return error("no body");
  KILN_RETURN_IF_ERROR(analyze(kernel_.body));

  // One element type per node: the program's, else the one its loads and stores agree on.
  for (size_t i = 0; i < kernel_.nodes.size(); ++i) {
    const int node = kernel_.nodes[i];
    const NodeUse& use = node_use_[node];
    BindingInfo b;
    b.index = static_cast<int>(i);
    b.node = node;
    b.used = use.used;
    b.written = use.written;
    b.var = "n" + std::to_string(node);
    std::set<DType> types = use.load_types;
    types.insert(use.store_types.begin(), use.store_types.end());
    std::string what = "node " + std::to_string(node);
    if (program_) {
      const ir::TensorNode& n = program_->nodes[node];
      what += " ('" + n.name + "')";
      b.type = n.dtype;
      types.insert(n.dtype);
      if (const uint64_t bytes = binding_min_bytes(n); bytes > 0) b.min_bytes = static_cast<int64_t>(bytes);
      b.comment = comment_safe(n.name) + ": " + std::string(ir::role_name(n.role)) + " " +
                  std::string(ir::dtype_name(n.dtype)) + comment_safe(ir::dims_text(n, program_->sizes));
    } else if (!types.empty()) {
      b.type = *types.begin();
    }
    if (types.size() > 1) {
      std::string list;
      for (DType t : types) list += (list.empty() ? "" : ", ") + std::string(ir::dtype_name(t));
      return error(what + " is loaded, stored or declared with different types (" + list + ")");
    }
    bindings_.push_back(b);
  }
  frame->kernel = &kernel_;
  frame->bindings = bindings_;
  frame->comments = options_.comments;
  frame->constant_count = 2 * kernel_.size_count;
  frame->parallel = kernel_.body->kind == LStmt::Kind::kFor && kernel_.body->parallel;
  return Status();
}

}  // namespace internal
}  // namespace kiln::codegen
