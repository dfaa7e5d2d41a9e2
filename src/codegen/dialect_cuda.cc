// The CUDA C dialect: kernels as extern "C" __global__ functions of kiln's CUDA kernel ABI
// (src/drivers/cuda/cuda_kernel_abi.h, prepended by the CUDA driver's compiler before NVRTC
// builds the source), with the same parameters as the OpenCL ABI: a status word and tag first,
// then per binding a base pointer, byte offset and byte length. A HAL workgroup is one CUDA
// block (blockIdx / gridDim); a parallel loop's chunk is shared by the block's threads
// (threadIdx.x / blockDim.x), and every other kernel runs on thread 0. NVRTC compiles C++ with
// no system headers, so nothing is included: the ABI defines the integer limits, and the
// infinities and NaN are spelled by their bits.
#include <algorithm>
#include <iterator>

#include "codegen/dialect.h"

namespace kiln::codegen::internal {

namespace {

using ir::DType;

class CudaDialect final : public StatusAbiDialect {
 public:
  std::string_view name() const override { return "CUDA C"; }

  std::string_view type_name(DType type) const override {
    return scalar_type_name(type, {"signed char", "unsigned char", "short", "unsigned short", "int",
                                   "unsigned int", "long long", "unsigned long long"});
  }

  std::string_view helper_qualifier() const override { return "static __device__ __forceinline__"; }

  // CUDA's math library names the float functions with an f, as C does.
  std::string math_function(std::string_view base, DType type) const override {
    std::string name(base);
    if (type == DType::kF32) name += 'f';
    return name;
  }

  std::string infinity(DType type, bool negative) const override {
    if (type != DType::kF64) return negative ? "__int_as_float(0xff800000)" : "__int_as_float(0x7f800000)";
    return negative ? "__longlong_as_double(0xfff0000000000000ll)"
                    : "__longlong_as_double(0x7ff0000000000000ll)";
  }

  std::string nan(DType type) const override {
    return type != DType::kF64 ? "__int_as_float(0x7fc00000)"
                               : "__longlong_as_double(0x7ff8000000000000ll)";
  }

  std::string int_limit(DType type, bool max) const override {
    if (type == DType::kI64) return max ? "KILN_INT64_MAX" : "KILN_INT64_MIN";
    return max ? "KILN_INT32_MAX" : "KILN_INT32_MIN";
  }

  // Device printf needs no header under NVRTC; C's promotions (double, long long) apply.
  void emit_file_begin(Printer&, bool, bool) const override {}

  void emit_kernel_begin(Printer& out, const KernelFrame& frame) const override {
    emit_status_abi_begin(out, frame, "extern \"C\" __global__ void", "ull", return_error(kReturnBadDispatch));
    emit_workgroups_comment(out, frame);
    out.line(std::string(frame.parallel ? "if (blockIdx.x >= gridDim.x"
                                        : "if (blockIdx.x != 0 || threadIdx.x != 0") +
             " || blockIdx.y != 0 || blockIdx.z != 0) " + return_ok());
    emit_binding_pointers(out, frame, [&](const BindingInfo& b) {
      const std::string type(storage_name(b.type));
      std::string pointee = std::string(b.written ? "" : "const ") + type;
      return pointee + "* __restrict__ " + b.var + " = (" + pointee + "*)KILN_BINDING(" + type +
             ", " + std::to_string(b.index) + ");";
    });
  }

  std::string workgroup_index() const override { return "blockIdx.x"; }
  std::string workgroup_count() const override { return "gridDim.x"; }
  std::string work_item_index() const override { return "threadIdx.x"; }
  std::string work_item_count() const override { return "blockDim.x"; }
  std::string group_array(std::string_view type, const std::string& name,
                          int64_t size) const override {
    return "__shared__ " + std::string(type) + " " + name + "[" + std::to_string(size) + "];";
  }
  std::string group_barrier() const override { return "__syncthreads();"; }

  bool is_reserved(std::string_view identifier) const override {
    static constexpr std::string_view kReserved[] = {
        // C++ keywords beyond C99's.
        "alignas", "alignof", "and", "and_eq", "asm", "bitand", "bitor", "bool", "catch",
        "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "consteval",
        "constexpr", "constinit", "const_cast", "co_await", "co_return", "co_yield",
        "decltype", "delete", "dynamic_cast", "explicit", "export", "false", "friend",
        "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
        "or_eq", "private", "protected", "public", "reinterpret_cast", "requires",
        "static_assert", "static_cast", "template", "this", "thread_local", "throw", "true",
        "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq",
        // CUDA's built-in variables, types and functions a kernel could collide with.
        "main", "chunk", "begin", "end", "printf", "malloc", "free", "blockIdx", "blockDim",
        "threadIdx", "gridDim", "warpSize", "dim3", "uint", "ulong", "ushort", "uchar",
        "exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "fabs", "pow", "expf",
        "logf", "sqrtf", "tanhf", "sinf", "cosf", "floorf", "ceilf", "fabsf", "powf", "abs",
        "round", "trunc", "fma", "fmax", "fmin", "max", "min", "nan", "erf", "erff", "exp2", "log2",
        "log10", "hypot", "rsqrt", "signbit", "isnan", "isinf", "isfinite", "atomicAdd",
        "atomicExch", "atomicCAS", "atomicMax", "atomicMin", "clock", "clock64"};
    // C's reserved names include CUDA's intrinsics (__syncthreads, __int_as_float).
    return is_reserved_c_name(identifier) ||
           std::find(std::begin(kReserved), std::end(kReserved), identifier) != std::end(kReserved);
  }
};

}  // namespace

std::unique_ptr<DialectSyntax> make_cuda_dialect() { return std::make_unique<CudaDialect>(); }

}  // namespace kiln::codegen::internal
