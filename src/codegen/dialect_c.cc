// The C dialect: kernels as exports of the CPU kernel ABI (kiln/kernel_abi.h), compiled by the
// CPU driver as GNU C11. The driver prepends kernel_abi.h, so the source does not include it.
#include <algorithm>
#include <iterator>

#include "codegen/dialect.h"

namespace kiln::codegen::internal {

namespace {

using ir::DType;

class CDialect final : public DialectSyntax {
 public:
  std::string_view name() const override { return "C"; }

  std::string_view type_name(DType type) const override {
    return scalar_type_name(type, {"int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
                                   "int64_t", "uint64_t"});
  }

  std::string math_function(std::string_view base, DType type) const override {
    std::string name(base);
    if (type == DType::kF32) name += 'f';
    return name;
  }

  bool own_math_f32() const override { return true; }

  int vector_bytes() const override { return 32; }

  bool half_blocks() const override { return true; }

  bool plain_sized_copy() const override { return true; }

  std::string int_limit(DType type, bool max) const override {
    if (type == DType::kI64) return max ? "INT64_MAX" : "INT64_MIN";
    return max ? "INT32_MAX" : "INT32_MIN";
  }

  bool heap_locals() const override { return true; }

  void emit_file_begin(Printer& out, bool uses_heap, bool uses_print) const override {
    out.line("#include <math.h>");
    out.line("#include <stdint.h>");
    if (uses_print) out.line("#include <stdio.h>");
    if (uses_heap) out.line("#include <stdlib.h>");
  }

  void emit_kernel_begin(Printer& out, const KernelFrame& frame) const override {
    const ir::Kernel& kernel = *frame.kernel;
    out.line("int " + kernel.name +
             "(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {");
    out.indent();
    // The dispatch must match the kernel: enough bindings, each large enough when the node's
    // size is known.
    const std::string fail = " " + return_error(kReturnBadDispatch);
    if (!frame.bindings.empty()) {
      if (frame.comments) out.line("/* the dispatch must match the kernel */");
      out.line("if (s->binding_count < " + std::to_string(frame.bindings.size()) + "u)" + fail);
    }
    if (frame.constant_count > 0) {
      out.line("if (s->constant_count < " + std::to_string(frame.constant_count) + "u)" + fail);
    }
    for (const BindingInfo& b : frame.bindings) {
      if (b.min_bytes <= 0) continue;
      out.line("if (s->binding_lengths[" + std::to_string(b.index) + "] < " +
               std::to_string(b.min_bytes) + "u)" + fail);
    }
    // Workgroups outside the grid of the dispatch convention (ir/loop.h) do nothing: y or z > 0,
    // and x > 0 unless the body is a parallel loop (x >= the count cannot happen, but guards the
    // division by the count).
    emit_workgroups_comment(out, frame);
    out.line(std::string(frame.parallel ? "if (id->x >= s->workgroup_count[0]" : "if (id->x != 0u") +
             " || id->y != 0u || id->z != 0u) " + return_ok());
    emit_binding_pointers(out, frame, [&](const BindingInfo& b) {
      std::string pointee = std::string(b.written ? "" : "const ") + std::string(storage_name(b.type));
      return pointee + "* restrict " + b.var + " = (" + pointee + "*)s->bindings[" +
             std::to_string(b.index) + "];";
    });
    if (frame.fails) {
      if (frame.comments) out.line("/* the workgroup's first failure (kiln_failure_value reports its value) */");
      out.line("int kiln_failure = 0;");
      out.line("int64_t kiln_failure_at = 0;");
    }
  }

  void emit_kernel_end(Printer& out, const KernelFrame& frame) const override {
    if (frame.fails) {
      out.line("if (kiln_failure) kiln_failure_tls = kiln_failure_at;");
      out.line("return kiln_failure;");
    } else {
      out.line(return_ok());
    }
    out.dedent();
    out.line("}");
  }

  std::string fail(int code, const std::string& value) const override {
    return "if (kiln_failure == 0) { kiln_failure = " + std::to_string(code) + "; kiln_failure_at = " + value + "; }";
  }

  // The value of the calling thread's last failed workgroup, which the CPU driver asks for right
  // after a kernel returns a failure (the kernel ABI returns only the code).
  // Declared for every unit, defined in one (hidden: one per shared object, reached without the
  // global offset table).
  void emit_failure_support(Printer& out) const override {
    out.line("extern __attribute__((visibility(\"hidden\"))) _Thread_local int64_t kiln_failure_tls;");
  }
  void emit_failure_definitions(Printer& out) const override {
    out.line("__attribute__((visibility(\"hidden\"))) _Thread_local int64_t kiln_failure_tls;");
    out.line("int64_t kiln_failure_value(void) { return kiln_failure_tls; }");
  }

  bool separate_units() const override { return true; }

  bool emit_kernel_alias(Printer& out, const std::string& name, const std::string& same) const override {
    const std::string params = "(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id)";
    out.line("int " + same + params + ";");
    out.line("int " + name + params + " { return " + same + "(s, id); }");
    return true;
  }

  std::string return_ok() const override { return "return 0;"; }
  std::string return_error(int code) const override {
    return "return " + std::to_string(code) + ";";
  }
  std::string workgroup_index() const override { return "id->x"; }
  std::string push_constant(int j) const override { return "s->constants[" + std::to_string(j) + "]"; }
  std::string workgroup_count() const override { return "s->workgroup_count[0]"; }

  bool is_reserved(std::string_view identifier) const override {
    static constexpr std::string_view kReserved[] = {
        // The C11 keywords beyond C99's and the GNU ones a kernel name could collide with.
        "asm", "typeof",
        // Names the generated code or the ABI use.
        "main", "s", "id", "chunk", "begin", "end", "calloc", "free", "abort", "exit",
        "exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "fabs", "pow",
        "expf", "logf", "sqrtf", "tanhf", "sinf", "cosf", "floorf", "ceilf", "fabsf", "powf",
        // Other short names of <math.h> and <stdlib.h> a kernel might plausibly be called.
        "abs", "div", "labs", "rand", "random", "round", "trunc", "fma", "fmax", "fmin", "nan",
        "j0", "j1", "jn", "y0", "y1", "yn", "gamma", "erf", "erff", "exp2", "log2", "log10", "hypot"};
    return is_reserved_c_name(identifier) ||
           std::find(std::begin(kReserved), std::end(kReserved), identifier) != std::end(kReserved);
  }
};

}  // namespace

std::unique_ptr<DialectSyntax> make_c_dialect() { return std::make_unique<CDialect>(); }

}  // namespace kiln::codegen::internal
