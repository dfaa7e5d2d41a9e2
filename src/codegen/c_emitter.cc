// The shared part of the C-syntax emitter: statements and expressions of the loop IR printed in
// C syntax, with the dialect (dialect.h) answering what differs between C, OpenCL C and CUDA C.
#include "kiln/codegen/c_emitter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "codegen/dialect.h"

namespace kiln::codegen {

namespace internal {

void Printer::line(std::string_view text) {
  text_.append(static_cast<size_t>(depth_) * 2, ' ');
  text_ += text;
  text_ += '\n';
}

Result<std::unique_ptr<DialectSyntax>> make_dialect(Dialect dialect) {
  switch (dialect) {
    case Dialect::kC:
      return make_c_dialect();
    case Dialect::kOpenCL:
      return make_opencl_dialect();
    case Dialect::kCuda:
      return unimplemented_error("code generation for CUDA C is not implemented yet");
  }
  return invalid_argument_error("unknown dialect");
}

}  // namespace internal

namespace {

using internal::BindingInfo;
using internal::DialectSyntax;
using internal::HelperSet;
using internal::KernelFrame;
using internal::Printer;
using ir::DType;
using ir::Kernel;
using ir::LExpr;
using ir::LExprRef;
using ir::LStmt;
using ir::LStmtRef;
using ir::Op;

// ---- Small local tables (kept here rather than depending on program.cc for names) ----------

std::string_view type_label(DType type) {
  switch (type) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

int64_t type_size(DType type) {
  return type == DType::kF32 || type == DType::kI32 ? 4 : 8;
}

bool is_float(DType type) { return type == DType::kF32 || type == DType::kF64; }

// i32 < i64 < f32 < f64.
DType promote_types(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::kI32: return 0;
      case DType::kI64: return 1;
      case DType::kF32: return 2;
      case DType::kF64: return 3;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

bool is_comparison(Op op) {
  return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe || op == Op::kEq ||
         op == Op::kNe;
}

// Text that is safe inside /* ... */: no comment delimiters, trigraphs or line breaks.
std::string comment_safe(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if ((c == '*' && next == '/') || (c == '/' && next == '*') || (c == '?' && next == '?')) {
      out += c;
      out += ' ';
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

bool references_local(const LExprRef& e, int local) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kLocalLoad && e->local == local) return true;
  if (references_local(e->offset, local)) return true;
  for (const LExprRef& arg : e->args) {
    if (references_local(arg, local)) return true;
  }
  return false;
}

// Whether statements read or write local `local` (as declared by the enclosing declaration).
bool references_local(const std::vector<LStmtRef>& body, int local) {
  for (const LStmtRef& s : body) {
    if (s->kind == LStmt::Kind::kLocalDecl && s->local == local) continue;  // another one
    if (s->kind == LStmt::Kind::kLocalStore && s->local == local) return true;
    if (references_local(s->cond, local) || references_local(s->offset, local) ||
        references_local(s->value, local) || references_local(s->body, local)) {
      return true;
    }
  }
  return false;
}

// ---- Expressions as text with their C precedence and, for integers, their range --------------

enum Precedence : int {
  kPrecCond = 3,      // c ? a : b
  kPrecEquality = 9,  // == !=
  kPrecRelational = 10,
  kPrecAdditive = 12,
  kPrecMultiplicative = 13,
  kPrecUnary = 14,  // -x, (T)x
  kPrecPrimary = 16,
};

// Where an integer value can lie (inclusive). Plain C arithmetic is printed where the exact
// result provably stays in its type; elsewhere the wrapping helpers.
struct Range {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
};

Range type_range(DType type) {
  if (type == DType::kI32) {
    return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
  return {};
}

using Wide = __int128;

bool fits(Wide lo, Wide hi, DType type) {
  Range r = type_range(type);
  return lo >= r.lo && hi <= r.hi;
}

struct Code {
  Code() = default;
  Code(std::string t, int p) : text(std::move(t)), prec(p) {}

  std::string text;
  int prec = kPrecPrimary;
  Range range;          // integer values only
  bool narrow = false;  // an i64 value whose C expression has type int (a small literal)
};

// `code` as an operand that needs at least precedence `min`.
std::string operand(const Code& code, int min) {
  return code.prec >= min ? code.text : "(" + code.text + ")";
}

Code infix(const Code& a, std::string_view op, const Code& b, int prec) {
  // Left-associative: the right operand needs parentheses at equal precedence.
  return {operand(a, prec) + " " + std::string(op) + " " + operand(b, prec + 1), prec};
}

Code call(std::string_view fn, std::initializer_list<Code> args) {
  std::string text(fn);
  text += '(';
  bool first = true;
  for (const Code& a : args) {
    if (!first) text += ", ";
    first = false;
    text += a.text;
  }
  text += ')';
  return {text, kPrecPrimary};
}

Code negate(const Code& x) {
  std::string inner = operand(x, kPrecUnary);
  if (!inner.empty() && inner[0] == '-') inner = "(" + x.text + ")";  // never "--x"
  return {"-" + inner, kPrecUnary};
}

Code with_sign(std::string text) {
  int prec = !text.empty() && text[0] == '-' ? kPrecUnary : kPrecPrimary;
  if (text.starts_with("(")) prec = kPrecUnary;  // "(double)INFINITY" is a cast
  return {std::move(text), prec};
}

// The shortest decimal that reads back as exactly `value` (std::to_chars round-trips).
template <typename T>
std::string shortest_decimal(T value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

Code float_literal(double value, DType type, const DialectSyntax& d) {
  if (std::isnan(value)) return with_sign(d.nan(type));
  if (type == DType::kF32) {
    // The f32 value of the constant: values from FLT_MAX + half an ulp up round to infinity.
    constexpr double kOverflow = 0x1.ffffffp127;
    if (std::isinf(value) || std::fabs(value) >= kOverflow) {
      return with_sign(d.infinity(type, value < 0));
    }
    return with_sign(shortest_decimal(static_cast<float>(value)) + "f");
  }
  if (std::isinf(value)) return with_sign(d.infinity(type, value < 0));
  return with_sign(shortest_decimal(value));
}

Code int_constant(int64_t value, DType type, const DialectSyntax& d) {
  Code code;
  const Range limits = type_range(type);
  if (value == limits.lo) {
    code = {d.int_limit(type, false), kPrecPrimary};
  } else if (value == limits.hi) {
    code = {d.int_limit(type, true), kPrecPrimary};
  } else {
    code = with_sign(std::to_string(value));
  }
  code.range = {value, value};
  code.narrow = type == DType::kI64 && fits(value, value, DType::kI32);
  return code;
}

Code literal(double value, DType type, const DialectSyntax& d) {
  if (is_float(type)) return float_literal(value, type, d);
  // The cast semantics: truncate toward zero, saturate, NaN -> 0.
  const Range limits = type_range(type);
  int64_t v = 0;
  if (std::isnan(value)) {
    v = 0;
  } else if (value >= static_cast<double>(limits.hi)) {  // 2^63 for i64: saturates
    v = limits.hi;
  } else if (value <= static_cast<double>(limits.lo)) {
    v = limits.lo;
  } else {
    v = static_cast<int64_t>(value);
  }
  return int_constant(v, type, d);
}

// ---- One kernel -----------------------------------------------------------------------------

class KernelEmitter {
 public:
  KernelEmitter(const DialectSyntax& dialect, HelperSet& helpers, const Kernel& kernel,
                const ir::Program* program, const EmitOptions& options)
      : d_(dialect), helpers_(helpers), kernel_(kernel), program_(program), options_(options) {}

  Status emit(Printer& out);
  bool uses_heap() const { return uses_heap_; }

 private:
  struct NodeUse {
    std::set<DType> load_types;
    std::set<DType> store_types;
    bool written = false;
    bool used = false;
  };

  Status error(const std::string& message) const {
    return invalid_argument_error("kernel '" + kernel_.name + "': " + message);
  }

  // Pass 1: shape checks and what each binding is used for.
  Status analyze(const LStmtRef& stmt);
  Status analyze(const LExprRef& expr);
  Status make_frame(KernelFrame* frame);

  // Pass 2: printing.
  // `tail`: nothing follows the statement in the enclosing C block, so a local declared by it
  // needs no block of its own.
  Status statement(const LStmtRef& stmt, Printer& out, bool tail);
  Status statements(const std::vector<LStmtRef>& list, Printer& out, bool tail);
  Status for_loop(const LStmt& stmt, Printer& out, bool split);
  Status local_decl(const LStmt& stmt, Printer& out, bool tail);
  Result<Code> expr(const LExprRef& expr);
  Result<Code> op(const LExpr& expr);
  Result<Code> offset(const LExprRef& expr);
  // A C truth value for `c != 0`.
  Result<Code> condition(const LExprRef& c);
  Code convert(const Code& code, DType from, DType to);
  Code unary_float(Op op, const Code& x, DType type);
  // Integer + - * / and neg in type `type`, with the wrap-around / division rules.
  Code int_arith(Op op, Code a, Code b, DType type);
  Code int_neg(const Code& a, DType type);
  Code int_const(int64_t value, DType type) const { return int_constant(value, type, d_); }
  std::string helper(std::string_view base, DType type) {
    return helpers_.use("kiln_" + std::string(base) + "_" + std::string(type_label(type)));
  }
  std::string_view tname(DType type) const { return d_.type_name(type); }
  std::string var_name(int var) const { return "v" + std::to_string(var); }
  std::string local_name(int local) const { return "l" + std::to_string(local); }

  const DialectSyntax& d_;
  HelperSet& helpers_;
  const Kernel& kernel_;
  const ir::Program* program_;
  const EmitOptions& options_;

  std::map<int, int> binding_of_node_;  // node id -> binding index
  std::map<int, NodeUse> node_use_;
  std::vector<BindingInfo> bindings_;

  // Scope while printing.
  std::vector<std::optional<int64_t>> var_extent_;  // set while inside the loop over the var
  std::vector<std::optional<DType>> local_in_scope_;
  std::vector<std::string> heap_locals_;  // enclosing heap-allocated locals, outermost first
  int64_t stack_bytes_ = 0;               // bytes of stack locals in scope
  bool uses_heap_ = false;
};

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
    case LStmt::Kind::kBlock:
    case LStmt::Kind::kFor:
    case LStmt::Kind::kComment:
      break;
    case LStmt::Kind::kIf:
      KILN_RETURN_IF_ERROR(analyze(stmt->cond));
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
      // The node's byte size, when it is a sensible one (validate_program bounds it).
      Wide bytes = type_size(n.dtype);
      std::string dims;
      for (int64_t dim : n.dims) {
        const bool sensible = bytes > 0 && dim > 0 && bytes <= std::numeric_limits<int64_t>::max();
        bytes = sensible ? bytes * dim : -1;
        dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
      }
      if (bytes > 0 && bytes <= std::numeric_limits<int64_t>::max()) {
        b.min_bytes = static_cast<int64_t>(bytes);
      }
      b.comment = comment_safe(n.name) + ": " + std::string(ir::role_name(n.role)) + " " +
                  std::string(type_label(n.dtype)) + "[" + dims + "]";
    } else if (!types.empty()) {
      b.type = *types.begin();
    }
    if (types.size() > 1) {
      std::string list;
      for (DType t : types) list += (list.empty() ? "" : ", ") + std::string(type_label(t));
      return error(what + " is loaded, stored or declared with different types (" + list + ")");
    }
    bindings_.push_back(b);
  }
  frame->kernel = &kernel_;
  frame->bindings = bindings_;
  frame->comments = options_.comments;
  frame->parallel = kernel_.body->kind == LStmt::Kind::kFor && kernel_.body->parallel;
  return Status();
}

Status KernelEmitter::emit(Printer& out) {
  if (!ir::is_identifier(kernel_.name)) {
    return invalid_argument_error("kernel name '" + kernel_.name + "' is not a C identifier");
  }
  if (d_.is_reserved(kernel_.name)) {
    return invalid_argument_error("kernel name '" + kernel_.name + "' is reserved");
  }
  if (kernel_.var_count < 0 || kernel_.local_count < 0) return error("negative var or local count");
  KernelFrame frame;
  KILN_RETURN_IF_ERROR(make_frame(&frame));
  var_extent_.assign(static_cast<size_t>(kernel_.var_count), std::nullopt);
  local_in_scope_.assign(static_cast<size_t>(kernel_.local_count), std::nullopt);

  if (options_.comments) {
    std::string line = "/* kernel " + kernel_.name + ": " + std::to_string(kernel_.nodes.size()) +
                       (kernel_.nodes.size() == 1 ? " binding" : " bindings");
    if (frame.parallel) {
      line += ", parallel over " + std::to_string(kernel_.body->extent) + " iterations";
    } else {
      line += ", one workgroup";
    }
    out.line(line + " */");
  }
  d_.emit_kernel_begin(out, frame);
  if (frame.parallel) {
    KILN_RETURN_IF_ERROR(for_loop(*kernel_.body, out, /*split=*/true));
  } else {
    KILN_RETURN_IF_ERROR(statement(kernel_.body, out, /*tail=*/true));
  }
  d_.emit_kernel_end(out, frame);
  return Status();
}

Status KernelEmitter::statements(const std::vector<LStmtRef>& list, Printer& out, bool tail) {
  for (size_t i = 0; i < list.size(); ++i) {
    KILN_RETURN_IF_ERROR(statement(list[i], out, tail && i + 1 == list.size()));
  }
  return Status();
}

Status KernelEmitter::for_loop(const LStmt& stmt, Printer& out, bool split) {
  if (stmt.var < 0 || stmt.var >= kernel_.var_count) {
    return error("loop variable v" + std::to_string(stmt.var) + " is out of range (vars " +
                 std::to_string(kernel_.var_count) + ")");
  }
  if (var_extent_[stmt.var]) {
    return error("loop variable v" + std::to_string(stmt.var) + " is reused by a nested loop");
  }
  if (stmt.extent < 0) return error("loop over a negative extent");
  const std::string v = var_name(stmt.var);
  const std::string extent = std::to_string(stmt.extent);
  const std::string i64(tname(DType::kI64));
  if (split) {
    // The dispatch convention: W workgroups in x; workgroup x runs [x * C, min(E, (x + 1) * C)),
    // C = ceil(E / W).
    const std::string count = "(" + i64 + ")" + d_.workgroup_count();
    if (options_.comments) {
      out.line("/* this workgroup's chunk of the parallel loop over " + v + " in [0, " + extent +
               ") */");
    }
    out.line("const " + i64 + " chunk = (" + extent + " + " + count + " - 1) / " + count + ";");
    out.line("const " + i64 + " begin = (" + i64 + ")" + d_.workgroup_index() + " * chunk;");
    out.line("const " + i64 + " end = begin + chunk < " + extent + " ? begin + chunk : " + extent +
             ";");
    out.line("for (" + i64 + " " + v + " = begin; " + v + " < end; ++" + v + ") {");
  } else {
    out.line("for (" + i64 + " " + v + " = 0; " + v + " < " + extent + "; ++" + v + ") {");
  }
  out.indent();
  var_extent_[stmt.var] = stmt.extent;
  Status status = statements(stmt.body, out, /*tail=*/true);
  var_extent_[stmt.var] = std::nullopt;
  KILN_RETURN_IF_ERROR(status);
  out.dedent();
  out.line("}");
  return Status();
}

Status KernelEmitter::local_decl(const LStmt& stmt, Printer& out, bool tail) {
  const int local = stmt.local;
  if (local_in_scope_[local]) {
    return error("local l" + std::to_string(local) + " is declared again inside its own scope");
  }
  if (stmt.local_size <= 0) return error("local l" + std::to_string(local) + " has no elements");
  const int64_t elem = type_size(stmt.type);
  if (stmt.local_size > std::numeric_limits<int64_t>::max() / elem) {
    return error("local l" + std::to_string(local) + " is too large");
  }
  const int64_t bytes = stmt.local_size * elem;
  const std::string name = local_name(local);
  const std::string type(tname(stmt.type));
  const std::string size = std::to_string(stmt.local_size);
  const bool heap = d_.heap_locals() && stack_bytes_ + bytes > kMaxStackLocalBytes;

  // The local's scope is its body: a block of its own unless the enclosing one ends with it.
  const bool braces = !tail;
  if (braces) {
    out.line("{");
    out.indent();
  }
  if (heap) {
    uses_heap_ = true;
    if (options_.comments) {
      out.line("/* " + std::to_string(bytes) + " bytes: on the heap rather than the stack */");
    }
    out.line(type + "* " + name + " = (" + type + "*)calloc(" + size + ", sizeof(" + type + "));");
    std::string frees;
    for (const std::string& outer : heap_locals_) frees += "free(" + outer + "); ";
    if (frees.empty()) {
      out.line("if (!" + name + ") " + d_.return_error(internal::kReturnOutOfMemory));
    } else {
      out.line("if (!" + name + ") { " + frees + d_.return_error(internal::kReturnOutOfMemory) +
               " }");
    }
    heap_locals_.push_back(name);
  } else {
    out.line(type + " " + name + "[" + size + "] = {0};");
    stack_bytes_ += bytes;
  }
  if (!references_local(stmt.body, local)) out.line("(void)" + name + ";");
  local_in_scope_[local] = stmt.type;
  Status status = statements(stmt.body, out, /*tail=*/true);
  local_in_scope_[local] = std::nullopt;
  KILN_RETURN_IF_ERROR(status);
  if (heap) {
    heap_locals_.pop_back();
    out.line("free(" + name + ");");
  } else {
    stack_bytes_ -= bytes;
  }
  if (braces) {
    out.dedent();
    out.line("}");
  }
  return Status();
}

Status KernelEmitter::statement(const LStmtRef& ref, Printer& out, bool tail) {
  const LStmt& stmt = *ref;
  switch (stmt.kind) {
    case LStmt::Kind::kBlock:
      return statements(stmt.body, out, tail);
    case LStmt::Kind::kFor:
      return for_loop(stmt, out, /*split=*/false);
    case LStmt::Kind::kIf: {
      KILN_ASSIGN_OR_RETURN(Code c, condition(stmt.cond));
      out.line("if (" + c.text + ") {");
      out.indent();
      KILN_RETURN_IF_ERROR(statements(stmt.body, out, /*tail=*/true));
      out.dedent();
      out.line("}");
      return Status();
    }
    case LStmt::Kind::kStore: {
      // make_frame() checked that the value has the node's type.
      const BindingInfo& b = bindings_[binding_of_node_.at(stmt.node)];
      KILN_ASSIGN_OR_RETURN(Code at, offset(stmt.offset));
      KILN_ASSIGN_OR_RETURN(Code value, expr(stmt.value));
      out.line(b.var + "[" + at.text + "] = " + value.text + ";");
      return Status();
    }
    case LStmt::Kind::kLocalDecl:
      return local_decl(stmt, out, tail);
    case LStmt::Kind::kLocalStore: {
      const std::optional<DType>& type = local_in_scope_[stmt.local];
      if (!type) return error("stores to local l" + std::to_string(stmt.local) + " outside its scope");
      if (stmt.value->type != *type) {
        return error("stores " + std::string(type_label(stmt.value->type)) + " to local l" +
                     std::to_string(stmt.local) + " (" + std::string(type_label(*type)) + ")");
      }
      KILN_ASSIGN_OR_RETURN(Code at, offset(stmt.offset));
      KILN_ASSIGN_OR_RETURN(Code value, expr(stmt.value));
      out.line(local_name(stmt.local) + "[" + at.text + "] = " + value.text + ";");
      return Status();
    }
    case LStmt::Kind::kComment: {
      if (!options_.comments) return Status();
      std::string_view text = stmt.text;
      // One comment line per line of text.
      while (true) {
        size_t nl = text.find('\n');
        out.line("/* " + comment_safe(text.substr(0, nl)) + " */");
        if (nl == std::string_view::npos) break;
        text = text.substr(nl + 1);
      }
      return Status();
    }
  }
  return error("unknown statement kind");
}

Result<Code> KernelEmitter::offset(const LExprRef& e) {
  KILN_ASSIGN_OR_RETURN(Code code, expr(e));
  return convert(code, e->type, DType::kI64);
}

Code KernelEmitter::convert(const Code& code, DType from, DType to) {
  if (from == to) return code;
  const std::string cast = "(" + std::string(tname(to)) + ")";
  if (is_float(to)) {
    // Integer to float rounds to nearest; f64 to f32 likewise (to infinity beyond the range).
    return {cast + operand(code, kPrecUnary), kPrecUnary};
  }
  if (!is_float(from)) {
    // Integer to integer: exact where the range fits, else saturating (to i32).
    if (fits(code.range.lo, code.range.hi, to)) {
      if (code.range.lo == code.range.hi) return int_const(code.range.lo, to);
      Code out{cast + operand(code, kPrecUnary), kPrecUnary};
      out.range = code.range;
      return out;
    }
    Code out = call(helpers_.use("kiln_i64_to_i32"), {code});
    out.range = {std::max(code.range.lo, type_range(to).lo), std::min(code.range.hi, type_range(to).hi)};
    return out;
  }
  // Float to integer: truncating, saturating, NaN -> 0.
  Code out = call(helpers_.use("kiln_" + std::string(type_label(from)) + "_to_" +
                               std::string(type_label(to))),
                  {code});
  out.range = type_range(to);
  return out;
}

Code KernelEmitter::int_arith(Op op, Code a, Code b, DType t) {
  // Identities (exact for integers, wrapping included): x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1.
  auto is_const = [](const Code& c, int64_t v) { return c.range.lo == v && c.range.hi == v; };
  if ((op == Op::kAdd && is_const(a, 0)) || (op == Op::kMul && is_const(a, 1))) return b;
  if (((op == Op::kAdd || op == Op::kSub) && is_const(b, 0)) ||
      ((op == Op::kMul || op == Op::kDiv) && is_const(b, 1))) {
    return a;
  }
  const Wide alo = a.range.lo, ahi = a.range.hi, blo = b.range.lo, bhi = b.range.hi;
  const char* name = op == Op::kAdd ? "add" : op == Op::kSub ? "sub" : op == Op::kMul ? "mul" : "div";
  bool plain = false;
  Wide lo = 0, hi = 0;
  switch (op) {
    case Op::kAdd:
      lo = alo + blo, hi = ahi + bhi;
      plain = fits(lo, hi, t);
      break;
    case Op::kSub:
      lo = alo - bhi, hi = ahi - blo;
      plain = fits(lo, hi, t);
      break;
    case Op::kMul: {
      const Wide c[4] = {alo * blo, alo * bhi, ahi * blo, ahi * bhi};
      lo = std::min({c[0], c[1], c[2], c[3]});
      hi = std::max({c[0], c[1], c[2], c[3]});
      plain = fits(lo, hi, t);
      break;
    }
    case Op::kDiv: {
      // Plain C division when the divisor is never 0 and MIN / -1 cannot happen; then the
      // quotient's extremes are at the corners (the divisor keeps one sign).
      const bool nonzero = blo > 0 || bhi < 0;
      const bool min_by_minus_one = blo <= -1 && bhi >= -1 && alo == type_range(t).lo;
      plain = nonzero && !min_by_minus_one;
      if (plain) {
        const Wide c[4] = {alo / blo, alo / bhi, ahi / blo, ahi / bhi};
        lo = std::min({c[0], c[1], c[2], c[3]});
        hi = std::max({c[0], c[1], c[2], c[3]});
      }
      break;
    }
    default:
      break;
  }
  if (!plain) {
    Code out = call(helper(name, t), {a, b});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);  // folded
  if ((op == Op::kAdd || op == Op::kSub) && b.range.lo == b.range.hi && b.range.lo < 0 &&
      b.range.lo > type_range(t).lo) {
    // x + -1 reads better as x - 1 (the same value).
    op = op == Op::kAdd ? Op::kSub : Op::kAdd;
    const bool narrow = b.narrow;
    b = int_const(-b.range.lo, t);
    b.narrow = narrow;
  }
  if (a.narrow && b.narrow) a = {"(" + std::string(tname(t)) + ")" + operand(a, kPrecUnary), kPrecUnary};
  const int prec = op == Op::kAdd || op == Op::kSub ? kPrecAdditive : kPrecMultiplicative;
  Code out = infix(a, ir::op_name(op), b, prec);
  out.range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  return out;
}

Code KernelEmitter::int_neg(const Code& a, DType t) {
  const Wide lo = -static_cast<Wide>(a.range.hi), hi = -static_cast<Wide>(a.range.lo);
  if (!fits(lo, hi, t)) {
    Code out = call(helper("neg", t), {a});
    out.range = type_range(t);
    return out;
  }
  if (lo == hi) return int_const(static_cast<int64_t>(lo), t);
  Code out = negate(a);
  out.range = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  return out;
}

Result<Code> KernelEmitter::condition(const LExprRef& c) {
  if (c->kind == LExpr::Kind::kOp && is_comparison(c->op)) {
    // (T)(a < b) != 0 is a < b.
    KILN_ASSIGN_OR_RETURN(Code a, expr(c->args[0]));
    KILN_ASSIGN_OR_RETURN(Code b, expr(c->args[1]));
    DType t = promote_types(c->args[0]->type, c->args[1]->type);
    a = convert(a, c->args[0]->type, t);
    b = convert(b, c->args[1]->type, t);
    int prec = c->op == Op::kEq || c->op == Op::kNe ? kPrecEquality : kPrecRelational;
    return infix(a, ir::op_name(c->op), b, prec);
  }
  KILN_ASSIGN_OR_RETURN(Code x, expr(c));
  return infix(x, "!=", literal(0, c->type, d_), kPrecEquality);
}

Result<Code> KernelEmitter::expr(const LExprRef& e) {
  switch (e->kind) {
    case LExpr::Kind::kConst:
      return literal(e->value, e->type, d_);
    case LExpr::Kind::kVar: {
      const std::optional<int64_t>& extent = var_extent_[e->var];
      if (!extent) {
        return error("loop variable v" + std::to_string(e->var) + " is used outside its loop");
      }
      Code v{var_name(e->var), kPrecPrimary};
      v.range = {0, std::max<int64_t>(0, *extent - 1)};
      return convert(v, DType::kI64, e->type);
    }
    case LExpr::Kind::kLoad: {
      const BindingInfo& b = bindings_[binding_of_node_.at(e->node)];
      KILN_ASSIGN_OR_RETURN(Code at, offset(e->offset));
      Code out{b.var + "[" + at.text + "]", kPrecPrimary};
      out.range = type_range(e->type);
      return out;
    }
    case LExpr::Kind::kLocalLoad: {
      const std::optional<DType>& type = local_in_scope_[e->local];
      if (!type) return error("loads local l" + std::to_string(e->local) + " outside its scope");
      if (*type != e->type) {
        return error("loads local l" + std::to_string(e->local) + " (" +
                     std::string(type_label(*type)) + ") as " + std::string(type_label(e->type)));
      }
      KILN_ASSIGN_OR_RETURN(Code at, offset(e->offset));
      Code out{local_name(e->local) + "[" + at.text + "]", kPrecPrimary};
      out.range = type_range(e->type);
      return out;
    }
    case LExpr::Kind::kOp:
      return op(*e);
  }
  return error("unknown expression kind");
}

// exp, log, ... of a float type.
Code KernelEmitter::unary_float(Op op, const Code& x, DType t) {
  switch (op) {
    case Op::kExp: return call(d_.math_function("exp", t), {x});
    case Op::kLog: return call(d_.math_function("log", t), {x});
    case Op::kSqrt: return call(d_.math_function("sqrt", t), {x});
    case Op::kTanh: return call(d_.math_function("tanh", t), {x});
    case Op::kSin: return call(d_.math_function("sin", t), {x});
    case Op::kCos: return call(d_.math_function("cos", t), {x});
    case Op::kFloor: return call(d_.math_function("floor", t), {x});
    case Op::kCeil: return call(d_.math_function("ceil", t), {x});
    case Op::kAbs: return call(d_.math_function("fabs", t), {x});
    case Op::kRsqrt: return call(helper("rsqrt", t), {x});
    case Op::kSigmoid: return call(helper("sigmoid", t), {x});
    case Op::kRelu: return call(helper("relu", t), {x});
    case Op::kNeg: return negate(x);
    default: return x;
  }
}

Result<Code> KernelEmitter::op(const LExpr& e) {
  const DType t = e.type;
  if (e.op == Op::kSelect) {
    // Only the chosen operand is evaluated (C's ?:), so a guarded load is safe.
    KILN_ASSIGN_OR_RETURN(Code c, condition(e.args[0]));
    KILN_ASSIGN_OR_RETURN(Code a, expr(e.args[1]));
    KILN_ASSIGN_OR_RETURN(Code b, expr(e.args[2]));
    a = convert(a, e.args[1]->type, t);
    b = convert(b, e.args[2]->type, t);
    Code out{operand(c, kPrecCond + 1) + " ? " + operand(a, kPrecCond + 1) + " : " +
                 operand(b, kPrecCond),
             kPrecCond};
    out.range = {std::min(a.range.lo, b.range.lo), std::max(a.range.hi, b.range.hi)};
    out.narrow = a.narrow && b.narrow;
    return out;
  }
  std::vector<Code> raw;
  for (const LExprRef& arg : e.args) {
    KILN_ASSIGN_OR_RETURN(Code code, expr(arg));
    raw.push_back(std::move(code));
  }
  // Operand i converted to type `to` (operands normally have the op's type already).
  auto arg = [&](size_t i, DType to) { return convert(raw[i], e.args[i]->type, to); };
  auto with_range = [](Code code, Range range) {
    code.range = range;
    return code;
  };

  switch (e.op) {
    case Op::kCastF32:
    case Op::kCastF64:
    case Op::kCastI32: {
      DType target = e.op == Op::kCastF32 ? DType::kF32 : e.op == Op::kCastF64 ? DType::kF64 : DType::kI32;
      return convert(arg(0, target), target, t);
    }
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv: {
      Code a = arg(0, t), b = arg(1, t);
      if (!is_float(t)) return int_arith(e.op, a, b, t);
      int prec = e.op == Op::kAdd || e.op == Op::kSub ? kPrecAdditive : kPrecMultiplicative;
      return infix(a, ir::op_name(e.op), b, prec);
    }
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe:
    case Op::kEq:
    case Op::kNe: {
      // 1 or 0 in the result type; compared in the operands' (promoted) type.
      DType ct = promote_types(e.args[0]->type, e.args[1]->type);
      int prec = e.op == Op::kEq || e.op == Op::kNe ? kPrecEquality : kPrecRelational;
      Code cmp = infix(arg(0, ct), ir::op_name(e.op), arg(1, ct), prec);
      return with_range(Code{"(" + std::string(tname(t)) + ")(" + cmp.text + ")", kPrecUnary},
                        Range{0, 1});
    }
    case Op::kMax:
    case Op::kMin: {
      Code a = arg(0, t), b = arg(1, t);
      bool max = e.op == Op::kMax;
      Range r = max ? Range{std::max(a.range.lo, b.range.lo), std::max(a.range.hi, b.range.hi)}
                    : Range{std::min(a.range.lo, b.range.lo), std::min(a.range.hi, b.range.hi)};
      return with_range(call(helper(max ? "max" : "min", t), {a, b}), r);
    }
    case Op::kPow: {
      if (is_float(t)) return call(d_.math_function("pow", t), {arg(0, t), arg(1, t)});
      // Integers: computed in f64 and cast back.
      Code p = call(d_.math_function("pow", DType::kF64), {arg(0, DType::kF64), arg(1, DType::kF64)});
      return convert(p, DType::kF64, t);
    }
    case Op::kFma: {
      Code a = arg(0, t), b = arg(1, t), c = arg(2, t);
      if (!is_float(t)) return int_arith(Op::kAdd, int_arith(Op::kMul, a, b, t), c, t);
      // Floats: the fused operation (loop.h allows rounding once), as the optimizer asked.
      return call(d_.math_function("fma", t), {a, b, c});
    }
    case Op::kNeg: {
      Code x = arg(0, t);
      return is_float(t) ? negate(x) : int_neg(x, t);
    }
    case Op::kAbs:
    case Op::kRelu:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kSin:
    case Op::kCos: {
      Code x = arg(0, t);
      if (is_float(t)) return unary_float(e.op, x, t);
      if (e.op == Op::kFloor || e.op == Op::kCeil) return x;  // identity on integers
      if (e.op == Op::kAbs) {
        Range r = x.range.lo >= 0 ? x.range : type_range(t);
        return with_range(call(helper("abs", t), {x}), r);
      }
      if (e.op == Op::kRelu) {
        return with_range(call(helper("relu", t), {x}),
                          Range{std::max<int64_t>(x.range.lo, 0), std::max<int64_t>(x.range.hi, 0)});
      }
      // Other math of integers: computed in f64 and cast back (saturating, NaN -> 0).
      Code f = unary_float(e.op, convert(x, t, DType::kF64), DType::kF64);
      return convert(f, DType::kF64, t);
    }
    case Op::kSelect:
      break;  // above
  }
  return error("unknown op");
}

// Whether `word` occurs as a whole identifier in C source outside /* */ comments (the emitter
// prints no other comments), e.g. whether a type name is used.
bool mentions_outside_comments(std::string_view text, std::string_view word) {
  auto ident = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) return false;
      i = end + 2;
      continue;
    }
    if (text.compare(i, word.size(), word) == 0 && (i == 0 || !ident(text[i - 1])) &&
        (i + word.size() == text.size() || !ident(text[i + word.size()]))) {
      return true;
    }
    ++i;
  }
  return false;
}

}  // namespace

std::string_view dialect_format(Dialect dialect) {
  switch (dialect) {
    case Dialect::kC: return "c";
    case Dialect::kOpenCL: return "opencl-c";
    case Dialect::kCuda: return "cuda-c";
  }
  return "?";
}

int64_t max_workgroups(const ir::Kernel& kernel) {
  if (kernel.body && kernel.body->kind == LStmt::Kind::kFor && kernel.body->parallel) {
    return std::max<int64_t>(1, kernel.body->extent);
  }
  return 1;
}

Result<std::string> emit_kernels(std::span<const ir::Kernel> kernels, const ir::Program* program,
                                 const EmitOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DialectSyntax> dialect, internal::make_dialect(options.dialect));
  HelperSet helpers(*dialect);
  Printer body;
  bool uses_heap = false;
  std::set<std::string> names;
  for (const Kernel& kernel : kernels) {
    if (!names.insert(kernel.name).second) {
      return invalid_argument_error("two kernels are named '" + kernel.name + "'");
    }
    body.blank();
    KernelEmitter emitter(*dialect, helpers, kernel, program, options);
    KILN_RETURN_IF_ERROR(emitter.emit(body));
    uses_heap = uses_heap || emitter.uses_heap();
  }

  Printer helper_text;
  helpers.emit(helper_text);
  const std::string_view f64_name = dialect->type_name(DType::kF64);
  const bool uses_f64 = mentions_outside_comments(body.text(), f64_name) ||
                        mentions_outside_comments(helper_text.text(), f64_name);

  Printer out;
  dialect->emit_extensions(out, uses_f64);
  if (options.comments) {
    out.line("/* Generated by kiln: " + std::to_string(kernels.size()) +
             (kernels.size() == 1 ? " kernel" : " kernels") + " in the " +
             std::string(dialect->name()) + " dialect. */");
  }
  dialect->emit_file_begin(out, uses_heap);
  if (!helpers.empty()) {
    out.blank();
    if (options.comments) out.line("/* Helpers: the semantics of the loop IR (kiln/ir/loop.h). */");
    helpers.emit(out);
  }
  out.append(body.text());
  return out.text();
}

}  // namespace kiln::codegen
