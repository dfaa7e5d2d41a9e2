// The C-syntax code generator: prints kernels of the loop IR (kiln/loop/loop.h) as source code in
// one of several C-like dialects. Statements and expressions are printed by one shared emitter;
// what differs between dialects (the kernel signature, how bindings and workgroup ids are
// obtained, address-space qualifiers, type and math-builtin names, the prelude) sits behind a
// small dialect table (src/codegen/dialect.h).
//
// The generated code implements exactly the semantics stated in kiln/loop/loop.h: i32 arithmetic
// wraps, i32 division by zero gives 0 and INT32_MIN / -1 gives INT32_MIN, casts to i32 saturate
// (NaN gives 0), comparisons give 1 / 0 in their result type, max / min propagate NaN, and so on.
// It never relies on undefined behaviour of C for that (no signed overflow, no trapping division,
// no out-of-range float-to-integer conversion). Helpers for these live in a prelude of small
// `static inline` functions named kiln_*, emitted only when used.
//
// C dialect (the CPU kernel ABI of kiln/kernel_abi.h): each kernel becomes an exported function
//   int NAME(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id)
// run once per workgroup. The source does not include kernel_abi.h (the CPU driver prepends it).
// Binding i is `(T*)s->bindings[i]` with T the node's element type. A kernel whose body is a
// parallel `for` over E runs the chunk [id->x * C, min(E, (id->x + 1) * C)), C = ceil(E / W),
// W = s->workgroup_count[0]; any other kernel runs its whole body in workgroup 0 only.
// Workgroups outside that grid (y or z > 0, or x > 0 for a kernel that is not parallel) return
// 0 at once. Loop variables and offsets are int64_t; integer arithmetic that provably stays in
// range is printed as plain C, the rest through the wrapping helpers. Local arrays are C arrays
// in scope, zero-initialized; past kMaxStackLocalBytes they are calloc'ed and freed. Return
// codes: 0 success; 1 the dispatch does not match the kernel (too few bindings, or, when
// `program` is given, a binding smaller than its node); 2 a large local array could not be
// allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/loop/loop.h"
#include "kiln/ir/program.h"

namespace kiln::codegen {

enum class Dialect { kC, kOpenCL, kCuda };

// "c", "opencl-c", "cuda-c": the ExecutableSource format of the dialect.
std::string_view dialect_format(Dialect dialect);

struct EmitOptions {
  Dialect dialect = Dialect::kC;
  // kComment statements, node names next to binding declarations, a line per kernel.
  bool comments = true;
};

// Local arrays up to this many bytes in scope at once live on the stack; larger ones are
// allocated on the heap (calloc / free) where the dialect can.
inline constexpr int64_t kMaxStackLocalBytes = 64 * 1024;

// One source holding every kernel as an export of the dialect's kernel ABI, named by
// Kernel::name. `program` supplies node names (comments), element types and sizes (binding
// checks); it may be null, and then a binding's element type comes from the kernel's loads and
// stores of its node. The output is deterministic (same input, same text).
//
// INVALID_ARGUMENT for a malformed kernel (naming the kernel and the problem): a name that is not
// a C identifier, a duplicate or reserved name, a node used but not bound, loads of one node with
// different types, an undeclared local or loop variable, wrong op arity, a missing expression.
// OpenCL C (kOpenCL): each kernel is a __kernel of the OpenCL kernel ABI (docs/opencl.md), one
// work item per HAL workgroup; a cl_khr_fp64 pragma opens the file when f64 is used.
// CUDA C (kCuda): each kernel is an extern "C" __global__ function of the CUDA kernel ABI
// (docs/cuda.md), one block per HAL workgroup, built by NVRTC; no headers are included.
Result<std::string> emit_kernels(std::span<const ir::Kernel> kernels, const ir::Program* program,
                                 const EmitOptions& options = {});

// The bytes a kernel's entry check asks of the binding of `node` (a smaller one fails the dispatch
// with code 1, above): the node's size where the program fixes it, 0 where it does not (a
// dimension that is a size, or a size too large to be sensible).
uint64_t binding_min_bytes(const ir::TensorNode& node);

// The number of workgroups a dispatch of `kernel` may use at most under the dispatch convention
// (ir/loop.h): the extent of its top-level parallel loop, else 1.
int64_t max_workgroups(const ir::Kernel& kernel);

// The stores one run of `kernel` makes, to buffers and local arrays, each loop counted with its
// extent (a triangular loop's at the middle of the loops around it) and each `if` as taken
// (saturating): a measure of its work.
int64_t estimated_stores(const ir::Kernel& kernel);

// Stores below which another workgroup costs more in hand-off (a wake of a pool thread, a few to
// tens of microseconds) than it saves: about 20 µs of simple stores on the development machine.
inline constexpr int64_t kMinStoresPerWorkgroup = int64_t{1} << 16;

// Workgroups for a dispatch of `kernel` when the caller does not fix them: enough that each has
// at least `min_stores` stores, at most `cap` and max_workgroups(kernel), at least 1.
uint32_t workgroups_for_size(const ir::Kernel& kernel, uint32_t cap, int64_t min_stores = kMinStoresPerWorkgroup);

}  // namespace kiln::codegen
