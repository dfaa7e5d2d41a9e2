#include "kiln/codegen/call_kernel.h"

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace kiln::codegen {

namespace {

bool is_word(const std::string& s, bool identifier) {
  if (s.empty() || (identifier && std::isdigit(static_cast<unsigned char>(s[0])))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A C expression with exactly the value `v` (hexadecimal floating point; no rounding).
std::string double_literal(double v) {
  if (std::isnan(v)) return "__builtin_nan(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inf()" : "(-__builtin_inf())";
  char text[64];
  std::snprintf(text, sizeof text, "%a", v);
  return text;
}

std::string int64_literal(int64_t v) {
  if (v == INT64_MIN) return "(-INT64_C(9223372036854775807) - 1)";
  char text[32];
  std::snprintf(text, sizeof text, "INT64_C(%" PRId64 ")", v);
  return text;
}

}  // namespace

Result<std::string> emit_call_kernels(std::span<const CallKernel> kernels) {
  std::string out;
  if (kernels.empty()) return out;
  out += "\n/* Calls: each passes its bindings as memrefs to the runtime through the RAL context. */\n";
  out += "typedef struct kiln_ral_call_context_t {\n"
         "  int (*call)(struct kiln_ral_call_context_t* ctx, const char* name, void** args);\n"
         "} kiln_ral_call_context_t;\n";
  for (const CallKernel& k : kernels) {
    if (!is_word(k.name, true)) return invalid_argument_error("call kernel name '" + k.name + "' is not a C identifier");
    if (!is_word(k.function, false)) {
      return invalid_argument_error("call kernel '" + k.name + "': function name '" + k.function +
                                    "' has characters outside [A-Za-z0-9_]");
    }
    const std::string n = std::to_string(k.tensors.size());
    out += "\nint " + k.name + "(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {\n";
    out += "  if (id->x != 0 || id->y != 0 || id->z != 0) return 0;\n";
    out += "  kiln_ral_call_context_t* ctx = (kiln_ral_call_context_t*)s->context;\n";
    out += "  if (!ctx) return 3;\n";
    if (!k.tensors.empty()) out += "  if (s->binding_count < " + n + "u) return 1;\n";
    if (k.size_count > 0) {
      out += "  if (s->constant_count < " + std::to_string(2 * k.size_count) + "u) return 1;\n";
    }
    std::string args = "&ctx";
    for (size_t i = 0; i < k.tensors.size(); ++i) {
      const CallKernel::Tensor& t = k.tensors[i];
      const std::string b = std::to_string(i);
      if (t.sized.empty()) out += "  if (s->binding_lengths[" + b + "] < " + std::to_string(t.bytes) + "u) return 1;\n";
      if (t.sizes.empty()) {
        out += "  void* m" + b + " = s->bindings[" + b + "];\n";
      } else {
        std::string sizes;
        for (size_t d = 0; d < t.sizes.size(); ++d) {
          sizes += (sizes.empty() ? "" : ", ");
          if (d < t.sized.size() && t.sized[d]) {
            // offset + sum coefficient * size, each size from its two push constants.
            std::string e = int64_literal(t.sized[d]->offset);
            for (const auto& [size, coefficient] : t.sized[d]->terms) {
              const std::string lo = std::to_string(2 * size), hi = std::to_string(2 * size + 1);
              e += " + " + int64_literal(coefficient) + " * (int64_t)((uint64_t)s->constants[" + lo +
                   "] | ((uint64_t)s->constants[" + hi + "] << 32))";
            }
            sizes += "(" + e + ")";
          } else {
            sizes += int64_literal(t.sizes[d]);
          }
        }
        out += "  struct { void* data; int64_t sizes[" + std::to_string(t.sizes.size()) + "]; } m" + b +
               " = {s->bindings[" + b + "], {" + sizes + "}};\n";
      }
      args += ", &m" + b;
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      const CallKernel::Scalar& a = k.scalars[i];
      const std::string name = "a" + std::to_string(i);
      switch (a.type) {
        case CallKernel::Scalar::Type::kI64: out += "  int64_t " + name + " = " + int64_literal(a.i64) + ";\n"; break;
        case CallKernel::Scalar::Type::kF32: out += "  float " + name + " = (float)" + double_literal(a.f64) + ";\n"; break;
        case CallKernel::Scalar::Type::kF64: out += "  double " + name + " = " + double_literal(a.f64) + ";\n"; break;
      }
      args += ", &" + name;
    }
    out += "  void* args[] = {" + args + "};\n";
    out += "  return ctx->call(ctx, \"" + k.function + "\", args);\n}\n";
  }
  return out;
}

}  // namespace kiln::codegen
