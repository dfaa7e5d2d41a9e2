// The random program generator of the differential test (differential_test.cc): seeded,
// deterministic, valid `.kiln` programs built to avoid values that two correct implementations
// may compute differently beyond rounding. What it writes, and what it avoids, is described at
// the top of differential_test.cc. Declarations and statements are in program_generator.cc, the
// expressions in program_generator_expressions.cc.
#pragma once

#include <cstdint>
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

  bool is_float() const { return dtype != ir::DType::kI32; }
  int rank() const { return static_cast<int>(dims.size()); }
};

// A generated expression.
struct Gen {
  std::string text;
  double bound = 0;      // |value| <= bound; INFINITY when unknown
  bool literal = false;  // made only of literals
  bool atom = true;      // can be an operand without parentheses
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
  // Leaves reductions inside expressions out (each is a kernel of its own, grouped or not):
  // for measuring how much the rest fuses.
  ProgramGenerator& without_inner_reductions() {
    inner_reductions_ = false;
    return *this;
  }

 private:
  // --- randomness ----------------------------------------------------------------------------
  int pick(int n) { return static_cast<int>(rng_.next_u64() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return rng_.uniform() < p; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) { return v[static_cast<size_t>(pick(static_cast<int>(v.size())))]; }

  int64_t dim() { return chance(0.8) ? one_of(dim_pool_) : 1 + pick(7); }

  // --- declarations --------------------------------------------------------------------------
  GenTensor& add(ir::Role role, const std::string& stem, ir::DType dtype, std::vector<int64_t> dims);
  ir::DType float_or_int(double p_f64, double p_i32);
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

  // The gather: an output read through an i32 index tensor compared with a reduced index,
  //   p[a, b] = sum(select(t[a, b] == g, x[g, a, b], 0))
  // t is an input holding -8..8 (some values in range, some not, -1 among them).
  std::string gather_statement();

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
  static Gen atom(std::string text, double bound, bool literal = false);
  static std::string operand(const Gen& g) { return g.atom ? g.text : "(" + g.text + ")"; }
  static Gen binary(const Gen& a, const std::string& op, const Gen& b, double bound);
  static Gen call(const std::string& f, const std::vector<Gen>& args, double bound);

  // Keeps |value| <= limit (limit > 0).
  Gen shape_bound(const Gen& e, double limit);

  // An exact value that is not a literal: a float input (in [-1, 1)), else an i32 input (in
  // [-8, 8]; every program has an input).
  Gen float_input(StatementCtx& ctx);
  Gen nonliteral_float(StatementCtx& ctx) { return float_input(ctx); }
  Gen nonliteral_int(StatementCtx& ctx);
  static Gen negate(const Gen& a);

  // An exact condition (true when non-zero).
  Gen condition(StatementCtx& ctx, int depth);

  // An exact float value: a comparison of exact values, floor/ceil of a scaled input, a select.
  Gen exact_float(StatementCtx& ctx);

  // An i32 expression whose value every backend computes exactly (wrapping arithmetic).
  Gen int_expr(StatementCtx& ctx, int depth);

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
