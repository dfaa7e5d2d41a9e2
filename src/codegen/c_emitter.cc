// The C-syntax emitter's file level: every kernel printed by a KernelEmitter (kernel_emitter.h),
// then the file put together — extensions, includes, the helpers the kernels use, the kernels —
// with the dialect (dialect.h) answering what differs between C, OpenCL C and CUDA C.
#include "kiln/codegen/c_emitter.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "codegen/dialect.h"
#include "codegen/kernel_emitter.h"
#include "kiln/kernel_abi.h"

namespace kiln::codegen {

namespace {

using internal::DialectSyntax;
using internal::HelperSet;
using internal::KernelEmitter;
using internal::Printer;
using ir::DType;
using ir::Kernel;
using ir::LStmt;

// C source with each /* */ comment made one space (the emitter prints no other comments; an
// unterminated one ends the text).
std::string without_comments(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) break;
      out += ' ';
      i = end + 2;
      continue;
    }
    out += text[i++];
  }
  return out;
}

// Whether `word` occurs as a whole identifier in C source outside comments, e.g. whether a type
// name is used.
bool mentions_outside_comments(std::string_view text, std::string_view word) {
  auto ident = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  const std::string code = without_comments(text);
  for (size_t i = code.find(word); i != std::string::npos; i = code.find(word, i + 1)) {
    if ((i == 0 || !ident(code[i - 1])) && (i + word.size() == code.size() || !ident(code[i + word.size()]))) {
      return true;
    }
  }
  return false;
}

// A kernel's text without its comments and with its name (where it is defined) made anonymous:
// two kernels with the same result compute the same thing.
std::string code_without_name(std::string_view text, std::string_view name) {
  std::string out = without_comments(text);
  const std::string defined = " " + std::string(name) + "(";
  if (const size_t at = out.find(defined); at != std::string::npos) out.replace(at, defined.size(), " (");
  return out;
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

namespace {

int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > INT64_MAX / b ? INT64_MAX : a * b;
}

// `e` with each loop variable at the middle of its loop (`middle`, by variable).
ir::LExprRef at_middle(const ir::LExprRef& e, const std::map<int, int64_t>& middle) {
  if (!e) return e;
  if (e->kind == ir::LExpr::Kind::kVar) {
    auto m = middle.find(e->var);
    return m == middle.end() ? e : ir::lconst(DType::kI64, static_cast<double>(m->second));
  }
  if (e->args.empty()) return e;
  auto copy = std::make_shared<ir::LExpr>(*e);
  for (ir::LExprRef& a : copy->args) a = at_middle(a, middle);
  return copy;
}

// `middle`: the enclosing loops' variables at the middle of their ranges, where a triangular
// loop's extent (an affine one) takes its average.
int64_t stores_of(const ir::LStmtRef& s, std::map<int, int64_t>& middle) {
  if (!s) return 0;
  switch (s->kind) {
    case LStmt::Kind::kStore:
    case LStmt::Kind::kLocalStore:
      return 1;
    case LStmt::Kind::kComment:
      return 0;
    default: {
      int64_t extent = s->extent;
      if (s->kind == LStmt::Kind::kFor && ir::is_triangular(*s)) {
        extent = ir::evaluate_extent(*at_middle(s->extent_expr, middle), {}).value_or(0);
      }
      if (s->kind == LStmt::Kind::kFor) middle[s->var] = std::max<int64_t>(0, extent - 1) / 2;
      int64_t body = 0;
      for (const ir::LStmtRef& b : s->body) body = std::min(INT64_MAX - 1, body + stores_of(b, middle));
      if (s->kind == LStmt::Kind::kFor) middle.erase(s->var);
      return s->kind == LStmt::Kind::kFor ? saturating_mul(std::max<int64_t>(0, extent), body) : body;
    }
  }
}

}  // namespace

int64_t estimated_stores(const ir::Kernel& kernel) {
  std::map<int, int64_t> middle;
  return stores_of(kernel.body, middle);
}

uint32_t workgroups_for_size(const ir::Kernel& kernel, uint32_t cap, int64_t min_stores) {
  const int64_t by_work = estimated_stores(kernel) / std::max<int64_t>(1, min_stores);
  return static_cast<uint32_t>(
      std::clamp<int64_t>(std::min({by_work, max_workgroups(kernel), int64_t{cap}}), 1, std::max<uint32_t>(cap, 1)));
}

Result<std::string> emit_kernels(std::span<const ir::Kernel> kernels, const ir::Program* program,
                                 const EmitOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DialectSyntax> dialect, internal::make_dialect(options.dialect));
  HelperSet helpers(*dialect);
  Printer body;
  bool uses_heap = false;
  bool uses_print = false;
  bool fails = false;
  std::set<std::string> names;
  // Each kernel's code without its name and comments, and the first kernel that has it.
  std::map<std::string, std::string> first_with_code;
  const bool units = dialect->separate_units();
  for (const Kernel& kernel : kernels) {
    if (!names.insert(kernel.name).second) {
      return invalid_argument_error("two kernels are named '" + kernel.name + "'");
    }
    Printer text;
    KernelEmitter emitter(*dialect, helpers, kernel, program, options);
    KILN_RETURN_IF_ERROR(emitter.emit(text));
    uses_heap = uses_heap || emitter.uses_heap();
    uses_print = uses_print || emitter.uses_print();
    fails = fails || emitter.fails();
    body.blank();
    if (units) body.line(KILN_UNIT_BOUNDARY);
    // Routines often repeat a kernel (a forward pass in training and in evaluation): its code is
    // emitted once and the copies call it.
    auto [same, inserted] = first_with_code.try_emplace(code_without_name(text.text(), kernel.name), kernel.name);
    if (!inserted) {
      Printer alias;
      if (options.comments) alias.line("/* kernel " + kernel.name + ": the code of " + same->second + " */");
      if (dialect->emit_kernel_alias(alias, kernel.name, same->second)) {
        body.append(alias.text());
        continue;
      }
    }
    body.append(text.text());
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
  dialect->emit_file_begin(out, uses_heap, uses_print);
  if (!helpers.empty()) {
    out.blank();
    if (options.comments) out.line("/* Helpers: the semantics of the loop IR (kiln/loop/loop.h). */");
    helpers.emit(out);
  }
  if (fails) {
    out.blank();
    dialect->emit_failure_support(out);
    Printer definitions;
    dialect->emit_failure_definitions(definitions);
    if (!definitions.text().empty()) {
      out.blank();
      if (units) out.line(KILN_UNIT_BOUNDARY);
      out.append(definitions.text());
    }
  }
  out.append(body.text());
  return out.text();
}

}  // namespace kiln::codegen
