// The low-level IR: kernels of loop nests over node buffers, the output of lowering and the
// input of code generation and of the reference interpreter.
//
// A lowered routine is a list of kernels run in order, each finished before the next starts.
// A kernel reads and writes whole node buffers (row-major, element offsets), small local arrays,
// and loop variables. It has a text form (print_loop / parse_kernel) used by `kiln compile
// --emit lowered`, by golden tests, and as the executable format of the `interp` device.
//
// Semantics every backend implements identically (the interpreter is the reference):
//  - Loop variables and offsets are i64. `for v in [0, extent)`; a kernel whose body is a
//    parallel `for` may run that loop's iterations concurrently (split over workgroups).
//  - Arithmetic is in the expression's type; i32 wraps around (two's complement); i32 division
//    truncates toward zero, and x / 0 == 0 and INT32_MIN / -1 == INT32_MIN for i32.
//  - Casts to i32 truncate toward zero and saturate; NaN becomes 0.
//  - Comparisons give 1 or 0 in their result type; select(c, a, b) is a where c != 0, else b.
//  - max/min of floats: if either operand is NaN the result is NaN. relu(x) = max(x, 0).
//    sigmoid(x) = 1 / (1 + exp(-x)); rsqrt(x) = 1 / sqrt(x).
//  - pow(a, b) on integers is computed in f64 and cast back; floor/ceil of integers are identity.
//  - fma(a, b, c) is a * b + c; a backend may round once (fused) or twice.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir {

struct LExpr;
using LExprRef = std::shared_ptr<const LExpr>;

struct LExpr {
  enum class Kind : uint8_t {
    kConst,      // value, of type `type`
    kLoad,       // node buffer `node` at element `offset`
    kLocalLoad,  // local array `local` at element `offset`
    kVar,        // loop variable `var` (i64)
    kOp,         // op(args)
  };
  Kind kind = Kind::kConst;
  DType type = DType::kF32;
  double value = 0;
  int node = -1;
  int local = -1;
  LExprRef offset;  // i64
  int var = -1;
  Op op = Op::kAdd;
  std::vector<LExprRef> args;
};

struct LStmt;
using LStmtRef = std::shared_ptr<const LStmt>;

struct LStmt {
  enum class Kind : uint8_t {
    kBlock,       // body, in order
    kFor,         // for var in [0, extent): body
    kIf,          // if cond != 0: body
    kStore,       // node[offset] = value
    kLocalDecl,   // local array `local` of `local_size` elements of `type`, zero-filled, scoped to body
    kLocalStore,  // local[offset] = value
    kComment,     // text
  };
  Kind kind = Kind::kBlock;
  std::vector<LStmtRef> body;
  int var = -1;
  int64_t extent = 0;
  bool parallel = false;
  LExprRef cond;
  int node = -1;
  int local = -1;
  int64_t local_size = 0;
  DType type = DType::kF32;
  LExprRef offset;
  LExprRef value;
  std::string text;
};

// Dispatch convention (lowering, code generation and the interpreter agree on it):
//  - binding i is the whole buffer of node `nodes[i]`; there are no push constants;
//  - if `body` is a kFor with parallel == true, over extent E, the dispatch has W workgroups in
//    x (1 <= W <= E, chosen by the caller) and workgroup x runs the iterations
//    [x * C, min(E, (x + 1) * C)) with C = ceil(E / W); otherwise the dispatch has 1 workgroup
//    that runs the whole body.
struct Kernel {
  std::string name;         // a C identifier, unique in the program
  std::vector<int> nodes;   // node ids of the buffers it uses, in binding order
  int var_count = 0;        // loop variables are 0 .. var_count-1
  int local_count = 0;      // local arrays are 0 .. local_count-1
  LStmtRef body;
};

struct LoweredRoutine {
  std::string name;
  std::vector<Kernel> kernels;  // run in order, each finished before the next
};

struct LoweredProgram {
  Program program;  // with every node's memory mode decided
  std::vector<LoweredRoutine> routines;
};

// Convenience constructors.
LExprRef lconst(DType type, double value);
LExprRef lvar(int var);
LExprRef lload(int node, DType type, LExprRef offset);
LExprRef llocal_load(int local, DType type, LExprRef offset);
LExprRef lop(Op op, DType type, std::vector<LExprRef> args);

// Text form: one s-expression per kernel, e.g.
//   (kernel main_0 (nodes 0 1) (vars 2) (locals 0)
//     (for v0 64 parallel
//       (for v1 32
//         (store 1 (+ (* v0 32) v1) (relu f32 (load f32 0 (+ (* v0 32) v1)))))))
// print_kernel(parse_kernel(text)) == text for printed text. `program` supplies node names
// for comments only and may be null.
std::string print_kernel(const Kernel& kernel, const Program* program = nullptr);
Result<Kernel> parse_kernel(std::string_view text);
// All kernels of all routines, with a header line per routine.
std::string print_lowered(const LoweredProgram& lowered);

}  // namespace kiln::ir
