#include "drivers/interp/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <span>

#include "kiln/base/log.h"
#include "kiln/loop/op_eval.h"

namespace kiln::interp {

using ir::DType;
using ir::LExpr;
using ir::LStmt;
using ir::Op;

std::string_view interp_code_name(int code) {
  switch (code) {
    case kInterpOk: return "ok";
    case kLoadOutOfRange: return "load out of range";
    case kStoreOutOfRange: return "store out of range";
    case kLocalOutOfRange: return "local array access out of range";
    case kBindingCountMismatch: return "binding count mismatch";
    case kLocalAllocationFailed: return "local array allocation failed";
    case kMalformedKernel: return "malformed kernel";
  }
  return "unknown error";
}

namespace {

// A value of a known static type: `f` for f32/f64, `i` for i32/i64. What ops do to values is
// kiln/loop/op_eval.h (shared with the constant folder); this file only walks the tree.
using Value = ir::Scalar;

// The state of one workgroup's run.
class Frame {
 public:
  Frame(const Interpreter& interpreter, const kiln_dispatch_state_t* state, bool traces)
      : interpreter_(interpreter),
        state_(state),
        traces_(traces),
        vars_(static_cast<size_t>(std::max(0, interpreter.kernel().var_count)), 0),
        locals_(static_cast<size_t>(std::max(0, interpreter.kernel().local_count))),
        local_types_(locals_.size(), DType::kF32) {
    // The sizes (ir/loop.h, dispatch convention): two 32-bit halves per size.
    for (uint32_t c = 0; c + 1 < state->constant_count; c += 2) {
      sizes_.push_back(static_cast<int64_t>(uint64_t{state->constants[c]} | (uint64_t{state->constants[c + 1]} << 32)));
    }
  }

  int error() const { return error_; }

  // A loop's extent: its own, or its expression of sizes evaluated at the dispatch's.
  int64_t extent_of(const LStmt* s) {
    if (!s->extent_expr) return s->extent;
    const int64_t extent = eval(s->extent_expr.get()).i;
    return error_ ? 0 : extent;
  }
  const std::string& detail() const { return detail_; }

  void exec(const LStmt* s) {
    if (error_) return;
    if (!s) return fail(kMalformedKernel, "a null statement");
    switch (s->kind) {
      case LStmt::Kind::kBlock:
        exec_body(s->body);
        return;
      case LStmt::Kind::kFor:
        exec_for(s, 0, extent_of(s));
        return;
      case LStmt::Kind::kIf: {
        if (!s->cond) return fail(kMalformedKernel, "an if without a condition");
        Value c = eval(s->cond.get());
        if (!error_ && ir::scalar_truthy(s->cond->type, c)) exec_body(s->body);
        return;
      }
      case LStmt::Kind::kStore:
        store(s);
        return;
      case LStmt::Kind::kLocalDecl:
        declare_local(s);
        return;
      case LStmt::Kind::kLocalStore:
        local_store(s);
        return;
      case LStmt::Kind::kComment:
        return;
      case LStmt::Kind::kTrace:
        trace(s);
        return;
      case LStmt::Kind::kFail: {
        if (!s->value) return fail(kMalformedKernel, "a failure without a value");
        const Value v = eval(s->value.get());
        if (!error_ && !check_failed_) {
          check_failed_ = ir::kFirstFailureCode + std::max(0, s->site);
          check_value_ = v.i;
        }
        return;
      }
    }
    fail(kMalformedKernel, "a statement of unknown kind");
  }

  // The first failed check (kFail) of the workgroup: its code (0 for none) and value.
  int check_failed() const { return check_failed_; }
  int64_t check_value() const { return check_value_; }

  // Iterations [begin, end) of the for statement `s`.
  void exec_for(const LStmt* s, int64_t begin, int64_t end) {
    if (!valid_index(s->var, vars_.size())) return fail(kMalformedKernel, "a bad loop variable");
    for (int64_t v = begin; v < end && !error_; ++v) {
      vars_[static_cast<size_t>(s->var)] = v;
      exec_body(s->body);
    }
  }

 private:
  static bool valid_index(int64_t i, size_t size) {
    return i >= 0 && static_cast<uint64_t>(i) < size;
  }

  void fail(int code, const std::string& what) {
    if (error_) return;
    error_ = code;
    detail_ = what;
  }

  // Prints the trace line of `s` (kiln/loop/loop.h, "Value tracing") in one write, so that lines
  // of workgroups running at once never mix.
  void trace(const LStmt* s) {
    if (!traces_ || !s->value) return;
    int64_t& printed = trace_lines_[s];
    if (s->extent > 0 && printed > s->extent) return;
    const Value run = eval(s->value.get());
    std::string line = ir::kTraceLinePrefix + std::to_string(run.i) + " " + std::to_string(s->site);
    if (s->extent > 0 && printed == s->extent) {
      line += " more";
    } else {
      for (const ir::LExprRef& v : s->values) {
        if (!v) return fail(kMalformedKernel, "a null trace value");
        const Value x = eval(v.get());
        char text[40];
        switch (v->type) {
          case DType::kF16:
          case DType::kBF16:
          case DType::kF32: std::snprintf(text, sizeof text, " %.9g", ir::round_float(v->type, x.f)); break;
          case DType::kF64: std::snprintf(text, sizeof text, " %.17g", x.f); break;
          case DType::kU64: std::snprintf(text, sizeof text, " %llu", static_cast<unsigned long long>(x.i)); break;
          default: std::snprintf(text, sizeof text, " %lld", static_cast<long long>(x.i)); break;
        }
        line += text;
      }
    }
    if (error_) return;
    ++printed;
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }

  void exec_body(const std::vector<ir::LStmtRef>& body) {
    for (const ir::LStmtRef& child : body) {
      if (error_) return;
      exec(child.get());
    }
  }

  // The binding of node `node` and the address of element `offset` of type `t` in it, or null
  // (after fail()) when it is outside the binding.
  unsigned char* element(int node, DType t, int64_t offset, bool is_store) {
    const int binding = interpreter_.binding_of(node);
    if (binding < 0 || static_cast<uint32_t>(binding) >= state_->binding_count) {
      fail(kMalformedKernel, "node " + std::to_string(node) + " has no binding");
      return nullptr;
    }
    const size_t length = state_->binding_lengths[binding];
    const size_t size = ir::dtype_size(t);
    if (offset < 0 || static_cast<uint64_t>(offset) >= length / size) {
      fail(is_store ? kStoreOutOfRange : kLoadOutOfRange,
           std::string(is_store ? "store to" : "load of") + " node " + std::to_string(node) +
               " (binding " + std::to_string(binding) + ") at element " +
               std::to_string(offset) + ", outside its " + std::to_string(length / size) + " " +
               std::string(ir::dtype_name(t)) + " elements (" + std::to_string(length) + " bytes)");
      return nullptr;
    }
    return static_cast<unsigned char*>(state_->bindings[binding]) +
           static_cast<size_t>(offset) * size;
  }

  // Local `local`'s storage with element `offset` checked, or null (after fail()).
  std::vector<Value>* local_array(int local, int64_t offset, const char* what) {
    if (!valid_index(local, locals_.size())) {
      fail(kMalformedKernel, "a bad local number " + std::to_string(local));
      return nullptr;
    }
    std::vector<Value>& array = locals_[static_cast<size_t>(local)];
    if (!valid_index(offset, array.size())) {
      fail(kLocalOutOfRange, std::string(what) + " local " + std::to_string(local) +
                                 " at element " + std::to_string(offset) + ", outside its " +
                                 std::to_string(array.size()) + " elements");
      return nullptr;
    }
    return &array;
  }

  int64_t eval_offset(const ir::LExprRef& offset) {
    if (!offset) {
      fail(kMalformedKernel, "a missing offset");
      return 0;
    }
    return eval(offset.get()).i;
  }

  void store(const LStmt* s) {
    if (!s->value) return fail(kMalformedKernel, "a store without a value");
    const int64_t offset = eval_offset(s->offset);
    const Value v = eval(s->value.get());
    if (error_) return;
    const DType t = s->value->type;
    unsigned char* p = element(s->node, t, offset, /*is_store=*/true);
    if (!p) return;
    ir::store_scalar(t, v, p);
  }

  Value load(const LExpr* e) {
    const int64_t offset = eval_offset(e->offset);
    if (error_) return Value();
    const unsigned char* p = element(e->node, e->type, offset, /*is_store=*/false);
    if (!p) return Value();
    return ir::load_scalar(e->type, p);
  }

  void declare_local(const LStmt* s) {
    if (!valid_index(s->local, locals_.size())) {
      return fail(kMalformedKernel, "a bad local number " + std::to_string(s->local));
    }
    std::vector<Value>& array = locals_[static_cast<size_t>(s->local)];
    try {
      // Zero-filled at every execution of the declaration.
      array.assign(static_cast<size_t>(std::max<int64_t>(0, s->local_size)), Value());
    } catch (const std::exception&) {
      return fail(kLocalAllocationFailed, "local " + std::to_string(s->local) + " of " +
                                              std::to_string(s->local_size) + " elements");
    }
    local_types_[static_cast<size_t>(s->local)] = s->type;
    exec_body(s->body);
    std::vector<Value>().swap(array);  // out of scope
  }

  void local_store(const LStmt* s) {
    if (!s->value) return fail(kMalformedKernel, "a local store without a value");
    const int64_t offset = eval_offset(s->offset);
    Value v = eval(s->value.get());
    if (error_) return;
    std::vector<Value>* array = local_array(s->local, offset, "store to");
    if (!array) return;
    const DType type = local_types_[static_cast<size_t>(s->local)];
    if (ir::is_float_type(type)) v.f = ir::round_float(type, v.f);
    (*array)[static_cast<size_t>(offset)] = v;
  }

  Value eval(const LExpr* e) {
    if (error_) return Value();
    if (!e) {
      fail(kMalformedKernel, "a null expression");
      return Value();
    }
    Value r;
    switch (e->kind) {
      case LExpr::Kind::kConst:
        return ir::const_scalar(e->type, e->value);
      case LExpr::Kind::kVar:
        if (!valid_index(e->var, vars_.size())) {
          fail(kMalformedKernel, "a bad loop variable");
          return r;
        }
        r.i = vars_[static_cast<size_t>(e->var)];
        return r;
      case LExpr::Kind::kSize:
        if (!valid_index(e->size, sizes_.size())) {
          fail(kMalformedKernel, "a size the dispatch does not give");
          return r;
        }
        r.i = sizes_[static_cast<size_t>(e->size)];
        return r;
      case LExpr::Kind::kLoad:
        return load(e);
      case LExpr::Kind::kLocalLoad: {
        const int64_t offset = eval_offset(e->offset);
        if (error_) return r;
        std::vector<Value>* array = local_array(e->local, offset, "load of");
        return array ? (*array)[static_cast<size_t>(offset)] : r;
      }
      case LExpr::Kind::kOp:
        return op(e);
    }
    fail(kMalformedKernel, "an expression of unknown kind");
    return r;
  }

  Value op(const LExpr* e) {
    const std::vector<ir::LExprRef>& args = e->args;
    for (const ir::LExprRef& arg : args) {
      if (!arg) {
        fail(kMalformedKernel, "a null operand");
        return Value();
      }
    }
    const size_t n = args.size();
    auto arity = [&](size_t want) {
      if (n == want) return true;
      fail(kMalformedKernel, "an op with " + std::to_string(n) + " operands");
      return false;
    };
    const int want = ir::op_arity(e->op);
    if (want == 0) {
      fail(kMalformedKernel, "an unknown op");
      return Value();
    }
    if (!arity(static_cast<size_t>(want))) return Value();
    if (e->op == Op::kSelect) {
      Value c = eval(args[0].get());
      if (error_) return Value();
      // Only the chosen operand is evaluated (a guarded load may be out of range otherwise).
      return eval(ir::scalar_truthy(args[0]->type, c) ? args[1].get() : args[2].get());
    }
    // Every other op evaluates all its operands, in order.
    Value values[3];
    DType types[3];
    for (size_t i = 0; i < n; ++i) {
      values[i] = eval(args[i].get());
      types[i] = args[i]->type;
    }
    if (error_) return Value();
    return ir::eval_op(e->op, e->type, std::span<const DType>(types, n),
                       std::span<const Value>(values, n));
  }

  const Interpreter& interpreter_;
  const kiln_dispatch_state_t* state_;
  int check_failed_ = 0;                           // the first kFail's code, 0 for none
  int64_t check_value_ = 0;                        // and its value
  bool traces_;                                    // workgroup 0: kTrace statements print
  std::map<const LStmt*, int64_t> trace_lines_;    // lines printed per kTrace statement
  std::vector<int64_t> vars_;
  std::vector<int64_t> sizes_;  // the dispatch's sizes
  std::vector<std::vector<Value>> locals_;
  std::vector<DType> local_types_;
  int error_ = 0;
  std::string detail_;
};

// x * c, or `limit` when that is larger (no overflow).
uint64_t clamped_product(uint64_t x, uint64_t c, uint64_t limit) {
  if (c != 0 && x > limit / c) return limit;
  return std::min(limit, x * c);
}

}  // namespace

Interpreter::Interpreter(ir::Kernel kernel) : kernel_(std::move(kernel)) {
  for (size_t i = 0; i < kernel_.nodes.size(); ++i) {
    bindings_.emplace_back(kernel_.nodes[i], static_cast<int>(i));
  }
  std::sort(bindings_.begin(), bindings_.end());
}

int Interpreter::binding_of(int node) const {
  auto it = std::lower_bound(bindings_.begin(), bindings_.end(), std::make_pair(node, -1));
  return it != bindings_.end() && it->first == node ? it->second : -1;
}

int Interpreter::run_workgroup(const kiln_dispatch_state_t* state, const kiln_workgroup_id_t* id,
                               int64_t* failure_value) const {
  if (state->binding_count != kernel_.nodes.size()) {
    KILN_LOG(kWarn, "interp: kernel '" + kernel_.name + "' has " +
                        std::to_string(kernel_.nodes.size()) + " bindings; the dispatch gave " +
                        std::to_string(state->binding_count));
    return kBindingCountMismatch;
  }
  if (id->y != 0 || id->z != 0) return kInterpOk;
  const LStmt* body = kernel_.body.get();
  if (!body) return kInterpOk;
  Frame frame(*this, state, id->x == 0);
  if (body->kind == LStmt::Kind::kFor && body->parallel) {
    const uint64_t extent = static_cast<uint64_t>(std::max<int64_t>(0, frame.extent_of(body)));
    const uint64_t workgroups = std::max<uint32_t>(1, state->workgroup_count[0]);
    const uint64_t chunk = extent / workgroups + (extent % workgroups != 0 ? 1 : 0);
    const uint64_t begin = clamped_product(id->x, chunk, extent);
    const uint64_t end = clamped_product(uint64_t{id->x} + 1, chunk, extent);
    frame.exec_for(body, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  } else {
    if (id->x != 0) return kInterpOk;
    frame.exec(body);
  }
  if (frame.error()) {
    KILN_LOG(kWarn, "interp: kernel '" + kernel_.name + "', workgroup (" +
                        std::to_string(id->x) + ", " + std::to_string(id->y) + ", " +
                        std::to_string(id->z) + "): " + std::string(interp_code_name(frame.error())) +
                        ": " + frame.detail());
  }
  if (!frame.error() && frame.check_failed()) {
    if (failure_value) *failure_value = frame.check_value();
    return frame.check_failed();
  }
  return frame.error();
}

}  // namespace kiln::interp
