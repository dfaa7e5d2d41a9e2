#include "drivers/interp/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>

#include "kiln/base/log.h"

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

// A value of a known static type: `f` for f32/f64, `i` for i32/i64.
struct Value {
  double f = 0;
  int64_t i = 0;
};

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF64; }

size_t element_size(DType t) {
  return t == DType::kF32 || t == DType::kI32 ? 4 : 8;
}

std::string_view type_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

// Two's complement wrap-around of an unsigned result into the type's range.
int64_t wrap(DType t, uint64_t v) {
  if (t == DType::kI32) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

int64_t int_min(DType t) {
  return t == DType::kI32 ? std::numeric_limits<int32_t>::min()
                          : std::numeric_limits<int64_t>::min();
}
int64_t int_max(DType t) {
  return t == DType::kI32 ? std::numeric_limits<int32_t>::max()
                          : std::numeric_limits<int64_t>::max();
}

// Truncation toward zero, saturating at the type's limits; NaN becomes 0.
int64_t saturate(DType t, double d) {
  if (std::isnan(d)) return 0;
  // -2^31 and -2^63 are exact doubles; the upper limits are reached from 2^31 and 2^63 up.
  const double lo = static_cast<double>(int_min(t));
  const double hi_exclusive = t == DType::kI32 ? 2147483648.0 : 9223372036854775808.0;
  if (d <= lo) return int_min(t);
  if (d >= hi_exclusive) return int_max(t);
  return static_cast<int64_t>(d);
}

double round_f32(double d) { return static_cast<double>(static_cast<float>(d)); }

// The value converted to `to` (for casts).
Value convert(DType from, Value v, DType to) {
  Value r;
  if (to == DType::kF32) {
    r.f = is_float(from) ? round_f32(v.f) : static_cast<double>(static_cast<float>(v.i));
  } else if (to == DType::kF64) {
    r.f = is_float(from) ? v.f : static_cast<double>(v.i);
  } else if (is_float(from)) {
    r.i = saturate(to, v.f);
  } else {
    r.i = std::clamp(v.i, int_min(to), int_max(to));
  }
  return r;
}

double float_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? b : a;
}
double float_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return b < a ? b : a;
}

// The math functions, in double.
double math(Op op, double x) {
  switch (op) {
    case Op::kExp: return std::exp(x);
    case Op::kLog: return std::log(x);
    case Op::kSqrt: return std::sqrt(x);
    case Op::kRsqrt: return 1.0 / std::sqrt(x);
    case Op::kTanh: return std::tanh(x);
    case Op::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::kSin: return std::sin(x);
    case Op::kCos: return std::cos(x);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

Value unary(Op op, DType t, Value a) {
  Value r;
  if (is_float(t)) {
    switch (op) {
      case Op::kNeg: r.f = -a.f; break;
      case Op::kAbs: r.f = std::fabs(a.f); break;
      case Op::kRelu: r.f = std::isnan(a.f) ? a.f : a.f > 0 ? a.f : 0.0; break;
      case Op::kFloor: r.f = std::floor(a.f); break;
      case Op::kCeil: r.f = std::ceil(a.f); break;
      default: r.f = math(op, a.f); break;
    }
    return r;
  }
  switch (op) {
    case Op::kNeg: r.i = wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)); break;
    case Op::kAbs:
      r.i = a.i < 0 ? wrap(t, uint64_t{0} - static_cast<uint64_t>(a.i)) : a.i;
      break;
    case Op::kRelu: r.i = a.i > 0 ? a.i : 0; break;
    case Op::kFloor:
    case Op::kCeil: r.i = a.i; break;
    default: r.i = saturate(t, math(op, static_cast<double>(a.i))); break;
  }
  return r;
}

Value binary(Op op, DType t, Value a, Value b) {
  Value r;
  if (is_float(t)) {
    switch (op) {
      case Op::kAdd: r.f = a.f + b.f; break;
      case Op::kSub: r.f = a.f - b.f; break;
      case Op::kMul: r.f = a.f * b.f; break;
      case Op::kDiv: r.f = a.f / b.f; break;
      case Op::kMax: r.f = float_max(a.f, b.f); break;
      case Op::kMin: r.f = float_min(a.f, b.f); break;
      case Op::kPow: r.f = std::pow(a.f, b.f); break;
      default: break;
    }
    return r;
  }
  const uint64_t ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
  switch (op) {
    case Op::kAdd: r.i = wrap(t, ua + ub); break;
    case Op::kSub: r.i = wrap(t, ua - ub); break;
    case Op::kMul: r.i = wrap(t, ua * ub); break;
    case Op::kDiv:
      if (b.i == 0) {
        r.i = 0;
      } else if (b.i == -1) {
        r.i = wrap(t, uint64_t{0} - ua);  // MIN / -1 == MIN
      } else {
        r.i = a.i / b.i;
      }
      break;
    case Op::kMax: r.i = std::max(a.i, b.i); break;
    case Op::kMin: r.i = std::min(a.i, b.i); break;
    case Op::kPow:
      r.i = saturate(t, std::pow(static_cast<double>(a.i), static_cast<double>(b.i)));
      break;
    default: break;
  }
  return r;
}

bool compare(Op op, DType operand_type, Value a, Value b) {
  if (is_float(operand_type)) {
    switch (op) {
      case Op::kLt: return a.f < b.f;
      case Op::kLe: return a.f <= b.f;
      case Op::kGt: return a.f > b.f;
      case Op::kGe: return a.f >= b.f;
      case Op::kEq: return a.f == b.f;
      case Op::kNe: return a.f != b.f;
      default: return false;
    }
  }
  switch (op) {
    case Op::kLt: return a.i < b.i;
    case Op::kLe: return a.i <= b.i;
    case Op::kGt: return a.i > b.i;
    case Op::kGe: return a.i >= b.i;
    case Op::kEq: return a.i == b.i;
    case Op::kNe: return a.i != b.i;
    default: return false;
  }
}

bool truthy(DType t, Value v) { return is_float(t) ? v.f != 0.0 : v.i != 0; }

// The state of one workgroup's run.
class Frame {
 public:
  Frame(const Interpreter& interpreter, const kiln_dispatch_state_t* state)
      : interpreter_(interpreter),
        state_(state),
        vars_(static_cast<size_t>(std::max(0, interpreter.kernel().var_count)), 0),
        locals_(static_cast<size_t>(std::max(0, interpreter.kernel().local_count))),
        local_types_(locals_.size(), DType::kF32) {}

  int error() const { return error_; }
  const std::string& detail() const { return detail_; }

  void exec(const LStmt* s) {
    if (error_) return;
    if (!s) return fail(kMalformedKernel, "a null statement");
    switch (s->kind) {
      case LStmt::Kind::kBlock:
        exec_body(s->body);
        return;
      case LStmt::Kind::kFor:
        exec_for(s, 0, s->extent);
        return;
      case LStmt::Kind::kIf: {
        if (!s->cond) return fail(kMalformedKernel, "an if without a condition");
        Value c = eval(s->cond.get());
        if (!error_ && truthy(s->cond->type, c)) exec_body(s->body);
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
    }
    fail(kMalformedKernel, "a statement of unknown kind");
  }

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
    const size_t size = element_size(t);
    if (offset < 0 || static_cast<uint64_t>(offset) >= length / size) {
      fail(is_store ? kStoreOutOfRange : kLoadOutOfRange,
           std::string(is_store ? "store to" : "load of") + " node " + std::to_string(node) +
               " (binding " + std::to_string(binding) + ") at element " +
               std::to_string(offset) + ", outside its " + std::to_string(length / size) + " " +
               std::string(type_name(t)) + " elements (" + std::to_string(length) + " bytes)");
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
    switch (t) {
      case DType::kF32: {
        float x = static_cast<float>(v.f);
        std::memcpy(p, &x, sizeof(x));
        return;
      }
      case DType::kF64: std::memcpy(p, &v.f, sizeof(v.f)); return;
      case DType::kI32: {
        int32_t x = static_cast<int32_t>(v.i);
        std::memcpy(p, &x, sizeof(x));
        return;
      }
      case DType::kI64: std::memcpy(p, &v.i, sizeof(v.i)); return;
    }
  }

  Value load(const LExpr* e) {
    const int64_t offset = eval_offset(e->offset);
    if (error_) return Value();
    const unsigned char* p = element(e->node, e->type, offset, /*is_store=*/false);
    Value r;
    if (!p) return r;
    switch (e->type) {
      case DType::kF32: {
        float x;
        std::memcpy(&x, p, sizeof(x));
        r.f = x;
        break;
      }
      case DType::kF64: std::memcpy(&r.f, p, sizeof(r.f)); break;
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, sizeof(x));
        r.i = x;
        break;
      }
      case DType::kI64: std::memcpy(&r.i, p, sizeof(r.i)); break;
    }
    return r;
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
    if (local_types_[static_cast<size_t>(s->local)] == DType::kF32) v.f = round_f32(v.f);
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
        if (e->type == DType::kF32) {
          r.f = round_f32(e->value);
        } else if (e->type == DType::kF64) {
          r.f = e->value;
        } else {
          r.i = saturate(e->type, e->value);
        }
        return r;
      case LExpr::Kind::kVar:
        if (!valid_index(e->var, vars_.size())) {
          fail(kMalformedKernel, "a bad loop variable");
          return r;
        }
        r.i = vars_[static_cast<size_t>(e->var)];
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
    Value r;
    switch (e->op) {
      case Op::kCastF32:
      case Op::kCastF64:
      case Op::kCastI32: {
        if (!arity(1)) return r;
        const DType to = e->op == Op::kCastF32   ? DType::kF32
                         : e->op == Op::kCastF64 ? DType::kF64
                                                 : DType::kI32;
        return convert(args[0]->type, eval(args[0].get()), to);
      }
      case Op::kSelect: {
        if (!arity(3)) return r;
        Value c = eval(args[0].get());
        if (error_) return r;
        // Only the chosen operand is evaluated (a guarded load may be out of range otherwise).
        return eval(truthy(args[0]->type, c) ? args[1].get() : args[2].get());
      }
      case Op::kFma: {
        if (!arity(3)) return r;
        Value a = eval(args[0].get()), b = eval(args[1].get()), c = eval(args[2].get());
        if (is_float(e->type)) {
          r.f = std::fma(a.f, b.f, c.f);
        } else {
          r.i = wrap(e->type, static_cast<uint64_t>(a.i) * static_cast<uint64_t>(b.i) +
                                  static_cast<uint64_t>(c.i));
        }
        return r;
      }
      case Op::kLt:
      case Op::kLe:
      case Op::kGt:
      case Op::kGe:
      case Op::kEq:
      case Op::kNe: {
        if (!arity(2)) return r;
        Value a = eval(args[0].get()), b = eval(args[1].get());
        const bool yes = compare(e->op, args[0]->type, a, b);
        if (is_float(e->type)) {
          r.f = yes ? 1.0 : 0.0;
        } else {
          r.i = yes ? 1 : 0;
        }
        return r;
      }
      case Op::kAdd:
      case Op::kSub:
      case Op::kMul:
      case Op::kDiv:
      case Op::kMax:
      case Op::kMin:
      case Op::kPow: {
        if (!arity(2)) return r;
        Value a = eval(args[0].get()), b = eval(args[1].get());
        return binary(e->op, e->type, a, b);
      }
      case Op::kNeg:
      case Op::kExp:
      case Op::kLog:
      case Op::kSqrt:
      case Op::kRsqrt:
      case Op::kTanh:
      case Op::kSigmoid:
      case Op::kRelu:
      case Op::kAbs:
      case Op::kSin:
      case Op::kCos:
      case Op::kFloor:
      case Op::kCeil: {
        if (!arity(1)) return r;
        return unary(e->op, e->type, eval(args[0].get()));
      }
    }
    fail(kMalformedKernel, "an unknown op");
    return r;
  }

  const Interpreter& interpreter_;
  const kiln_dispatch_state_t* state_;
  std::vector<int64_t> vars_;
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

int Interpreter::run_workgroup(const kiln_dispatch_state_t* state,
                               const kiln_workgroup_id_t* id) const {
  if (state->binding_count != kernel_.nodes.size()) {
    KILN_LOG(kWarn, "interp: kernel '" + kernel_.name + "' has " +
                        std::to_string(kernel_.nodes.size()) + " bindings; the dispatch gave " +
                        std::to_string(state->binding_count));
    return kBindingCountMismatch;
  }
  if (id->y != 0 || id->z != 0) return kInterpOk;
  const LStmt* body = kernel_.body.get();
  if (!body) return kInterpOk;
  Frame frame(*this, state);
  if (body->kind == LStmt::Kind::kFor && body->parallel) {
    const uint64_t extent = static_cast<uint64_t>(std::max<int64_t>(0, body->extent));
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
  return frame.error();
}

}  // namespace kiln::interp
