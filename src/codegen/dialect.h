// What differs between the C-like dialects the emitter prints: type and builtin names, the kernel
// signature and how it obtains its bindings and workgroup id, address-space qualifiers, special
// float constants and the file's opening lines. Everything else (statements, expressions, the
// helper prelude) is printed by shared code in kernel_*.cc / prelude.cc from these answers, so
// adding a dialect means adding one DialectSyntax implementation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/loop/loop.h"

namespace kiln::codegen::internal {

// Collects lines of code at an indentation of two spaces per level.
class Printer {
 public:
  void line(std::string_view text);
  void blank() { text_ += '\n'; }
  void indent() { ++depth_; }
  void dedent() { --depth_; }
  void append(std::string_view text) { text_ += text; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int depth_ = 0;
};

// One buffer binding of a kernel as the shared code sees it.
struct BindingInfo {
  int index = 0;                      // binding number
  int node = -1;                      // node id
  ir::DType type = ir::DType::kF32;   // element type
  bool used = false;                  // loaded or stored by the kernel
  bool written = false;               // stored by the kernel
  std::string var;                    // the pointer variable's name
  std::string comment;                // "x: input f32[4, 10]" (empty without a program)
  int64_t min_bytes = -1;             // the node's byte size (> 0) when the program gives it
};

struct KernelFrame {
  const ir::Kernel* kernel = nullptr;
  std::vector<BindingInfo> bindings;
  // Whether the body is a parallel loop split over workgroups in x (ir/loop.h); otherwise the
  // dispatch has exactly one workgroup.
  bool parallel = false;
  bool comments = true;
  // Push constants the kernel takes: two per size (ir/loop.h, dispatch convention).
  int constant_count = 0;
  // The kernel synchronizes its work-items with barriers (work-group reductions,
  // kernel_work_groups.cc): every early return before them must be taken by the whole workgroup.
  bool group_barriers = false;
  // The kernel has failures (kFail statements, kiln/loop/loop.h): the dialect keeps what it needs
  // to report the first one.
  bool fails = false;
};

class DialectSyntax {
 public:
  virtual ~DialectSyntax() = default;

  // For comments: "C", "OpenCL C", "CUDA C".
  virtual std::string_view name() const = 0;

  // Type spellings. type_name: a value of the type in expressions, locals and helpers (bool: the
  // 8-bit unsigned type, holding 0 or 1; f16 and bf16: float, as their values are computed in
  // f32). storage_name: an element in memory, what binding pointers point to (by default
  // type_name, but f16 and bf16 are their 16-bit patterns: the 16-bit unsigned type).
  virtual std::string_view type_name(ir::DType type) const = 0;
  virtual std::string_view storage_name(ir::DType type) const;
  // The unsigned type that integer arithmetic of `type` wraps in without undefined behaviour:
  // u32's for types of up to 32 bits (C promotes narrower ones to int), u64's for 64-bit ones.
  std::string_view unsigned_name(ir::DType type) const;
  // The suffix that gives an integer literal of `type` its type where C's default (int, or a
  // wider signed type) is not it: "u" for u32, "ull" for u64 (OpenCL: "ul"); "" otherwise.
  virtual std::string_view literal_suffix(ir::DType type) const;
  // Whether f16 elements are loaded and stored with OpenCL's vload_half / vstore_half_rte
  // (storage_name(kF16) is then "half"), rather than as bit patterns through the prelude's
  // conversions.
  virtual bool half_loads() const { return false; }
  // How the prelude's helper functions are declared ("static inline" by default).
  virtual std::string_view helper_qualifier() const;
  // The math builtin `base` ("exp", "fabs", "pow", ...) for f32 or f64 arguments.
  virtual std::string math_function(std::string_view base, ir::DType type) const = 0;
  // Whether exp, log, tanh and erf of f32 (and sigmoid, which uses exp) are kiln's branch-free
  // polynomials from the prelude (kiln_exp_f32, kiln_log_f32, kiln_tanh_f32, kiln_erf_f32) instead of
  // math_function(): for C, whose libm functions are scalar calls that keep a loop from
  // vectorizing. False by default (OpenCL's functions are the device's own).
  virtual bool own_math_f32() const { return false; }
  // Bytes of the vectors that small inner loops are written with (GCC/Clang vector extensions,
  // kernel_vectors.cc), or 0 for none. C: 32 (AVX2's registers; a compiler without such
  // registers splits them). OpenCL: 0.
  virtual int vector_bytes() const { return 0; }
  // Whether an inner loop of stores that loads or stores f16 at consecutive elements is printed
  // in blocks whose f16 elements F16C's vector instructions convert, under `#if
  // defined(__F16C__)`, with the plain loop for the rest (kernel_half_blocks.cc). C: yes (the
  // prelude's conversions cost about 20 instructions an element each way). OpenCL, CUDA: no
  // (their devices' own conversions).
  virtual bool half_blocks() const { return false; }
  // Whether a kernel over sizes gets a second copy of its statements, printed for sizes below a
  // bound that makes their index arithmetic plain (kernel_statements.cc, sized_body). C: yes
  // (GCC strength-reduces plain index arithmetic, and the CPU driver builds without code
  // hoisting, which otherwise lifts both copies' invariants above the test). OpenCL, CUDA: not
  // measured yet, so no.
  virtual bool plain_sized_copy() const { return false; }
  // A line before the short loops that fill a private lane array (a split reduction's lanes,
  // kernel_work_groups.cc's lane loops) that asks the compiler to unroll them fully, so that the
  // array lives in registers; empty for none. OpenCL: `#pragma unroll` (PoCL's LLVM leaves
  // these loops rolled and keeps the lanes in memory). C: none (GCC vectorizes them as loops).
  virtual std::string unroll_hint() const { return ""; }
  // +inf / -inf / NaN of a float type, as an expression (by default the C99 INFINITY and NAN,
  // cast to double for f64).
  virtual std::string infinity(ir::DType type, bool negative) const;
  virtual std::string nan(ir::DType type) const;
  // The limits of the integer types, as expressions ("INT32_MIN").
  virtual std::string int_limit(ir::DType type, bool max) const = 0;

  // Whether large local arrays may be allocated with calloc/free.
  virtual bool heap_locals() const = 0;

  // Lines at the top of the file (includes); `uses_print`: a kernel calls printf (value tracing).
  virtual void emit_file_begin(Printer& out, bool uses_heap, bool uses_print) const = 0;
  // printf's argument for `value` of `type` in a trace line, and its conversion ("%.9g") in
  // `*conversion` when not null: floats with the digits that read back to the same value.
  // By default C's (float promoted to double, narrow integers as int, unsigned ones unsigned,
  // long long for i64). f16 and bf16 are printed as f32 (the emitter rounds them first).
  virtual std::string print_argument(ir::DType type, const std::string& value, std::string* conversion) const;
  // Lines that enable language extensions the source needs (OpenCL C: cl_khr_fp64 when f64 is
  // used); first in the file. Nothing by default.
  virtual void emit_extensions(Printer& out, bool uses_f64) const {}
  // The kernel's signature and opening brace, the checks of the dispatch, and one pointer
  // variable per used binding (BindingInfo::var); leaves the printer indented inside the body.
  virtual void emit_kernel_begin(Printer& out, const KernelFrame& frame) const = 0;
  // The successful return and the closing brace.
  virtual void emit_kernel_end(Printer& out, const KernelFrame& frame) const = 0;
  // Statements that end the kernel (from any depth) successfully, or with error `code`.
  virtual std::string return_ok() const = 0;
  virtual std::string return_error(int code) const = 0;
  // A statement that records a failure of the dispatch with `code` and the i64 `value` (a kFail,
  // kiln/loop/loop.h), the first of the workgroup kept, and lets the kernel run on.
  virtual std::string fail(int code, const std::string& value) const = 0;
  // File-level lines the failures need (after the helpers), when a kernel of the file has one.
  virtual void emit_failure_support(Printer& out) const {}
  // Where the file may be split into translation units (kiln/kernel_abi.h, KILN_UNIT_BOUNDARY):
  // the failures' definitions, in a unit of their own after the boundary; emit_failure_support
  // then only declares them.
  virtual void emit_failure_definitions(Printer& out) const {}
  // Whether the file's kernels may be built as separate translation units: a boundary line
  // before each, which the CPU driver may split at to compile them in parallel.
  virtual bool separate_units() const { return false; }
  // A kernel `name` whose code is that of the kernel `same` emitted before it, as a call of that
  // one, so that the C compiler optimizes the code once; false where the dialect cannot (then
  // the kernel is emitted whole).
  virtual bool emit_kernel_alias(Printer& out, const std::string& name, const std::string& same) const {
    return false;
  }
  // This workgroup's index in x, and the number of workgroups in x, as expressions.
  virtual std::string workgroup_index() const = 0;
  // Push constant j of the dispatch (a 32-bit unsigned value), as an expression.
  virtual std::string push_constant(int j) const = 0;
  virtual std::string workgroup_count() const = 0;
  // This work-item's index in its workgroup (x) and the workgroup's number of work-items, as
  // expressions; empty where a workgroup is one thread (C). Where they are set, the work-items
  // of a workgroup take turns through its chunk of the parallel loop (item i runs iterations
  // begin + i, begin + i + n, ...: neighbouring items touch neighbouring elements), and a kernel
  // that is not a parallel loop must run on work-item 0 only (emit_kernel_begin), so that the
  // driver may run any number of work-items per workgroup (hal::ExportInfo::any_local_size).
  virtual std::string work_item_index() const { return ""; }
  virtual std::string work_item_count() const { return ""; }
  // Memory shared by the work-items of a workgroup, where the dialect has it (OpenCL's
  // __local): the declaration of an array at kernel scope, and a barrier of the workgroup that
  // makes its writes visible. Empty where there is none (C).
  virtual std::string group_array(std::string_view type, const std::string& name,
                                  int64_t size) const {
    return "";
  }
  virtual std::string group_barrier() const { return ""; }
  // Identifiers a kernel may not be named (keywords, library names).
  virtual bool is_reserved(std::string_view identifier) const = 0;
};

// The dialects of the status-ring kernel ABIs (OpenCL C, CUDA C): a kernel returns nothing and
// fails through KILN_FAIL, which records the failure in the action's status slot; no heap.
class StatusAbiDialect : public DialectSyntax {
 public:
  bool heap_locals() const override { return false; }
  void emit_kernel_end(Printer& out, const KernelFrame&) const override {
    out.dedent();
    out.line("}");
  }
  std::string return_ok() const override { return "return;"; }
  std::string return_error(int code) const override { return "KILN_FAIL(" + std::to_string(code) + ");"; }
  // The ABI's KILN_FAIL_VALUE records the code and the value in the status slot, without returning.
  std::string fail(int code, const std::string& value) const override {
    return "KILN_FAIL_VALUE(" + std::to_string(code) + ", " + value + ");";
  }
  std::string push_constant(int j) const override { return "KILN_CONSTANT(" + std::to_string(j) + ")"; }
};

// Shared by the dialects (dialect.cc).

// A dialect's names of the integer types.
struct IntegerNames {
  std::string_view i8, u8, i16, u16, i32, u32, i64, u64;
};
// "float" and "double" for f32 and f64, and for f16 and bf16 (computed in f32) "float"; else the
// dialect's name of the integer type (bool: u8's).
std::string_view scalar_type_name(ir::DType type, const IntegerNames& names);
// The keywords of C99, which no dialect's kernel may be named.
bool is_c99_keyword(std::string_view identifier);
// The names kiln's own code uses: kiln_* and KILN_*.
bool is_kiln_name(std::string_view identifier);
// Keywords of C99, kiln's own names, and names C reserves (_Upper, __any): no dialect's kernel
// may be named so.
bool is_reserved_c_name(std::string_view identifier);
// The opening of a kernel of the status-ring ABIs (OpenCL, CUDA): `qualifier NAME(KILN_STATUS_PARAMS,
// KILN_BINDING_PARAMS(i)...) {`, the entry check, then a check of each binding's length (a
// literal with `length_suffix`, "ul") that runs `fail` when it is short. Leaves the body indented.
void emit_status_abi_begin(Printer& out, const KernelFrame& frame, const std::string& qualifier,
                           std::string_view length_suffix, const std::string& fail);
// The comment that says which workgroups run the body (when the frame asks for comments).
void emit_workgroups_comment(Printer& out, const KernelFrame& frame);
// One pointer variable per used binding: `declaration(b)` (a statement) followed by the
// binding's comment; a comment for each unused one.
void emit_binding_pointers(Printer& out, const KernelFrame& frame,
                           const std::function<std::string(const BindingInfo&)>& declaration);

// UNIMPLEMENTED for dialects not written yet.
Result<std::unique_ptr<DialectSyntax>> make_dialect(Dialect dialect);
std::unique_ptr<DialectSyntax> make_c_dialect();
std::unique_ptr<DialectSyntax> make_opencl_dialect();
std::unique_ptr<DialectSyntax> make_cuda_dialect();

// Kernel return codes shared by dialects that can return one.
inline constexpr int kReturnBadDispatch = 1;
inline constexpr int kReturnOutOfMemory = 2;

// The prelude: helper functions implementing the loop IR's semantics, by name (kiln_add_i32,
// kiln_max_f32, ...). A HelperSet records which the kernels use (with what they depend on) and
// prints those, in a fixed order.
class HelperSet {
 public:
  explicit HelperSet(const DialectSyntax& dialect);
  // Marks `name` (and the helpers it calls) as used and returns it.
  std::string use(std::string_view name);
  bool empty() const;
  void emit(Printer& out) const;

 private:
  struct Helper {
    std::string name;
    std::vector<std::string> deps;
    std::string text;  // the definition, possibly several lines
    bool used = false;
  };
  Helper* find(std::string_view name);
  std::vector<Helper> helpers_;  // in definition order (dependencies first)
};

}  // namespace kiln::codegen::internal
