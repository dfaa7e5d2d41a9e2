// The low-level IR: kernels of loop nests over node buffers, the output of lowering and the
// input of code generation and of the reference interpreter.
//
// A lowered routine is a list of kernels run in order, each finished before the next starts.
// A kernel reads and writes whole node buffers (row-major, element offsets), small local arrays,
// and loop variables. It has a text form (print_kernel / parse_kernel) used by `kiln compile
// --emit lowered`, by golden tests, and as the executable format of the `interp` device.
//
// Semantics every backend implements identically (the interpreter is the reference):
//  - Loop variables and offsets are i64. `for v in [0, extent)`; a kernel whose body is a
//    parallel `for` may run that loop's iterations concurrently (split over workgroups).
//  - Arithmetic is in the expression's type (kiln/loop/op_eval.h has every op on every type);
//    integers wrap around at their width (two's complement); integer division truncates toward
//    zero, and x / 0 == 0 and MIN / -1 == MIN. bool is 0 or 1. f16 and bf16 values are computed
//    in f32 (a backend) or f64 (the reference) and rounded to nearest even by a cast, a constant
//    or a store.
//  - Casts from floats to integers truncate toward zero and saturate; NaN becomes 0. Casts
//    between integer types wrap; a cast to bool is != 0.
//  - & | ^ ~ on bool and integers; << >> shift an integer by an amount of any integer type
//    (not converted to the operand's); an amount below 0 or at least the width gives 0 (-1 for
//    >> of a negative signed value); >> of a signed value is arithmetic.
//  - Comparisons give 1 or 0 in their result type; select(c, a, b) is a where c != 0, else b.
//  - max/min of floats: if either operand is NaN the result is NaN. relu(x) = max(x, 0).
//    sigmoid(x) = 1 / (1 + exp(-x)); rsqrt(x) = 1 / sqrt(x).
//  - pow(a, b) on integers is computed in f64 and cast back; floor/ceil of integers are identity.
//  - fma(a, b, c) is a * b + c; a backend may round once (fused) or twice.
//  - Types are explicit: an op's operands have the op's type (no implicit promotion; lowering
//    inserts casts), except casts (any operand type), comparisons (two operands of one type, the
//    result in any type) and select's condition (any type). Offsets are i64. Loop variables are
//    i64. i64 arithmetic wraps like i32, and i64 division follows the i32 rules
//    (x / 0 == 0, INT64_MIN / -1 == INT64_MIN).
//  - Integer operands of exp/log/sqrt/rsqrt/tanh/sigmoid/sin/cos/erf are computed in f64 and cast
//    back like pow (saturating, NaN → 0); neg/abs of integers wrap (abs(INT32_MIN) ==
//    INT32_MIN); relu/max/min of integers are exact. Casts to f32 round to nearest.
//  - f32 constants are rounded to f32. The reference interpreter evaluates f32 expressions in
//    f64 and rounds only at stores to f32 buffers/locals and at casts to f32; a backend that
//    computes in f32 differs from it only by rounding.
//  - select(c, a, b) evaluates only the operand it picks, so an out-of-range load in the other
//    one is harmless (a guarded load). Every other expression evaluates all its operands.
//  - A store writes value->type (the LStmt's `type` of a kStore/kLocalStore is value->type;
//    the text does not repeat it). All loads and stores of one node in a kernel use one type;
//    loads and stores of a local use its declared type.
//  - Loads and stores outside their buffer or local array are errors (the interpreter fails the
//    dispatch); they are never undefined behaviour in the reference.
//  - Scoping: a loop variable is used only inside a `for` over it, and no `for` rebinds the
//    variable of an enclosing one; a local is used only inside its kLocalDecl, which no nested
//    kLocalDecl of the same number shadows. A nested `parallel` loop runs like a plain one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
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
    kSize,       // the value of the program's size number `size` (i64), a push constant
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
  int size = -1;
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
    kTrace,       // value trace: logs `values` as one line of trace site `site` (see below)
    kFail,        // a failed check: the dispatch fails with failure `site`, `text` and `value` (see below)
  };
  Kind kind = Kind::kBlock;
  std::vector<LStmtRef> body;
  int var = -1;
  int64_t extent = 0;
  // kFor over a size (language version 2): its extent is this i64 expression of sizes (kSize)
  // and constants, known only when the kernel runs, and `extent` is -1, which every pass that
  // needs a known trip count takes as "do not transform". A triangular loop (a `where u < t + 1`
  // bound) has an extent that also reads the variables of enclosing loops (is_triangular).
  LExprRef extent_expr;
  bool parallel = false;
  LExprRef cond;
  int node = -1;
  int local = -1;
  int64_t local_size = 0;
  DType type = DType::kF32;
  LExprRef offset;
  LExprRef value;
  std::string text;
  int site = -1;                 // kTrace: its trace site (LoweredProgram::trace_sites); kFail: its failure
  std::vector<LExprRef> values;  // kTrace: what it logs
};

// A failed check (kFail; LowerOptions::check_bounds makes them, under an `if` of the failed
// condition): it records that the dispatch fails with code kFirstFailureCode + `site`, where
// `site` numbers the kernel's distinct failures from 0 (failure_messages), reporting `text` with
// its i64 `value` appended ("...: 7"). The workgroup runs on to its end (its loads stay guarded
// as always, so nothing else fails); the dispatch then fails with the first failure a workgroup
// recorded (the interpreter and the CPU driver: of the first workgroup that returned one).
inline constexpr int kFirstFailureCode = 1000;

// Value tracing (docs/tracing.md). A kTrace statement prints one line to the process's standard
// output, `kTraceLinePrefix RUN SITE V0 V1 ...\n`: RUN is its `value` (an i32 expression: the run
// id), SITE its `site`, then each of `values` in decimal (floats with enough digits to read back
// to the same value of their type; NaN and infinities as C's printf writes them). Only workgroup 0
// (and its first work-item) prints, and at most `extent` lines per dispatch and trace statement;
// the first one past that is `RUN SITE more`, and later ones print nothing. extent 0: no limit.
inline constexpr const char* kTraceLinePrefix = "\x1ekiln-trace ";

// Dispatch convention (lowering, code generation and the interpreter agree on it):
//  - binding i is the whole buffer of node `nodes[i]`;
//  - a kernel of a program with sizes takes 2 * `size_count` push constants: size s is the i64
//    whose low 32 bits are constant 2s and high 32 bits constant 2s + 1 (size_constants());
//    a kernel without sizes takes none;
//  - if `body` is a kFor with parallel == true, over extent E, the dispatch has W workgroups in
//    x (1 <= W <= E, chosen by the caller) and workgroup x runs the iterations
//    [x * C, min(E, (x + 1) * C)) with C = ceil(E / W) (E evaluated at the sizes for a loop
//    over a size; E <= 0 runs nothing); otherwise the dispatch has 1 workgroup
//    that runs the whole body;
//  - a workgroup outside that grid (y or z > 0; x > 0 for a body that is not a parallel for)
//    does nothing and succeeds, so a caller may pass W > E (the extra workgroups are empty).
struct Kernel {
  std::string name;         // a C identifier, unique in the program
  std::vector<int> nodes;   // node ids of the buffers it uses, in binding order
  int var_count = 0;        // loop variables are 0 .. var_count-1
  int local_count = 0;      // local arrays are 0 .. local_count-1
  int size_count = 0;       // sizes it may read (kSize) are 0 .. size_count-1
  LStmtRef body;
};

// The push constants of a dispatch of a kernel with sizes at the sizes' `values` (see above).
std::vector<uint32_t> size_constants(const std::vector<int64_t>& values);
// `kernel` with every loop over a size made a loop of the extent it has at the sizes' `values`
// (negative extents become 0; a triangular loop keeps its extent's expression, with the values
// in place of the sizes); expressions still read the sizes. What the runtime sizes a dispatch by
// (its workgroup count).
Kernel kernel_at_sizes(const Kernel& kernel, const std::vector<int64_t>& values);
// The sizes (their numbers) the kernel reads anywhere, in an expression or a loop's extent: a
// kernel runs the same at every value of the others, also while they are not bound.
std::set<int> sizes_read(const Kernel& kernel);
// The value of an i64 expression of sizes and constants (a kFor's extent_expr) at `values`;
// nullopt where it reads anything else or overflows.
std::optional<int64_t> evaluate_extent(const LExpr& e, const std::vector<int64_t>& values);

// A call statement of a lowered routine: it runs after the routine's first `after_kernels`
// kernels and before the rest (calls with equal after_kernels run in order). Its tensors live in
// buffers (kHosted or kOnDevice). `call_site` numbers the program's calls in order (routines in
// program order, calls in the order written); it keys the call's random-number stream.
struct LoweredCall {
  Call call;
  size_t after_kernels = 0;
  int call_site = 0;
};

// Intermediates of one routine that share one buffer (LowerOptions::shared_buffers,
// src/loop/shared_buffers.h). A node's lifetime is the span of the routine's actions (kernels and
// calls, numbered in the order they run) from the first that touches it to the last; nodes whose
// lifetimes overlap never share a byte. Such a node is private to the routine's context: the
// host never sees its values. Where each one's bytes start depends on the nodes' sizes (a shape
// may name a size): layout_shared_buffer places them.
struct SharedNode {
  int node = -1;
  size_t first = 0, last = 0;  // its first and last action
};
// Offsets are multiples of kSharedBufferAlignment.
inline constexpr int64_t kSharedBufferAlignment = 256;
struct SharedLayout {
  int64_t bytes = 0;             // the buffer's size
  std::vector<int64_t> offsets;  // per node of the plan, in its order
};
// `nodes` with `bytes[i]` bytes each: largest first, each at the lowest aligned offset that no
// node placed before it whose lifetime overlaps its own occupies.
SharedLayout layout_shared_buffer(const std::vector<SharedNode>& nodes, const std::vector<int64_t>& bytes);

struct LoweredRoutine {
  std::string name;
  std::vector<Kernel> kernels;    // run in order, each finished before the next
  std::vector<LoweredCall> calls;  // in order, between the kernels
  std::vector<SharedNode> shared;  // in node order; empty: every intermediate has a buffer of its own
};

// Where a kTrace statement's line comes from (value tracing, LowerOptions::trace_values): a
// statement of a routine, and what each logged value is. A line's values are the statement's
// indices (`indices`, i64), then its reads (`reads`), then the value stored.
struct TraceSite {
  std::string routine;
  int statement = -1;  // its index in the routine's statements
  SourceLoc loc;
  std::string text;    // the statement in .kiln syntax (print_statement)
  std::string target;  // the node it writes
  int64_t lines = 0;   // the most lines it logs per kernel run (0: no limit)
  std::vector<std::string> indices;  // index names
  std::vector<std::string> reads;    // "x[i, k]", or "inlined h[i]" for an inlined intermediate
};

struct LoweredProgram {
  Program program;  // with every node's memory mode decided
  std::vector<LoweredRoutine> routines;
  std::vector<TraceSite> trace_sites;  // kTrace statements' `site` index this; empty untraced
};

// The hidden node that holds a traced routine's run id (one i32), which kTrace statements load.
inline constexpr const char* kTraceRunNode = "kiln.trace_run";

// Convenience constructors.
LExprRef lconst(DType type, double value);
LExprRef lvar(int var);
LExprRef lload(int node, DType type, LExprRef offset);
LExprRef llocal_load(int local, DType type, LExprRef offset);
LExprRef lop(Op op, DType type, std::vector<LExprRef> args);
LStmtRef lblock(std::vector<LStmtRef> body);
LStmtRef lfor(int var, int64_t extent, bool parallel, std::vector<LStmtRef> body);
LExprRef lsize(int size);
// A loop over `extent`: of known extent when it is a constant, else over a size (extent_expr).
LStmtRef lfor(int var, const LExprRef& extent, bool parallel, std::vector<LStmtRef> body);
LStmtRef lif(LExprRef cond, std::vector<LStmtRef> body);
LStmtRef lstore(int node, LExprRef offset, LExprRef value);  // type: the value's
LStmtRef llocal_decl(int local, DType type, int64_t size, std::vector<LStmtRef> body);
LStmtRef llocal_store(int local, LExprRef offset, LExprRef value);
LStmtRef lcomment(std::string text);
LStmtRef ltrace(int site, int64_t limit, LExprRef run, std::vector<LExprRef> values);
LStmtRef lfail(int site, std::string text, LExprRef value);

// The messages of a kernel's failures (kFail), by site: what a dispatch that fails with code
// kFirstFailureCode + site reports, before its value. Empty for a kernel that cannot fail so.
std::vector<std::string> failure_messages(const Kernel& kernel);
// Whether `loop` is a kFor whose extent reads the variable of an enclosing loop (a triangle).
bool is_triangular(const LStmt& loop);
// Whether `s` or a statement inside it is a triangular loop.
bool has_triangular_loop(const LStmtRef& s);

// The nodes a kernel loads from and stores to (each sorted, without repeats); what the runtime
// synchronizes on. A node both loaded and stored is in both lists.
struct NodeAccess {
  std::vector<int> read;
  std::vector<int> written;
};
NodeAccess node_access(const Kernel& kernel);

// Structural equality of expressions: same kinds, types, ops, ids and constants (NaN equals NaN;
// -0.0 and +0.0 differ, since they are different constants).
bool same_expr(const LExpr* a, const LExpr* b);
// Whether `e` mentions loop variable `var`.
bool uses_var(const LExpr* e, int var);
// For `loads`: any node or local.
inline constexpr int kAnything = -2;
// Whether `e` loads local `local`, or with kAnything, loads anything (a node or a local).
bool loads(const LExpr* e, int local);
// The coefficient of `var` in the i64 expression `e` if `e` is affine in it (`var` appears only
// under +, -, negation and products by constants; 0 where it does not appear), else nothing.
std::optional<int64_t> var_coefficient(const LExpr& e, int var);

// Text form: one s-expression per kernel, e.g.
//   (kernel main_0 (nodes 0 1) (vars 2) (locals 0)
//     (for v0 64 parallel
//       (for v1 32
//         (store 1 (+ (* v0 32) v1) (relu f32 (load f32 0 (+ (* v0 32) v1)))))))
// print_kernel(parse_kernel(text)) == text for printed text, and parse_kernel(print_kernel(k))
// reproduces k field by field (NaN payloads aside). `program` supplies node names for
// comments only and may be null.
//
// Grammar (`;` starts a comment to the end of the line; statements print one per line):
//   kernel := (kernel NAME (nodes ID*) (vars N) (locals N) [(sizes N)] STMT)   NAME a C identifier
//   STMT   := (block STMT*)
//           | (for vI EXTENT [parallel] STMT*)                      EXTENT an integer >= 0, or
//                                                                   an i64 EXPR of sizes,
//                                                                   integers and enclosing
//                                                                   loops' variables, e.g.
//                                                                   (* s0 4), (min s0 (+ v0 1))
//           | (if EXPR STMT*)
//           | (store ID OFFSET EXPR)
//           | (local L TYPE SIZE STMT*)                             SIZE an integer >= 1
//           | (local_store L OFFSET EXPR)
//           | (comment "TEXT")                   escapes \" \\ \n \t \r \xHH
//           | (trace SITE LIMIT RUN EXPR*)                         RUN an i32 EXPR; SITE, LIMIT >= 0
//           | (fail SITE "TEXT" EXPR)                              EXPR i64; SITE >= 0
//   EXPR   := vI                                 loop variable I (i64)
//           | sI                                 size I (i64), I < the kernel's (sizes N)
//           | INTEGER                            an i64 constant, e.g. 32 or -1
//           | (const TYPE VALUE)                 other constants; integers in the type's range
//                                                for bool and the integer types (u64 up to
//                                                18446744073709551615), shortest round-trip
//                                                form for floats (1.5, 1e+20, inf, -inf, nan)
//           | (load TYPE ID OFFSET) | (local_load TYPE L OFFSET)
//           | (OP [TYPE] EXPR...)                TYPE omitted means i64; casts take none:
//                                                (f32 X) (u8 X) (bf16 X), except (i32 i64 X),
//                                                an i32 value widened into an offset (a gather)
//   OP     := neg exp log sqrt rsqrt tanh sigmoid relu abs sin cos erf floor ceil
//             + - * / < <= > >= == != max min pow select fma ~ & | ^ << >>
//             bool i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16 f32 f64   (casts)
//   TYPE   := bool | i8 | u8 | i16 | u16 | i32 | u32 | i64 | u64 | f16 | bf16 | f32 | f64
// ID is a node id (what LExpr::node and LStmt::node hold), which must be listed in `(nodes
// ...)` (binding i is nodes[i]); L is a local number < local_count; I < var_count. The parser
// validates everything above (ids, scoping, op arity and operand types, i64 offsets, one type
// per node and per local) and reports INVALID_ARGUMENT "LINE:COLUMN: expected ..., got ...".
// Nesting is limited to 1000 levels, (vars N), (locals N) and (sizes N) to kMaxKernelVars,
// kMaxKernelLocals and kMaxKernelSizes; a pass that adds variables or locals stays within them.
inline constexpr int kMaxKernelVars = 1 << 16;
inline constexpr int kMaxKernelLocals = 1 << 16;
inline constexpr int kMaxKernelSizes = 1 << 16;
std::string print_kernel(const Kernel& kernel, const Program* program = nullptr);
Result<Kernel> parse_kernel(std::string_view text);
// Several kernels, one after another (as print_lowered writes them, or the `interp` device's
// executable format "kiln-loop"); names must be distinct.
Result<std::vector<Kernel>> parse_kernels(std::string_view text);
// All kernels of all routines, with a comment line "; routine NAME: N kernels" per routine
// (parse_kernels reads it back).
std::string print_lowered(const LoweredProgram& lowered);

}  // namespace kiln::ir
