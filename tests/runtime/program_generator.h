// The random program generator of the differential test (differential_test.cc): seeded,
// deterministic, valid `.kiln` programs built to avoid values that two correct implementations
// may compute differently beyond rounding. What it writes, and what it avoids, is described at
// the top of differential_test.cc. Declarations and statements are in program_generator.cc, the
// float expressions in program_generator_expressions.cc, the typed integer and bool expressions
// (every element type, language version 3) in program_generator_integers.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/base/random.h"
#include "kiln/ir/program.h"

namespace kiln::e2e {

struct GenTensor {
  std::string name;
  ir::Role role = ir::Role::kTensor;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> dims;
  // Float tensors other than inputs and consts: every write keeps |value| <= 2 (reads use it
  // directly), else "free" (reads squash it).
  bool bounded = true;
  bool may_inf = false;     // a free tensor that may hold +-inf (an empty max / min)
  bool written = false;     // written by an earlier statement, in file order
  // An intermediate written by one elementwise `=` statement and read by the next statement
  // only (what lowering inlines), unless `pipe_open` lets later statements read it too.
  bool pipe = false;
  bool pipe_open = false;
  // A tensor of the row block: written by `=` statements that share its dimension 0 and read
  // (in the block) only by statements using their own first index in dimension 0.
  bool row = false;
  // The output of the gather statement (gather_statement), written by it only.
  bool gather = false;
  int small_adds = 0;       // += / -= statements on a bounded tensor (each adds at most 0.125)
  double value = 0;         // a const's value
  std::string init;         // the declaration's initializer, "" for none
  // An integer input whose values are drawn across its type's whole range (input_values), not
  // only near 0.
  bool wide = false;
  // f16 / bf16 tensors other than inputs: a value computed in f32 and rounded once may differ
  // by one unit in the last place between two correct devices, and a later computation could
  // magnify that. So such a tensor is either `narrow_exact` (every write is an exact value, so
  // its rounding is the same everywhere, and reads may use it like an input) or not read at all.
  bool narrow_exact = false;

  bool is_float() const { return ir::is_float_type(dtype); }
  // f16 or bf16.
  bool is_narrow() const { return ir::is_narrow_float(dtype); }
  // A float tensor whose statements may compute anything (f32, f64): every float target but
  // the narrow ones.
  bool is_wide_float() const { return is_float() && !is_narrow(); }
  // Nothing reads it: a narrow float written with rounded values.
  bool unread() const { return is_narrow() && role != ir::Role::kInput && role != ir::Role::kConst && !narrow_exact; }
  int rank() const { return static_cast<int>(dims.size()); }
};

// A generated expression.
struct Gen {
  std::string text;
  double bound = 0;      // |value| <= bound; INFINITY when unknown
  bool literal = false;  // made only of literals
  bool atom = true;      // can be an operand without parentheses
  // The expression's type as typing will settle it, where the generator tracks it (integer,
  // bool and exact expressions); float expressions are kF32 whatever their float type.
  ir::DType type = ir::DType::kF32;
  // An integer or bool expression's values lie in [lo, hi] (the whole range of its type when
  // unknown, or when it may have wrapped around).
  double lo = 0, hi = 0;
  // A lone number literal: it takes the type of the operand beside it.
  bool weak = false;

  bool is_int() const { return !ir::is_float_type(type); }  // integers and bool
};

struct Index {
  std::string name;
  int64_t extent = 0;
  bool target = false;
  bool used = false;   // occurs in the statement
  bool in_subscript = false;  // occurs in a subscript (only then may it be used as a value)
  bool bare = false;   // stands alone as a whole subscript somewhere
};

struct StatementCtx {
  GenTensor* target = nullptr;
  std::vector<Index> indices;  // target indices first, then the candidate reduced ones
  bool reduction = false;
  bool no_compound = false;  // subscripts must be bare indices or literals (no empty reductions)
  bool any_compound = false; // a compound subscript was generated
  const GenTensor* must_read = nullptr;  // the first float leaf reads this tensor
  bool row_mode = false;  // a statement of the row block: row tensors are read in its row
};

class ProgramGenerator {
 public:
  ProgramGenerator(uint64_t seed, std::string prefix, bool allow_main)
      : rng_(Random::for_name(seed, "kiln-differential")), prefix_(std::move(prefix)),
        allow_main_(allow_main) {}

  std::string generate();
  // The generated program's tensors, declarations in order (after generate()).
  const std::vector<GenTensor>& tensors() const { return tensors_; }
  // Names of the inputs whose values are drawn across their type's whole range.
  std::set<std::string> wide_inputs() const;
  // Leaves reductions inside expressions out (each is a kernel of its own, grouped or not):
  // for measuring how much the rest fuses.
  ProgramGenerator& without_inner_reductions() {
    inner_reductions_ = false;
    return *this;
  }

 private:
  // --- randomness ----------------------------------------------------------------------------
  // Draws happen in sequence, never two in the arguments of one call (whose order C++ leaves to
  // the compiler): then GCC's and Clang's builds generate the same program for a seed.
  int pick(int n) { return static_cast<int>(rng_.next_u64() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return rng_.uniform() < p; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) { return v[static_cast<size_t>(pick(static_cast<int>(v.size())))]; }

  int64_t dim() { return chance(0.8) ? one_of(dim_pool_) : 1 + pick(7); }

  // --- declarations --------------------------------------------------------------------------
  GenTensor& add(ir::Role role, const std::string& stem, ir::DType dtype, std::vector<int64_t> dims);
  // Any of the 13 element types, f32 the most common (about half); `ints` scales the weight of
  // the integer and bool types.
  ir::DType any_type(double ints = 1);
  // The type of a gather's index tensor: i32 mostly, else i8, u8, i16 or i64.
  ir::DType index_type();
  std::vector<int64_t> shape();
  static std::string dims_text(const std::vector<int64_t>& dims, bool bare_scalar);
  void declare();
  static std::string format_number(double v);

  // Initial values within [-1, 1] (bounded tensors stay within [-2, 2] after their writes).
  std::string initializer(const GenTensor& t);

  // --- statements ----------------------------------------------------------------------------
  GenTensor& choose_target();

  // A statement; `pipe_target`: an elementwise `=` to that tensor; `must_read`: a statement with
  // a float target whose right side reads that tensor.
  // `row_target`: a statement of the row block writing that tensor (mostly with `=`).
  std::string statement(GenTensor* pipe_target = nullptr, const GenTensor* must_read = nullptr,
                        bool row_block = false);

  // The gather: an output read through an integer index tensor compared with a reduced index,
  //   p[a, b] = sum(select(t[a, b] == g, x[g, a, b], 0))
  // t is an input holding -8..8 (0..16 if unsigned: some values in range, some not).
  std::string gather_statement();
  // An integer target's argmax / argmin over one reduced index of an exact tensor (any type):
  //   y[i, j] = argmax(x[j, k, i])
  std::string arg_reduction_statement(GenTensor& target);
  // The right side of an f16 / bf16 target: an exact value within kNarrowExactBound for a
  // narrow_exact one (its rounding is then the same everywhere).
  Gen narrow_exact_value(StatementCtx& ctx);

  // --- subscripts ----------------------------------------------------------------------------
  std::vector<size_t> usable_indices(const StatementCtx& ctx) const;
  std::string term(StatementCtx& ctx, size_t i, int64_t coefficient);
  static std::string plus_offset(std::string text, int64_t offset);
  const GenTensor* int_const();

  // One subscript for a dimension of size `size`. `shift_of` >= 0: a read of the target at a
  // point shifted from its own (the target index of that dimension plus a small offset).
  std::string subscript(StatementCtx& ctx, int64_t size, int shift_of);
  std::string reference(StatementCtx& ctx, const GenTensor& t, bool shifted_self);

  // Tensors a statement may read: inputs, consts, params, outputs, intermediates already
  // written (in file order) and the target itself.
  std::vector<const GenTensor*> readable(const StatementCtx& ctx, bool want_float, bool exact_only) const;

  // --- expressions ---------------------------------------------------------------------------
  // The bound of a narrow_exact tensor's values.
  static constexpr double kNarrowExactBound = 16;
  static Gen atom(std::string text, double bound, bool literal = false);
  static std::string operand(const Gen& g) { return g.atom ? g.text : "(" + g.text + ")"; }
  static Gen binary(const Gen& a, const std::string& op, const Gen& b, double bound);
  static Gen call(const std::string& f, const std::vector<Gen>& args, double bound);

  // Keeps |value| <= limit (limit > 0).
  Gen shape_bound(const Gen& e, double limit);

  // An exact value that is not a literal: a float input (in [-1, 1)) or now and then a
  // narrow_exact tensor, else an integer input that is not wide (in [-8, 8] or [0, 16]; every
  // program has one of these).
  Gen float_input(StatementCtx& ctx);
  Gen nonliteral_float(StatementCtx& ctx) { return float_input(ctx); }
  Gen nonliteral_int(StatementCtx& ctx);
  static Gen negate(const Gen& a);

  // An exact condition (true when non-zero): a comparison (bool), bool operators, an integer
  // expression of any type.
  Gen condition(StatementCtx& ctx, int depth);
  // An exact bool: a comparison, & | ^ ~ of bools, a bool tensor, true or false.
  Gen truth(StatementCtx& ctx, int depth);

  // An exact value, small enough to use as a float: a comparison of exact values, floor/ceil of
  // a scaled input, a select, a cast of an exact value to f16 / bf16.
  Gen exact_float(StatementCtx& ctx);

  // --- integer and bool expressions (program_generator_integers.cc) -------------------------
  // An integer or bool expression of any type whose value every backend computes exactly
  // (wrapping arithmetic, x / 0 == 0, shifts by any amount, saturating casts of exact floats).
  Gen int_expr(StatementCtx& ctx, int depth);
  Gen int_leaf(StatementCtx& ctx);
  // A value at or near the limits of an integer type (`~u16(0)`, `i8(1) << 7`, `i32(-8) - 1`).
  Gen edge_value();
  // The integer type `type` with the values [lo, hi] (clamped to the type: when they fall
  // outside it, the operation may have wrapped, so the whole range).
  static Gen typed(std::string text, ir::DType type, double lo, double hi, bool atom);
  // `T(e)`: an integer or bool conversion of an integer, bool or exact float expression.
  static Gen cast(const Gen& e, ir::DType type);
  // The operation's type for two operands (weak literals take the other's type; arithmetic
  // on bool counts in i32); nullopt where typing refuses the pair (u64 with a signed type).
  static std::optional<ir::DType> combined_type(const Gen& a, const Gen& b, bool arithmetic);
  // `a op b` of two integer / bool expressions (+ - * / & | ^ max min, comparisons), typed;
  // a u64 beside a signed type is cast first.
  Gen int_binary(Gen a, const std::string& op, Gen b);
  // Reading an integer tensor: its values' range.
  Gen int_read(StatementCtx& ctx, const GenTensor& t, bool shifted_self);
  // An integer or bool value used inside a float expression: i32 values up to 16 as they are,
  // other small ones through f32(), large ones squashed.
  Gen int_as_float(const Gen& e);

  // An index to use as a value: one that occurs in a subscript (the language's definition of an
  // index); nullptr if there is none yet.
  Index* value_index(StatementCtx& ctx);

  // Squashes a read of a free tensor (finite, even for +-inf).
  Gen squash(const std::string& ref);
  Gen float_leaf(StatementCtx& ctx);
  Gen float_expr(StatementCtx& ctx, int depth);
  // A reduction inside the expression (language version 2) over a fresh index that appears only
  // inside it, of a float input read along it (its other subscripts are target indices of the
  // same size, or 0); now and then with another one nested in its argument (nesting 0).
  Gen inner_reduction(StatementCtx& ctx, int nesting);

  Random rng_;
  bool inner_reductions_ = true;
  int fresh_indices_ = 0;
  std::string prefix_;
  bool allow_main_;
  std::vector<int64_t> dim_pool_;
  std::vector<GenTensor> tensors_;
  std::vector<size_t> row_block_;  // indices into tensors_: the row block's tensors, in order
  bool row_block_done_ = false;
  std::vector<size_t> gather_;  // indices into tensors_: the index tensor, the values, the output
  std::string declarations_;
};

}  // namespace kiln::e2e
