// What the dialects (dialect.h) share: the printer, choosing a dialect, the defaults of
// DialectSyntax, and the pieces of a kernel's opening lines that read the same in every dialect.
#include "codegen/dialect.h"

#include <algorithm>
#include <iterator>

namespace kiln::codegen::internal {

using ir::DType;

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
      return make_cuda_dialect();
  }
  return invalid_argument_error("unknown dialect");
}

std::string_view DialectSyntax::helper_qualifier() const { return "static inline"; }

std::string DialectSyntax::infinity(DType type, bool negative) const {
  std::string text = type == DType::kF64 ? "(double)INFINITY" : "INFINITY";
  return negative ? "-" + text : text;
}

std::string DialectSyntax::nan(DType type) const {
  return type == DType::kF64 ? "(double)NAN" : "NAN";
}

std::string_view scalar_type_name(DType type, const IntegerNames& names) {
  switch (type) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBool:
    case DType::kU8: return names.u8;
    case DType::kI8: return names.i8;
    case DType::kI16: return names.i16;
    case DType::kU16: return names.u16;
    case DType::kI32: return names.i32;
    case DType::kU32: return names.u32;
    case DType::kI64: return names.i64;
    case DType::kU64: return names.u64;
  }
  return "?";
}

std::string_view DialectSyntax::storage_name(DType type) const {
  return ir::is_narrow_float(type) ? type_name(DType::kU16) : type_name(type);
}

std::string_view DialectSyntax::unsigned_name(DType type) const {
  return type_name(ir::dtype_size(type) == 8 ? DType::kU64 : DType::kU32);
}

std::string_view DialectSyntax::literal_suffix(DType type) const {
  return type == DType::kU32 ? "u" : type == DType::kU64 ? "ull" : "";
}

bool is_c99_keyword(std::string_view identifier) {
  static constexpr std::string_view kKeywords[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
      "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
      "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
      "typedef", "union", "unsigned", "void", "volatile", "while"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), identifier) != std::end(kKeywords);
}

bool is_kiln_name(std::string_view identifier) {
  return identifier.starts_with("kiln_") || identifier.starts_with("KILN_");
}

bool is_reserved_c_name(std::string_view identifier) {
  if (is_c99_keyword(identifier) || is_kiln_name(identifier)) return true;
  return identifier.size() >= 2 && identifier[0] == '_' &&
         (identifier[1] == '_' || (identifier[1] >= 'A' && identifier[1] <= 'Z'));
}

void emit_status_abi_begin(Printer& out, const KernelFrame& frame, const std::string& qualifier,
                           std::string_view length_suffix, const std::string& fail) {
  std::string params = "KILN_STATUS_PARAMS";
  for (const BindingInfo& b : frame.bindings) {
    params += ", KILN_BINDING_PARAMS(" + std::to_string(b.index) + ")";
  }
  for (int j = 0; j < frame.constant_count; ++j) params += ", KILN_CONSTANT_PARAM(" + std::to_string(j) + ")";
  out.line(qualifier + " " + frame.kernel->name + "(" + params + ") {");
  out.indent();
  // Returns when the action already failed on the device (the ABI's entry check); with
  // barriers, the whole workgroup returns or none of it.
  out.line(frame.group_barriers ? "KILN_GROUP_ENTRY();" : "KILN_ENTRY();");
  bool checks = false;
  for (const BindingInfo& b : frame.bindings) {
    if (b.min_bytes <= 0) continue;
    if (!checks && frame.comments) out.line("/* the dispatch must match the kernel */");
    checks = true;
    out.line("if (KILN_BINDING_LENGTH(" + std::to_string(b.index) + ") < " + std::to_string(b.min_bytes) +
             std::string(length_suffix) + ") " + fail);
  }
}

void emit_workgroups_comment(Printer& out, const KernelFrame& frame) {
  if (frame.comments) {
    out.line(frame.parallel ? "/* workgroups in x share the parallel loop; y and z are empty */"
                            : "/* one workgroup runs the body; any others are empty */");
  }
}

void emit_binding_pointers(Printer& out, const KernelFrame& frame,
                           const std::function<std::string(const BindingInfo&)>& declaration) {
  for (const BindingInfo& b : frame.bindings) {
    std::string comment = frame.comments && !b.comment.empty() ? "  /* " + b.comment + " */" : "";
    if (!b.used) {
      if (frame.comments) {
        out.line("/* binding " + std::to_string(b.index) + " (node " + std::to_string(b.node) +
                 (b.comment.empty() ? "" : ", " + b.comment) + ") is not used */");
      }
      continue;
    }
    out.line(declaration(b) + comment);
  }
}

std::string DialectSyntax::print_argument(ir::DType type, const std::string& value,
                                          std::string* conversion) const {
  auto as = [&](const char* format, const char* cast) {
    if (conversion) *conversion = format;
    return std::string(cast) + "(" + value + ")";
  };
  switch (type) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32: return as("%.9g", "(double)");
    case DType::kF64: return as("%.17g", "");
    case DType::kU32: return as("%u", "(unsigned)");
    case DType::kI64: return as("%lld", "(long long)");
    case DType::kU64: return as("%llu", "(unsigned long long)");
    default: return as("%d", "(int)");  // bool and the integers up to 32 bits, promoted to int
  }
}

}  // namespace kiln::codegen::internal
