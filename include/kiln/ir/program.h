// The high-level IR: tensor nodes and routines of accumulating assignments, as written in the
// `.kiln` language (docs/language.md) or built with ProgramBuilder.
//
// Every reference is resolved: tensors by node id, indices by their number within the
// statement, and every expression carries its type after promotion. A Program is plain data
// (copyable, comparable by printing); validate_program() checks the invariants below, so that
// programs built in C++ get the same checks as parsed ones.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::ir {

// Element types (language version 3). The first four keep their numbers from earlier versions.
// f16 (IEEE binary16) and bf16 (bfloat16) are storage types: values of them are computed in
// f32 and rounded to nearest even where they are stored or cast (docs/language.md).
enum class DType : uint8_t {
  kF32, kF64, kI32, kI64,
  kBool, kI8, kU8, kI16, kU16, kU32, kU64, kF16, kBF16,
};
inline constexpr DType kAllDTypes[] = {DType::kBool, DType::kI8,  DType::kU8,  DType::kI16, DType::kU16,
                                       DType::kI32,  DType::kU32, DType::kI64, DType::kU64, DType::kF16,
                                       DType::kBF16, DType::kF32, DType::kF64};
// "f32", "f64", "i32", "i64", "bool", "i8", ... "bf16"
std::string_view dtype_name(DType type);
// The type named `name` ("u8"), if any.
std::optional<DType> dtype_from_name(std::string_view name);
// "bool, i8, u8, ..., f64": every type, for messages.
std::string_view dtype_list();
size_t dtype_size(DType type);
bool is_float_type(DType type);     // f16 bf16 f32 f64
bool is_integer_type(DType type);   // i8 ... u64 (not bool)
bool is_unsigned_type(DType type);  // u8 u16 u32 u64
bool is_narrow_float(DType type);   // f16 bf16: stored narrow, computed in f32
int dtype_bits(DType type);         // 1 for bool
// The promotion of two tensor operands' types (docs/language.md, "Promotion"): bool <
// integers < floats; within a kind the wider wins; a signed and an unsigned integer of one width
// give the next wider signed type; f16 with bf16 gives f32. nullopt for u64 with a signed
// integer (the user must cast).
std::optional<DType> promote_types(DType a, DType b);
// promote_types, with u64 and a signed type giving u64 (for code past typing, where
// promote_types has already been checked).
DType promote(DType a, DType b);
// Whether `value` is a value of the integer (or bool) type `type`: integral and in its range.
bool integer_value_fits(DType type, double value);

enum class Role : uint8_t { kInput, kOutput, kParam, kTensor, kConst };
// "input", "output", "param", "tensor", "const"
std::string_view role_name(Role role);

// Where a node's values live. kUnset until analysis (or the user) decides.
//  kVirtual: never stored; computed where it is read (inlined).
//  kLocal: a small array private to one kernel.
//  kOnDevice: a device buffer, not visible to the host.
//  kHosted: a device buffer that the host reads or writes (inputs, outputs, params).
enum class MemoryMode : uint8_t { kUnset, kVirtual, kLocal, kOnDevice, kHosted };
std::string_view memory_mode_name(MemoryMode mode);

struct SourceLoc {
  int line = 0;    // 1-based; 0 for built programs
  int column = 0;  // 1-based
};

// Language version 2: a size, a dimension whose value is known only when a routine runs
// (`size N`). Sizes are numbered by their position in Program::sizes.
struct SizeDecl {
  std::string name;
  SourceLoc loc;
};

// The number of the size named `name` in `sizes`, or -1.
int size_number(const std::vector<SizeDecl>& sizes, std::string_view name);

// sum(coeff * size) + offset over a program's sizes: a dimension (`N + 2`, `2*N`) or an index's
// extent. A constant (no terms) is a plain number.
struct SizeExpr {
  std::vector<std::pair<int, int64_t>> terms;  // (size number, coefficient), coefficient != 0, by size number
  int64_t offset = 0;

  static SizeExpr constant(int64_t value) { return SizeExpr{{}, value}; }
  static SizeExpr size(int number) { return SizeExpr{{{number, 1}}, 0}; }
  bool is_constant() const { return terms.empty(); }
  // The size number if this is exactly one size (coefficient 1, offset 0), else -1.
  int bare_size() const { return terms.size() == 1 && terms[0].second == 1 && offset == 0 ? terms[0].first : -1; }
  friend bool operator==(const SizeExpr&, const SizeExpr&) = default;
};

// Initial value of a param / tensor / const.
struct Init {
  enum class Kind : uint8_t { kNone, kValue, kUniform, kNormal };
  Kind kind = Kind::kNone;
  double a = 0;  // the value; uniform's LO; normal's MEAN
  double b = 0;  // uniform's HI; normal's STD
};

struct TensorNode {
  int id = -1;  // its index in Program::nodes
  std::string name;
  Role role = Role::kTensor;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // empty: scalar
  Init init;
  MemoryMode memory = MemoryMode::kUnset;
  SourceLoc loc;
  // Language version 2: one per dimension when a dimension names a size, else empty. `dims`
  // then holds 1 for each such dimension until specialize_sizes() (kiln/ir/sizes.h) gives it its
  // value: only the front end (parser, builder, printer, validation, binding) sees sized nodes.
  std::vector<SizeExpr> sized_dims;
  // Made by the compiler (a reduction inside an expression, `z__sum1`), not declared: messages
  // that list a program's names for its user leave it out.
  bool temporary = false;

  int64_t element_count() const;  // 1 for a scalar
  // element_count() * dtype_size(dtype), saturating at INT64_MAX; declarations keep it below
  // kMaxTensorBytes, so code past validation may use it as a size_t without overflow.
  int64_t byte_size() const;
  bool is_scalar() const { return dims.empty(); }
  bool is_sized() const { return !sized_dims.empty(); }
  // Dimension d as an expression: of sizes where it names them, else its number.
  SizeExpr dimension(size_t d) const { return is_sized() ? sized_dims[d] : SizeExpr::constant(dims[d]); }
};

// Language version 2, a triangular bound (`where u < t + 1`): a limit on an index that is an
// affine expression of other indices of the statement, sizes and an integer.
struct IndexLimit {
  std::vector<std::pair<int, int64_t>> indices;  // (index number, coefficient), coefficient != 0, by number
  SizeExpr rest;                                 // the sizes and the integer
  friend bool operator==(const IndexLimit&, const IndexLimit&) = default;
};

// An index of one statement, e.g. `i` in `y[i] = x[i] * 2`.
struct IndexVar {
  std::string name;
  int64_t extent = 0;  // the index runs over [0, extent)
  // Language version 2: the extent when it names a size (`extent` is then 1 until specialized).
  std::optional<SizeExpr> sized_extent;
  // Language version 2, only on a reduced index: at each point the index also stays below this
  // limit (points at or beyond it are not visited), a triangle of the index with the ones the
  // limit names. `extent` is then its range where it stands alone in a dimension, else the most
  // the limit reaches over the other indices' ranges (clamped at 0 when sizes are bound).
  std::optional<IndexLimit> limit;
  // The extent as an expression: of sizes where it names them, else its number.
  SizeExpr range() const { return sized_extent ? *sized_extent : SizeExpr::constant(extent); }
};

// sum(coeff * index) + offset, over the statement's indices: `2*i + k - 1`.
struct Affine {
  std::vector<std::pair<int, int64_t>> terms;  // (index number, coefficient), coefficient != 0
  int64_t offset = 0;
  // Language version 2, a gather: the read's args[gather], an i32 expression that reads tensors
  // (`lab[n]` in `z[n, lab[n] + 1]`), is added to the affine part; -1 for an affine subscript.
  // (In lowering's access analysis, loop/access.h, it only marks the subscript as not affine.)
  int gather = -1;

  static Affine index(int i) { return Affine{{{i, 1}}, 0, -1}; }
  // The index number if this is exactly one bare index (coefficient 1, offset 0, no gather), else -1.
  int bare_index() const;
};

enum class Op : uint8_t {
  // unary
  kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kAbs, kSin, kCos, kFloor, kCeil,
  kCastF32, kCastF64, kCastI32,
  kErf,  // the error function
  // language version 3: casts to the other types, and bitwise not (logical on bool)
  kCastBool, kCastI8, kCastU8, kCastI16, kCastU16, kCastU32, kCastI64, kCastU64, kCastF16, kCastBF16,
  kBitNot,
  // binary
  kAdd, kSub, kMul, kDiv, kLt, kLe, kGt, kGe, kEq, kNe, kMax, kMin, kPow,
  kBitAnd, kBitOr, kBitXor, kShl, kShr,  // language version 3: & | ^ << >>
  // ternary
  kSelect,  // select(c, a, b): a where c != 0, else b
  kFma,     // fma(a, b, c) = a * b + c; made by the optimizer, never parsed
};
int op_arity(Op op);
// The cast op to `type`, and the type a cast op converts to (nullopt for other ops).
Op cast_op(DType type);
std::optional<DType> cast_target(Op op);
bool is_comparison(Op op);  // < <= > >= == !=
// The name used in the language: "exp", "+", "select", "f32", ... (kNeg and kSub are both "-").
std::string_view op_name(Op op);
// The type of `op` applied to arguments of these types (the typing rule that statement
// completion applies and validate_program checks):
//  - casts: their type;
//  - exp log sqrt rsqrt tanh sigmoid sin cos erf: the argument's type if a float, else f32;
//  - neg abs relu floor ceil: the argument's type (i32 for bool);
//  - + - * / pow: promote(a, b) (i32 where that is bool: arithmetic on bool counts);
//  - max, min: promote(a, b); & | ^: promote(a, b), bool or integers; ~: bool or integers;
//  - << >>: the left operand's type, both integers;
//  - comparisons: bool (they compare in promote(a, b));
//  - select(c, a, b): promote(a, b) (the condition may have any type); fma: promote of all three.
// Arguments are converted to the op's type before it applies, except casts, select's condition,
// shifts' amounts and comparisons. nullopt for a wrong number of arguments or types the op does
// not take (a float in `&`, u64 with a signed type).
std::optional<DType> op_result_type(Op op, const std::vector<DType>& arg_types);

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,  // `literal`
    kTensor,   // node[subscripts]; a scalar node (e.g. a const) has no subscripts; args: gathers
    kMerge,    // node.merge[subscripts]
    kIndex,    // the value of index `index`, as i32
    kOp,       // op(args)
    kSize,     // the value of size number `index` (language version 2), as i32
  };
  Kind kind = Kind::kLiteral;
  DType type = DType::kF32;  // after promotion
  double literal = 0;
  int node = -1;
  std::vector<Affine> subscripts;
  int index = -1;
  Op op = Op::kAdd;
  std::vector<ExprRef> args;
  SourceLoc loc;
};

// Accumulation of a statement into its target.
enum class Accum : uint8_t { kAssign, kAdd, kSub, kMul };  // = += -= *=
// kArgmax / kArgmin (language version 2): the position (i64, stored in the target's type) of the
// largest / smallest value over exactly one reduced index; ties give the lowest position, a NaN
// counts as beyond every number (the first NaN wins), and an empty range gives -1.
enum class Reduce : uint8_t { kNone, kSum, kProd, kMax, kMin, kMean, kArgmax, kArgmin };
// The type a reduction accumulates in over arguments of `arg` (docs/language.md): sum and prod
// of bool and of integers narrower than 64 bits in i64 (u64 for unsigned ones), of f16 and bf16
// in f32; mean of bool and integers in f64, of f16 and bf16 in f32; otherwise `arg` (max, min,
// and the arg reductions, whose positions are i64 in lowering).
DType accumulation_type(Reduce reduce, DType arg);
std::string_view accum_name(Accum accum);    // "=", "+=", ...
std::string_view reduce_name(Reduce reduce);  // "", "sum", ...

// TARGET[target_indices] ACCUM REDUCE(rhs) — or ACCUM rhs when reduce is kNone.
//
// Meaning (docs/language.md): for every point of the target indices, the reduction
// runs over every index of `indices` not in `target_indices` (in any order); iteration points
// where a tensor subscript falls outside its dimension contribute nothing to a reduction, and
// such reads are 0 in an elementwise statement. `mean` divides the sum by the product of the
// reduced indices' extents. The right side reads values from before the statement.
struct Assignment {
  int target = -1;
  std::vector<int> target_indices;  // one bare index per target dimension, distinct
  Accum accum = Accum::kAssign;
  Reduce reduce = Reduce::kNone;
  ExprRef rhs;
  std::vector<IndexVar> indices;  // every index of the statement; numbers index this vector
  SourceLoc loc;

  // Indices not in target_indices (reduced over).
  std::vector<int> reduced_indices() const;
};

// An argument of a call: a whole tensor (node >= 0), or an attribute NAME=NUMBER (node -1).
struct CallArg {
  int node = -1;
  std::string attribute;
  double value = 0;
  SourceLoc loc;
};

// call FUNCTION(ARGS) -> OUTPUTS (docs/language.md, "Calls"; kiln/ir/call.h has the built-in
// signatures). It runs after the routine's first `position` assignments and the calls before it
// in `Routine::calls`, and before the rest: statements and calls keep the order written.
struct Call {
  std::string function;
  std::vector<CallArg> args;  // tensors, then attributes, as written
  std::vector<int> outputs;   // written completely by the call
  int position = 0;
  SourceLoc loc;
  SourceLoc function_loc;
  std::vector<SourceLoc> output_locs;  // where each output is named (empty for built programs)
};

struct Routine {
  std::string name;
  std::vector<Assignment> statements;
  std::vector<Call> calls;  // ordered by position
  SourceLoc loc;
};

struct Program {
  std::string file;  // where it came from, for diagnostics ("<builder>" when built)
  std::vector<SizeDecl> sizes;  // language version 2
  std::vector<TensorNode> nodes;
  std::vector<Routine> routines;  // `main` first when the file has top-level statements

  const TensorNode* find_node(std::string_view name) const;
  const Routine* find_routine(std::string_view name) const;
  // The number of the size named `name`, or -1.
  int find_size(std::string_view name) const;
  bool has_sizes() const { return !sizes.empty(); }
};

// The language's reserved words: input output param tensor const routine where.
bool is_keyword(std::string_view name);
// [A-Za-z_][A-Za-z0-9_]* and not a keyword: a name that prints and parses back.
bool is_identifier(std::string_view name);
// The predeclared float literals `inf` (+infinity) and `nan` (a quiet NaN): the value a bare name
// stands for where the program declares no tensor, const or size, and the statement no index, of
// that name (such a declaration hides the literal). nullopt for every other name.
std::optional<double> predeclared_literal(std::string_view name);
// The predeclared name that spells non-finite `value` ("inf" for either infinity, "nan"), or ""
// for a finite one.
std::string_view predeclared_name(double value);

// Deepest expression tree a program may hold (parser, builder and validate_program enforce it),
// so that recursive passes over expressions cannot exhaust the stack.
inline constexpr int kMaxExprDepth = 256;
// A tensor's bytes must be fewer than this (2^62): its byte size, and offsets into it, then fit in
// int64_t and size_t with room to spare (2^62 f32 elements would be 2^64 bytes, which wraps to 0).
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;

// Checks every invariant above (ids, dims >= 0, subscripts count, bare distinct target indices,
// index extents >= 0, types consistent with promotion, no writes to inputs or consts, merge reads
// only of non-const nodes, ...). INVALID_ARGUMENT naming the routine, statement and problem.
// In detail: node ids equal their position, names are non-empty and unique (nodes; routines;
// indices within a statement, which also differ from node names), dtypes are not i64, dims >= 0
// (0 only from a size bound to 0: the parser and builder take positive numbers) with an element
// count below 2^62; inputs and outputs have no initializer, consts have a value;
// a statement's target is not an input or const and has one distinct bare index per dimension;
// every index is used (target, subscript term, index value or another index's limit), has
// extent >= 0, and equals the size of every target dimension where it stands (a read's dimension
// may differ: the read is range-checked); a limit is on a reduced index, names other valid
// indices and sizes (under `mean`, no other reduced index), and no index limits itself through
// others; without a reduction every index
// is a target index; references have one subscript per dimension, affine terms name distinct valid indices
// with non-zero coefficients; tensor and merge reads have their node's dtype, index values are
// i32, literals are finite (integral and in range when i32), ops have their arity and
// op_result_type; expressions are at most kMaxExprDepth deep.
Status validate_program(const Program& program);

}  // namespace kiln::ir
