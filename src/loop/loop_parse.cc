// The loop IR's text form, parsing: parse_kernel(s). It reads s-expressions without recursion
// (depth-limited; sexpr_reader.h), then builds and validates the kernel over that bounded tree,
// so no input can crash it. Grammar and rules are in kiln/loop/loop.h; the printer is loop_print.cc.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kiln/loop/loop.h"
#include "kiln/loop/op_eval.h"

#include "loop/loop_text_internal.h"
#include "loop/sexpr_reader.h"

namespace kiln::ir {

namespace {

using namespace loop_text;


// ---------------------------------------------------------------------------------------------
// Building and validating a kernel from its s-expression.

std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// An integer of any type's range: an int64, or (u64) an unsigned one above INT64_MAX.
std::optional<__int128> parse_integer(std::string_view text) {
  if (std::optional<int64_t> i = parse_int64(text)) return *i;
  uint64_t u = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), u);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return u;
}

// The least and greatest value of an integer type (bool: 0 and 1).
std::pair<__int128, __int128> integer_limits(DType t) {
  if (t == DType::kBool) return {0, 1};
  const int bits = dtype_bits(t);
  if (is_unsigned_type(t)) return {0, (static_cast<__int128>(1) << bits) - 1};
  return {-(static_cast<__int128>(1) << (bits - 1)), (static_cast<__int128>(1) << (bits - 1)) - 1};
}

std::string integer_text(__int128 v) {
  return v < 0 ? std::to_string(static_cast<int64_t>(v)) : std::to_string(static_cast<uint64_t>(v));
}

class KernelBuilder {
 public:
  Result<Kernel> build(const SNode& form) {
    Kernel kernel;
    if (form.kind != SNode::Kind::kList) {
      return error_at(form, "expected '(kernel ...)', got " + describe(form));
    }
    const std::vector<SNode>& items = form.items;
    if (items.empty() || items[0].kind != SNode::Kind::kAtom || items[0].text != "kernel") {
      return error_at(items.empty() ? form : items[0],
                      "expected '(kernel NAME (nodes ...) (vars N) (locals N) BODY)', got " +
                          describe(form));
    }
    KILN_RETURN_IF_ERROR(require(form, 1, "the kernel's name"));
    if (items[1].kind != SNode::Kind::kAtom || !is_identifier(items[1].text)) {
      return error_at(items[1], "expected the kernel's name (a C identifier), got " +
                                    describe(items[1]));
    }
    kernel.name = items[1].text;

    KILN_RETURN_IF_ERROR(require(form, 2, "'(nodes ...)'"));
    const SNode* nodes = header(items[2], "nodes");
    if (!nodes) return error_at(items[2], "expected '(nodes ID...)', got " + describe(items[2]));
    for (size_t i = 1; i < nodes->items.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t id, integer(nodes->items[i], "a node id", 0, INT32_MAX));
      if (std::find(kernel.nodes.begin(), kernel.nodes.end(), id) != kernel.nodes.end()) {
        return error_at(nodes->items[i], "node " + std::to_string(id) + " is listed twice");
      }
      kernel.nodes.push_back(static_cast<int>(id));
    }
    node_types_.assign(kernel.nodes.size(), std::nullopt);
    nodes_ = &kernel.nodes;

    KILN_RETURN_IF_ERROR(require(form, 3, "'(vars N)'"));
    KILN_ASSIGN_OR_RETURN(kernel.var_count, count(items[3], "vars", kMaxKernelVars));
    KILN_RETURN_IF_ERROR(require(form, 4, "'(locals N)'"));
    KILN_ASSIGN_OR_RETURN(kernel.local_count, count(items[4], "locals", kMaxKernelLocals));
    var_bound_.assign(static_cast<size_t>(kernel.var_count), false);
    local_types_.assign(static_cast<size_t>(kernel.local_count), std::nullopt);
    size_t body_at = 5;
    if (items.size() > 5 && header(items[5], "sizes")) {
      KILN_ASSIGN_OR_RETURN(kernel.size_count, count(items[5], "sizes", kMaxKernelSizes));
      ++body_at;
    }
    size_count_ = kernel.size_count;

    KILN_RETURN_IF_ERROR(require(form, body_at, "the kernel's body (one statement)"));
    if (items.size() > body_at + 1) {
      return error_at(items[body_at + 1], "expected ')' after the kernel's body (a kernel has one body "
                                          "statement; use (block ...) for several), got " +
                                              describe(items[body_at + 1]));
    }
    KILN_ASSIGN_OR_RETURN(kernel.body, stmt(items[body_at]));
    return kernel;
  }

 private:
  // An error when `list` has no item `index`, located at its ')'.
  static Status require(const SNode& list, size_t index, const std::string& what) {
    if (index < list.items.size()) return Status();
    return error_at(list.end_line, list.end_column, "expected " + what + " before ')'");
  }

  static const SNode* header(const SNode& node, std::string_view keyword) {
    if (node.kind != SNode::Kind::kList || node.items.empty()) return nullptr;
    const SNode& head = node.items[0];
    return head.kind == SNode::Kind::kAtom && head.text == keyword ? &node : nullptr;
  }

  static Result<int64_t> integer(const SNode& node, const std::string& what, int64_t min,
                                 int64_t max) {
    std::optional<int64_t> value;
    if (node.kind == SNode::Kind::kAtom) value = parse_int64(node.text);
    if (!value || *value < min || *value > max) {
      return error_at(node, "expected " + what + " (an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]), got " + describe(node));
    }
    return *value;
  }

  static Result<int> count(const SNode& node, std::string_view keyword, int64_t max) {
    const SNode* list = header(node, keyword);
    std::string form = "'(" + std::string(keyword) + " N)'";
    if (!list || list->items.size() != 2) {
      return error_at(node, "expected " + form + ", got " + describe(node));
    }
    KILN_ASSIGN_OR_RETURN(int64_t n, integer(list->items[1], "a count", 0, max));
    return static_cast<int>(n);
  }

  static Result<DType> type(const SNode& node) {
    if (node.kind == SNode::Kind::kAtom) {
      if (std::optional<DType> t = parse_type(node.text)) return *t;
    }
    return error_at(node, "expected a type (one of " + std::string(dtype_list()) + "), got " + describe(node));
  }

  // "vN": a loop variable of this kernel.
  Result<int> var_number(const SNode& node) {
    std::optional<int64_t> n;
    if (node.kind == SNode::Kind::kAtom && node.text.size() > 1 && node.text[0] == 'v' &&
        node.text[1] >= '0' && node.text[1] <= '9') {
      n = parse_int64(std::string_view(node.text).substr(1));
    }
    if (!n) return error_at(node, "expected a loop variable 'vN', got " + describe(node));
    if (*n < 0 || *n >= static_cast<int64_t>(var_bound_.size())) {
      return error_at(node, "loop variable " + node.text +
                                " is out of range: the kernel declares (vars " +
                                std::to_string(var_bound_.size()) + ")");
    }
    return static_cast<int>(*n);
  }

  // "sN": a size of this kernel.
  Result<LExprRef> size_value(const SNode& node) {
    std::optional<int64_t> n;
    if (node.text.size() > 1 && node.text[1] >= '0' && node.text[1] <= '9') {
      n = parse_int64(std::string_view(node.text).substr(1));
    }
    if (!n) return error_at(node, "expected a size 'sN', got " + describe(node));
    if (*n < 0 || *n >= size_count_) {
      return error_at(node, "size " + node.text + " is out of range: the kernel declares (sizes " +
                                std::to_string(size_count_) + ")");
    }
    return lsize(static_cast<int>(*n));
  }

  Result<int> local_number(const SNode& node) {
    KILN_ASSIGN_OR_RETURN(int64_t n, integer(node, "a local array number", 0, INT32_MAX));
    if (n >= static_cast<int64_t>(local_types_.size())) {
      return error_at(node, "local " + std::to_string(n) +
                                " is out of range: the kernel declares (locals " +
                                std::to_string(local_types_.size()) + ")");
    }
    return static_cast<int>(n);
  }

  // A use of local `local` (declared in an enclosing (local ...)) as `t`.
  Status use_local(const SNode& at, int local, DType t) {
    const std::optional<DType>& declared = local_types_[static_cast<size_t>(local)];
    if (!declared) {
      return error_at(at, "local " + std::to_string(local) +
                              " is used outside a (local " + std::to_string(local) +
                              " ...) declaring it");
    }
    if (*declared != t) {
      return error_at(at, "local " + std::to_string(local) + " is declared " +
                              std::string(type_text(*declared)) + " but used as " +
                              std::string(type_text(t)));
    }
    return Status();
  }

  // A use of node `id` as `t`: the node must be listed in (nodes ...), and every use of one
  // node has one type.
  Status use_node(const SNode& at, int64_t id, DType t) {
    auto it = std::find(nodes_->begin(), nodes_->end(), id);
    if (it == nodes_->end()) {
      return error_at(at, "node " + std::to_string(id) + " is not listed in the kernel's (nodes ...)");
    }
    std::optional<DType>& seen = node_types_[static_cast<size_t>(it - nodes_->begin())];
    if (seen && *seen != t) {
      return error_at(at, "node " + std::to_string(id) + " is used as " +
                              std::string(type_text(*seen)) + " and as " +
                              std::string(type_text(t)));
    }
    seen = t;
    return Status();
  }

  Result<LExprRef> offset(const SNode& node) {
    KILN_ASSIGN_OR_RETURN(LExprRef e, expr(node));
    if (e->type != DType::kI64) {
      return error_at(node, "expected an i64 offset, got an expression of type " +
                                std::string(type_text(e->type)));
    }
    return e;
  }

  Result<LExprRef> constant(const SNode& at, DType t, const SNode& value) {
    if (value.kind != SNode::Kind::kAtom) {
      return error_at(value, "expected a number, got " + describe(value));
    }
    if (!is_float_type(t)) {
      // An integer of the type's range (bool: 0 or 1; u64 up to 2^64 - 1), held as the double
      // that evaluates to it (const_scalar), so one whose double reads back as another integer
      // is refused.
      const std::optional<__int128> i = parse_integer(value.text);
      const auto [lo, hi] = integer_limits(t);
      if (!i || *i < lo || *i > hi) {
        return error_at(value, "expected " + std::string(type_text(t)[0] == 'i' ? "an " : "a ") +
                                   std::string(type_text(t)) + " constant (an integer in [" + integer_text(lo) +
                                   ", " + integer_text(hi) + "]), got " + describe(value));
      }
      const double d = static_cast<double>(*i);
      const int64_t back = const_scalar(t, d).i;
      if ((t == DType::kU64 ? static_cast<__int128>(static_cast<uint64_t>(back)) : back) != *i) {
        return error_at(value, "integer constant " + value.text +
                                   " is not exactly representable (constants are held as f64; "
                                   "use one within +-2^53)");
      }
      return lconst(t, d);
    }
    double d = 0;
    const char* first = value.text.data();
    const char* last = first + value.text.size();
    auto [end, ec] = std::from_chars(first, last, d);
    if (value.text.empty() || ec == std::errc::invalid_argument || end != last) {
      return error_at(value, "expected a floating-point number, got " + describe(value));
    }
    if (ec == std::errc::result_out_of_range) {
      return error_at(value, "number " + quoted(value.text) + " is out of the range of f64");
    }
    return lconst(t, d);
  }

  Status check_op_types(const SNode& at, Op op, DType t, const std::vector<LExprRef>& args,
                        std::string_view name) {
    auto mismatch = [&](size_t i, DType want) {
      return error_at(at, "'" + std::string(name) + "' of type " + std::string(type_text(t)) +
                              " needs operand " + std::to_string(i + 1) + " of type " +
                              std::string(type_text(want)) + ", got " +
                              std::string(type_text(args[i]->type)) + " (insert a cast)");
    };
    if (is_cast(op)) return Status();
    if (is_comparison(op)) {
      if (args[1]->type != args[0]->type) return mismatch(1, args[0]->type);
      return Status();
    }
    const bool bitwise = op == Op::kBitNot || op == Op::kBitAnd || op == Op::kBitOr || op == Op::kBitXor;
    const bool shift = op == Op::kShl || op == Op::kShr;
    if ((bitwise || shift) && is_float_type(t)) {
      return error_at(at, "'" + std::string(name) + "' takes bool or integers (shifts: integers), not " +
                              std::string(type_text(t)));
    }
    if (shift && (t == DType::kBool || is_float_type(args[1]->type) || args[1]->type == DType::kBool)) {
      return error_at(at, "'" + std::string(name) + "' shifts an integer by an integer, got " +
                              std::string(type_text(t)) + " and " + std::string(type_text(args[1]->type)));
    }
    // select's condition and a shift's amount may have any (integer) type.
    size_t first = op == Op::kSelect ? 1 : 0;
    const size_t last = shift ? 1 : args.size();
    for (size_t i = first; i < last; ++i) {
      if (args[i]->type != t) return mismatch(i, t);
    }
    return Status();
  }

  Result<LExprRef> expr(const SNode& node) {
    if (node.kind == SNode::Kind::kString) {
      return error_at(node, "expected an expression, got a string");
    }
    if (node.kind == SNode::Kind::kAtom) {
      if (!node.text.empty() && node.text[0] == 'v') {
        KILN_ASSIGN_OR_RETURN(int v, var_number(node));
        if (!var_bound_[static_cast<size_t>(v)]) {
          return error_at(node, "loop variable " + node.text + " is used outside a loop over it");
        }
        return lvar(v);
      }
      if (!node.text.empty() && node.text[0] == 's') return size_value(node);
      if (!node.text.empty() &&
          ((node.text[0] >= '0' && node.text[0] <= '9') || node.text[0] == '-')) {
        if (!parse_int64(node.text)) {
          return error_at(node, "expected an i64 integer, got " + describe(node) +
                                    " (write other constants as (const TYPE VALUE))");
        }
        return constant(node, DType::kI64, node);
      }
      return error_at(node, "expected an expression (a loop variable 'vN', an integer, or a "
                            "list), got " + describe(node));
    }
    const std::vector<SNode>& items = node.items;
    if (items.empty() || items[0].kind != SNode::Kind::kAtom) {
      return error_at(node, "expected an expression '(OP ...)', got " + describe(node));
    }
    const std::string& head = items[0].text;
    if (head == "const") {
      if (items.size() != 3) {
        return error_at(node, "expected '(const TYPE VALUE)'");
      }
      KILN_ASSIGN_OR_RETURN(DType t, type(items[1]));
      return constant(node, t, items[2]);
    }
    if (head == "load" || head == "local_load") {
      const bool local = head == "local_load";
      if (items.size() != 4) {
        return error_at(node, "expected '(" + head + " TYPE " + (local ? "LOCAL" : "NODE") +
                                  " OFFSET)'");
      }
      KILN_ASSIGN_OR_RETURN(DType t, type(items[1]));
      if (local) {
        KILN_ASSIGN_OR_RETURN(int l, local_number(items[2]));
        KILN_RETURN_IF_ERROR(use_local(items[2], l, t));
        KILN_ASSIGN_OR_RETURN(LExprRef off, offset(items[3]));
        return llocal_load(l, t, std::move(off));
      }
      KILN_ASSIGN_OR_RETURN(int64_t id, integer(items[2], "a node id", 0, INT32_MAX));
      KILN_RETURN_IF_ERROR(use_node(items[2], id, t));
      KILN_ASSIGN_OR_RETURN(LExprRef off, offset(items[3]));
      return lload(static_cast<int>(id), t, std::move(off));
    }
    const OpText* op = find_op(std::string_view(head));
    if (!op) {
      return error_at(items[0], "unknown operation " + quoted(head) +
                                    " (expected const, load, local_load, or an op such as +, exp, "
                                    "max, select, f32)");
    }
    size_t next = 1;
    DType t = DType::kI64;
    const bool typed_atom = next < items.size() && items[next].kind == SNode::Kind::kAtom && parse_type(items[next].text);
    if (is_cast(op->op)) {
      t = cast_type(op->op);
      // Casts take no type, except `(i32 i64 X)`: an i32 value widened into an offset.
      if (op->op == Op::kCastI32 && typed_atom && *parse_type(items[next].text) == DType::kI64) {
        t = DType::kI64;
        ++next;
      }
    } else if (typed_atom) {
      t = *parse_type(items[next].text);
      ++next;
    }
    const size_t given = items.size() - next;
    if (given != static_cast<size_t>(op->arity)) {
      return error_at(node, "'" + head + "' takes " + std::to_string(op->arity) + " operand" +
                                (op->arity == 1 ? "" : "s") + ", got " + std::to_string(given));
    }
    std::vector<LExprRef> args;
    for (size_t i = next; i < items.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(LExprRef arg, expr(items[i]));
      args.push_back(std::move(arg));
    }
    KILN_RETURN_IF_ERROR(check_op_types(node, op->op, t, args, head));
    return lop(op->op, t, std::move(args));
  }

  Status body(const SNode& list, size_t first, std::vector<LStmtRef>* out) {
    for (size_t i = first; i < list.items.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(LStmtRef s, stmt(list.items[i]));
      out->push_back(std::move(s));
    }
    return Status();
  }

  // What a loop's extent may be: i64 arithmetic (no select) of integers, sizes and variables.
  static bool extent_expression(const LExpr& e) {
    if (e.type != DType::kI64) return false;
    switch (e.kind) {
      case LExpr::Kind::kConst:
      case LExpr::Kind::kSize:
      case LExpr::Kind::kVar:
        return true;
      case LExpr::Kind::kOp:
        if (e.op == Op::kSelect) return false;
        for (const LExprRef& a : e.args) {
          if (!a || !extent_expression(*a)) return false;
        }
        return true;
      default:
        return false;
    }
  }

  Result<LStmtRef> stmt(const SNode& node) {
    static const char* kStatements =
        "a statement (block, for, if, store, local, local_store, comment, trace or fail)";
    if (node.kind != SNode::Kind::kList || node.items.empty() ||
        node.items[0].kind != SNode::Kind::kAtom) {
      return error_at(node, std::string("expected ") + kStatements + ", got " + describe(node));
    }
    const std::vector<SNode>& items = node.items;
    const std::string& head = items[0].text;
    auto s = std::make_shared<LStmt>();
    if (head == "block") {
      s->kind = LStmt::Kind::kBlock;
      KILN_RETURN_IF_ERROR(body(node, 1, &s->body));
    } else if (head == "for") {
      s->kind = LStmt::Kind::kFor;
      KILN_RETURN_IF_ERROR(require(node, 1, "the loop variable 'vN'"));
      KILN_ASSIGN_OR_RETURN(s->var, var_number(items[1]));
      KILN_RETURN_IF_ERROR(require(node, 2, "the loop extent"));
      if (items[2].kind == SNode::Kind::kList ||
          (!items[2].text.empty() && (items[2].text[0] == 's' || items[2].text[0] == 'v'))) {
        // A loop over a size: an i64 expression of sizes, integers and (a triangular loop) the
        // variables of enclosing loops.
        KILN_ASSIGN_OR_RETURN(s->extent_expr, expr(items[2]));
        if (!extent_expression(*s->extent_expr)) {
          return error_at(items[2], "expected the loop extent (an integer, or an i64 expression of sizes, "
                                    "integers and enclosing loops' variables), got " + describe(items[2]));
        }
        s->extent = -1;
      } else {
        KILN_ASSIGN_OR_RETURN(s->extent, integer(items[2], "the loop extent", 0, INT64_MAX));
      }
      size_t next = 3;
      if (next < items.size() && items[next].kind == SNode::Kind::kAtom &&
          items[next].text == "parallel") {
        s->parallel = true;
        ++next;
      }
      std::vector<bool>::reference bound = var_bound_[static_cast<size_t>(s->var)];
      if (bound) {
        return error_at(items[1], "loop variable " + items[1].text +
                                      " is already the variable of an enclosing loop");
      }
      bound = true;
      Status status = body(node, next, &s->body);
      var_bound_[static_cast<size_t>(s->var)] = false;
      KILN_RETURN_IF_ERROR(status);
    } else if (head == "if") {
      s->kind = LStmt::Kind::kIf;
      KILN_RETURN_IF_ERROR(require(node, 1, "the condition"));
      KILN_ASSIGN_OR_RETURN(s->cond, expr(items[1]));
      KILN_RETURN_IF_ERROR(body(node, 2, &s->body));
    } else if (head == "store" || head == "local_store") {
      const bool local = head == "local_store";
      if (items.size() != 4) {
        return error_at(node, "expected '(" + head + (local ? " LOCAL" : " NODE") +
                                  " OFFSET VALUE)'");
      }
      s->kind = local ? LStmt::Kind::kLocalStore : LStmt::Kind::kStore;
      int64_t id = 0;
      if (local) {
        KILN_ASSIGN_OR_RETURN(s->local, local_number(items[1]));
      } else {
        KILN_ASSIGN_OR_RETURN(id, integer(items[1], "a node id", 0, INT32_MAX));
        s->node = static_cast<int>(id);
      }
      KILN_ASSIGN_OR_RETURN(s->offset, offset(items[2]));
      KILN_ASSIGN_OR_RETURN(s->value, expr(items[3]));
      s->type = s->value->type;
      if (local) {
        KILN_RETURN_IF_ERROR(use_local(items[1], s->local, s->type));
      } else {
        KILN_RETURN_IF_ERROR(use_node(items[1], id, s->type));
      }
    } else if (head == "local") {
      s->kind = LStmt::Kind::kLocalDecl;
      KILN_RETURN_IF_ERROR(require(node, 1, "the local array's number"));
      KILN_ASSIGN_OR_RETURN(s->local, local_number(items[1]));
      KILN_RETURN_IF_ERROR(require(node, 2, "the local array's element type"));
      KILN_ASSIGN_OR_RETURN(s->type, type(items[2]));
      KILN_RETURN_IF_ERROR(require(node, 3, "the local array's size"));
      KILN_ASSIGN_OR_RETURN(s->local_size,
                            integer(items[3], "the local array's size", 1, INT64_MAX));
      std::optional<DType>& declared = local_types_[static_cast<size_t>(s->local)];
      if (declared) {
        return error_at(items[1], "local " + items[1].text +
                                      " is already declared by an enclosing (local ...)");
      }
      declared = s->type;
      Status status = body(node, 4, &s->body);
      local_types_[static_cast<size_t>(s->local)] = std::nullopt;
      KILN_RETURN_IF_ERROR(status);
    } else if (head == "comment") {
      s->kind = LStmt::Kind::kComment;
      if (items.size() != 2 || items[1].kind != SNode::Kind::kString) {
        return error_at(node, "expected '(comment \"TEXT\")'");
      }
      s->text = items[1].text;
    } else if (head == "fail") {
      s->kind = LStmt::Kind::kFail;
      if (items.size() != 4 || items[2].kind != SNode::Kind::kString) {
        return error_at(node, "expected '(fail SITE \"TEXT\" VALUE)'");
      }
      KILN_ASSIGN_OR_RETURN(int64_t site, integer(items[1], "the failure's site", 0, INT32_MAX - kFirstFailureCode));
      s->site = static_cast<int>(site);
      s->text = items[2].text;
      KILN_ASSIGN_OR_RETURN(s->value, expr(items[3]));
      if (s->value->type != DType::kI64) {
        return error_at(items[3], "expected the failure's value as an i64 expression, got " +
                                      std::string(dtype_name(s->value->type)));
      }
    } else if (head == "trace") {
      s->kind = LStmt::Kind::kTrace;
      if (items.size() < 4) return error_at(node, "expected '(trace SITE LIMIT RUN VALUE...)'");
      KILN_ASSIGN_OR_RETURN(int64_t site, integer(items[1], "the trace site", 0, INT32_MAX));
      s->site = static_cast<int>(site);
      KILN_ASSIGN_OR_RETURN(s->extent, integer(items[2], "the trace's line limit", 0, INT32_MAX));
      KILN_ASSIGN_OR_RETURN(s->value, expr(items[3]));
      if (s->value->type != DType::kI32) {
        return error_at(items[3], "expected the run id as an i32 expression, got " +
                                      std::string(dtype_name(s->value->type)));
      }
      for (size_t i = 4; i < items.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(LExprRef v, expr(items[i]));
        s->values.push_back(std::move(v));
      }
    } else {
      return error_at(items[0], std::string("expected ") + kStatements + ", got " +
                                    describe(items[0]));
    }
    return LStmtRef(std::move(s));
  }

  const std::vector<int>* nodes_ = nullptr;
  std::vector<std::optional<DType>> node_types_;  // per binding position
  std::vector<bool> var_bound_;                   // bound by an enclosing for
  int size_count_ = 0;                            // the kernel's (sizes N)
  std::vector<std::optional<DType>> local_types_;  // declared by an enclosing (local ...)
};

}  // namespace

Result<std::vector<Kernel>> parse_kernels(std::string_view text) {
  Reader reader(text);
  std::vector<Kernel> kernels;
  std::vector<std::pair<int, int>> where;  // of each kernel's name, for duplicate errors
  for (;;) {
    KILN_ASSIGN_OR_RETURN(std::optional<SNode> form, reader.next());
    if (!form) return kernels;
    KILN_ASSIGN_OR_RETURN(Kernel kernel, KernelBuilder().build(*form));
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (kernels[i].name == kernel.name) {
        return error_at(form->items[1], "kernel name '" + kernel.name + "' is already used by the kernel at " +
                                            std::to_string(where[i].first) + ":" +
                                            std::to_string(where[i].second));
      }
    }
    where.emplace_back(form->items[1].line, form->items[1].column);
    kernels.push_back(std::move(kernel));
  }
}

Result<Kernel> parse_kernel(std::string_view text) {
  Reader reader(text);
  KILN_ASSIGN_OR_RETURN(std::optional<SNode> form, reader.next());
  if (!form) return invalid_argument_error("1:1: expected '(kernel ...)', got an empty text");
  KILN_ASSIGN_OR_RETURN(Kernel kernel, KernelBuilder().build(*form));
  KILN_ASSIGN_OR_RETURN(std::optional<SNode> extra, reader.next());
  if (extra) {
    return error_at(*extra, "expected the end of the text after the kernel, got " +
                                describe(*extra) + " (use parse_kernels for several)");
  }
  return kernel;
}

}  // namespace kiln::ir