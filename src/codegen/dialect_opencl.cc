// The OpenCL C dialect: kernels as __kernel functions of kiln's OpenCL kernel ABI (documented in
// docs/opencl.md and prepended by the OpenCL driver's compiler, as the CPU driver prepends
// kernel_abi.h): a status word and tag first, then per binding a __global base pointer, byte
// offset and byte length, then the push constants. A HAL workgroup is one OpenCL work group
// (get_group_id / get_num_groups), run by one work item. OpenCL C has no heap, so every local
// array is private memory; f64 needs cl_khr_fp64, enabled by a pragma only when used. The loops
// that fill a split reduction's lanes are marked `#pragma unroll` (docs/opencl.md).
#include <algorithm>
#include <iterator>

#include "codegen/dialect.h"

namespace kiln::codegen::internal {

namespace {

using ir::DType;

class OpenCLDialect final : public StatusAbiDialect {
 public:
  std::string_view name() const override { return "OpenCL C"; }

  std::string_view type_name(DType type) const override {
    return scalar_type_name(type, {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong"});
  }

  // f16 elements through vload_half / vstore_half_rte, which need no cl_khr_fp16 (a `half`
  // pointer is allowed without it); bf16 ones as their bits.
  std::string_view storage_name(DType type) const override {
    return type == DType::kF16 ? "half" : DialectSyntax::storage_name(type);
  }
  bool half_loads() const override { return true; }

  std::string_view literal_suffix(DType type) const override {
    return type == DType::kU64 ? "ul" : DialectSyntax::literal_suffix(type);
  }

  // OpenCL C's math builtins are overloaded for float and double.
  std::string math_function(std::string_view base, DType) const override {
    return std::string(base);
  }

  std::string int_limit(DType type, bool max) const override {
    if (type == DType::kI64) return max ? "LONG_MAX" : "LONG_MIN";
    return max ? "INT_MAX" : "INT_MIN";
  }

  void emit_file_begin(Printer&, bool, bool) const override {}

  // OpenCL's printf takes float and long as they are (double needs cl_khr_fp64); narrower
  // integers are passed as int.
  std::string print_argument(ir::DType type, const std::string& value, std::string* conversion) const override {
    const char* format = "%d";
    const char* cast = "(int)";
    switch (type) {
      case DType::kF64: format = "%.17g", cast = ""; break;
      case DType::kF32: case DType::kF16: case DType::kBF16: format = "%.9g", cast = "(float)"; break;
      case DType::kU32: format = "%u", cast = "(uint)"; break;
      case DType::kI64: format = "%ld", cast = "(long)"; break;
      case DType::kU64: format = "%lu", cast = "(ulong)"; break;
      default: break;
    }
    if (conversion) *conversion = format;
    return std::string(cast) + "(" + value + ")";
  }

  void emit_extensions(Printer& out, bool uses_f64) const override {
    if (uses_f64) out.line("#pragma OPENCL EXTENSION cl_khr_fp64 : enable");
  }

  void emit_kernel_begin(Printer& out, const KernelFrame& frame) const override {
    emit_status_abi_begin(out, frame, "__kernel void", "ul", return_error(kReturnBadDispatch));
    emit_workgroups_comment(out, frame);
    out.line(std::string(frame.parallel ? "if (get_group_id(0) >= get_num_groups(0)"
                                        : "if (get_group_id(0) != 0 || get_local_id(0) != 0") +
             " || get_group_id(1) != 0 || get_group_id(2) != 0) " + return_ok());
    emit_binding_pointers(out, frame, [&](const BindingInfo& b) {
      const std::string type(storage_name(b.type));
      std::string pointee = std::string(b.written ? "" : "const ") + type;
      return "__global " + pointee + "* restrict " + b.var + " = (__global " + pointee +
             "*)KILN_BINDING(" + type + ", " + std::to_string(b.index) + ");";
    });
  }

  std::string unroll_hint() const override { return "#pragma unroll"; }

  std::string workgroup_index() const override { return "get_group_id(0)"; }
  std::string workgroup_count() const override { return "get_num_groups(0)"; }
  std::string work_item_index() const override { return "get_local_id(0)"; }
  std::string work_item_count() const override { return "get_local_size(0)"; }
  std::string group_array(std::string_view type, const std::string& name,
                          int64_t size) const override {
    return "__local " + std::string(type) + " " + name + "[" + std::to_string(size) + "];";
  }
  std::string group_barrier() const override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }

  bool is_reserved(std::string_view identifier) const override {
    static constexpr std::string_view kReserved[] = {
        // OpenCL C keywords and types.
        "kernel", "global", "local", "constant", "private", "read_only", "write_only",
        "read_write", "uniform", "pipe", "bool", "uchar", "ushort", "uint", "ulong", "half",
        "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "event_t", "sampler_t", "image1d_t",
        "image2d_t", "image3d_t", "complex", "imaginary", "quad",
        // Names the generated code or the ABI use, and common builtins.
        "main", "chunk", "begin", "end", "barrier", "printf", "get_group_id", "get_num_groups",
        "get_global_id", "get_local_id", "get_global_size", "get_local_size", "get_work_dim",
        "exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "fabs", "pow", "fma", "mad",
        "abs", "round", "trunc", "fmax", "fmin", "max", "min", "clamp", "select", "sign",
        "rsqrt", "exp2", "log2", "log10", "hypot", "erf", "nan", "dot", "cross", "mix", "step",
        "atomic_add", "atomic_xchg", "atomic_cmpxchg"};
    return is_reserved_c_name(identifier) || identifier.starts_with("get_") ||
           std::find(std::begin(kReserved), std::end(kReserved), identifier) != std::end(kReserved);
  }
};

}  // namespace

std::unique_ptr<DialectSyntax> make_opencl_dialect() { return std::make_unique<OpenCLDialect>(); }

}  // namespace kiln::codegen::internal
