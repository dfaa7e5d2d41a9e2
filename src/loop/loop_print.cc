// The loop IR's text form, printing: print_kernel and print_lowered. Grammar and rules are in
// kiln/loop/loop.h; the parser is loop_parse.cc.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kiln/ir/printer.h"
#include "kiln/loop/loop.h"
#include "kiln/loop/op_eval.h"

#include "loop/loop_text_internal.h"

namespace kiln::ir {

namespace {

using namespace loop_text;

// ---------------------------------------------------------------------------------------------
// Printing.

void append_integer(std::string& out, int64_t value) { out += std::to_string(value); }

void append_double(std::string& out, double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) {
    out += "?";
    return;
  }
  out.append(buffer, end);
}

// An integer constant as the integer it evaluates to (a u64 unsigned), when that reads back as
// the same double (2^63 is INT64_MAX's, 2^64 UINT64_MAX's: the doubles nearest them); any other
// value as a double (which the parser refuses for an integer type).
void append_const_value(std::string& out, DType type, double value) {
  if (!is_float_type(type)) {
    const Scalar v = const_scalar(type, value);
    double back = 0;
    if (scalar_to_const(type, v, &back) && back == value) {
      out += type == DType::kU64 ? std::to_string(static_cast<uint64_t>(v.i)) : std::to_string(v.i);
      return;
    }
  }
  append_double(out, value);
}

void print_expr(const LExpr* e, std::string& out) {
  if (!e) {
    out += "(null)";
    return;
  }
  switch (e->kind) {
    case LExpr::Kind::kConst:
      if (e->type == DType::kI64 && exact_integer(e->value)) {
        append_integer(out, *exact_integer(e->value));
      } else {
        out += "(const ";
        out += type_text(e->type);
        out += ' ';
        append_const_value(out, e->type, e->value);
        out += ')';
      }
      return;
    case LExpr::Kind::kVar:
      out += 'v';
      append_integer(out, e->var);
      return;
    case LExpr::Kind::kSize:
      out += 's';
      append_integer(out, e->size);
      return;
    case LExpr::Kind::kLoad:
    case LExpr::Kind::kLocalLoad:
      out += e->kind == LExpr::Kind::kLoad ? "(load " : "(local_load ";
      out += type_text(e->type);
      out += ' ';
      append_integer(out, e->kind == LExpr::Kind::kLoad ? e->node : e->local);
      out += ' ';
      print_expr(e->offset.get(), out);
      out += ')';
      return;
    case LExpr::Kind::kOp: {
      const OpText* op = find_op(e->op);
      out += '(';
      out += op ? op->name : "?";
      // A cast's type is its name's, except a widening i32 cast into an offset: `(i32 i64 X)`.
      if (is_cast(e->op) ? e->type != cast_type(e->op) : e->type != DType::kI64) {
        out += ' ';
        out += type_text(e->type);
      }
      for (const LExprRef& arg : e->args) {
        out += ' ';
        print_expr(arg.get(), out);
      }
      out += ')';
      return;
    }
  }
  out += "(?)";
}

void print_stmt(const LStmt* s, int indent, std::string& out);

void print_body(const std::vector<LStmtRef>& body, int indent, std::string& out) {
  for (const LStmtRef& child : body) {
    out += '\n';
    out.append(static_cast<size_t>(indent) + 2, ' ');
    print_stmt(child.get(), indent + 2, out);
  }
  out += ')';
}

void print_stmt(const LStmt* s, int indent, std::string& out) {
  if (!s) {
    out += "(null)";
    return;
  }
  switch (s->kind) {
    case LStmt::Kind::kBlock:
      out += "(block";
      print_body(s->body, indent, out);
      return;
    case LStmt::Kind::kFor:
      out += "(for v";
      append_integer(out, s->var);
      out += ' ';
      if (s->extent_expr) {
        print_expr(s->extent_expr.get(), out);
      } else {
        append_integer(out, s->extent);
      }
      if (s->parallel) out += " parallel";
      print_body(s->body, indent, out);
      return;
    case LStmt::Kind::kIf:
      out += "(if ";
      print_expr(s->cond.get(), out);
      print_body(s->body, indent, out);
      return;
    case LStmt::Kind::kStore:
    case LStmt::Kind::kLocalStore:
      out += s->kind == LStmt::Kind::kStore ? "(store " : "(local_store ";
      append_integer(out, s->kind == LStmt::Kind::kStore ? s->node : s->local);
      out += ' ';
      print_expr(s->offset.get(), out);
      out += ' ';
      print_expr(s->value.get(), out);
      out += ')';
      return;
    case LStmt::Kind::kLocalDecl:
      out += "(local ";
      append_integer(out, s->local);
      out += ' ';
      out += type_text(s->type);
      out += ' ';
      append_integer(out, s->local_size);
      print_body(s->body, indent, out);
      return;
    case LStmt::Kind::kComment:
      out += "(comment \"";
      append_escaped(out, s->text);
      out += "\")";
      return;
    case LStmt::Kind::kFail:
      out += "(fail ";
      append_integer(out, s->site);
      out += " \"";
      append_escaped(out, s->text);
      out += "\" ";
      print_expr(s->value.get(), out);
      out += ')';
      return;
    case LStmt::Kind::kTrace:
      out += "(trace ";
      append_integer(out, s->site);
      out += ' ';
      append_integer(out, s->extent);
      out += ' ';
      print_expr(s->value.get(), out);
      for (const LExprRef& v : s->values) {
        out += ' ';
        print_expr(v.get(), out);
      }
      out += ')';
      return;
  }
  out += "(?)";
}

// A node's name for a comment: printable ASCII only, so the comment stays on its line.
std::string comment_safe(std::string_view name) {
  std::string safe;
  for (char c : name) safe += (c >= 0x20 && c < 0x7f) ? c : '?';
  return safe;
}

}  // namespace

std::string print_kernel(const Kernel& kernel, const Program* program) {
  std::string out = "(kernel " + kernel.name + " (nodes";
  for (int node : kernel.nodes) {
    out += ' ';
    append_integer(out, node);
  }
  out += ") (vars ";
  append_integer(out, kernel.var_count);
  out += ") (locals ";
  append_integer(out, kernel.local_count);
  out += ')';
  if (kernel.size_count > 0) {
    out += " (sizes ";
    append_integer(out, kernel.size_count);
    out += ')';
  }
  if (program && !kernel.nodes.empty()) {
    out += "  ;";
    for (size_t i = 0; i < kernel.nodes.size(); ++i) {
      int node = kernel.nodes[i];
      out += i == 0 ? " " : ", ";
      append_integer(out, node);
      out += ": ";
      bool known = node >= 0 && static_cast<size_t>(node) < program->nodes.size();
      out += known ? comment_safe(program->nodes[static_cast<size_t>(node)].name) : "?";
    }
  }
  out += "\n  ";
  if (kernel.body) {
    print_stmt(kernel.body.get(), 2, out);
  } else {
    out += "(block)";
  }
  out += ")\n";
  return out;
}

std::string print_lowered(const LoweredProgram& lowered) {
  std::string out;
  for (const LoweredRoutine& routine : lowered.routines) {
    if (!out.empty()) out += '\n';
    out += "; routine " + comment_safe(routine.name) + ": " +
           std::to_string(routine.kernels.size()) +
           (routine.kernels.size() == 1 ? " kernel" : " kernels") +
           (routine.calls.empty() ? "" : ", " + std::to_string(routine.calls.size()) +
                                             (routine.calls.size() == 1 ? " call" : " calls")) +
           "\n";
    if (!routine.shared.empty()) {
      // NAME@OFFSET (fixed shapes) or NAME (a shape with a size: placed when it runs), and the
      // actions it lives through.
      std::vector<int64_t> bytes;
      bool sized = false;
      for (const SharedNode& n : routine.shared) {
        const TensorNode& t = lowered.program.nodes[static_cast<size_t>(n.node)];
        sized = sized || t.is_sized();
        bytes.push_back(t.byte_size());
      }
      const SharedLayout layout = layout_shared_buffer(routine.shared, bytes);
      out += "; shared buffer" + (sized ? std::string(" (placed at the run's sizes)") : ", " + std::to_string(layout.bytes) + " bytes") + ":";
      for (size_t i = 0; i < routine.shared.size(); ++i) {
        const SharedNode& n = routine.shared[i];
        out += " " + comment_safe(lowered.program.nodes[static_cast<size_t>(n.node)].name) +
               (sized ? "" : "@" + std::to_string(layout.offsets[i])) + " [" + std::to_string(n.first) + "-" +
               std::to_string(n.last) + "]";
      }
      out += "\n";
    }
    // Calls as comments where they run between the kernels (the text reparses as kernels).
    size_t next_call = 0;
    auto print_calls = [&](size_t kernels_before) {
      for (; next_call < routine.calls.size() && routine.calls[next_call].after_kernels <= kernels_before; ++next_call) {
        out += "; " + comment_safe(print_call(lowered.program, routine.calls[next_call].call)) + "\n";
      }
    };
    for (size_t k = 0; k < routine.kernels.size(); ++k) {
      print_calls(k);
      out += print_kernel(routine.kernels[k], &lowered.program);
    }
    print_calls(SIZE_MAX);
  }
  return out;
}

}  // namespace kiln::ir
