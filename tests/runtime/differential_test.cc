// Differential testing of the compiler: random valid `.kiln` programs run on the reference
// interpreter (`interp`, with every intermediate stored and no optimization passes:
// LowerOptions::inline_virtual and optimize off) and on the CPU (`cpu`, generated C, default
// lowering with single-use intermediates inlined and the kernels optimized), and every
// output and param must agree within a tolerance (relative 1e-4 plus absolute 1e-5; i32 exactly).
// The reference also runs one kernel per statement (fusion, collapsing of leading dims and local
// arrays off), the CPU the default grouping; the generator writes "row blocks" for fusion to find
// (statements sharing a leading dim, intermediates read row by row, small rows).
//
// The generator is seeded and deterministic: program number N of a run uses seed
// KILN_DIFF_SEED + N (default base 1), so a failure report's seed reproduces the one program with
//   KILN_DIFF_SEED=<seed> KILN_DIFF_COUNT=1 ./kiln_runtime_test --gtest_filter='DifferentialTest.*'
// KILN_DIFF_COUNT sets how many programs a run checks in all (spread over the shards below).
//
// Programs are valid by construction (1-3 routines of 2-6 statements; tensors of rank 0-3 with
// dims 1-7; f32 mostly, some f64 and i32; elementwise expressions with broadcasting, every
// function, casts, comparisons and select; reductions with every accumulation; compound
// subscripts with `where` bounds; reads of the target at shifted points; intermediates; params
// shared by routines; consts in values, subscripts and bounds). They also avoid values that two
// correct implementations may compute differently beyond rounding:
//  - magnitudes stay bounded: a float tensor is either "bounded" (every write keeps it within
//    [-2, 2], so reads use it as is) or "free" (any size, even +-inf from an empty max/min; every
//    read squashes it through tanh or sigmoid);
//  - discontinuous operations (floor, ceil, comparisons, select's condition, casts to i32, and
//    the conversion on assignment to an i32 target) only see exact values: inputs, literals,
//    index values, i32 arithmetic (which wraps identically everywhere);
//  - division only by (1 + x * x), log only of abs(x) + 1, pow only of a base in (0.5, 1.5).
// Several programs are concatenated into one file (names prefixed pN_) so that one C compiler run
// builds a whole batch; each program is also parsed on its own first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/base/env.h"
#include "kiln/base/time.h"
#include "kiln/ir/lower.h"
#include "kiln/lang/parser.h"
#include "runtime/e2e_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_E2E_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_E2E_SANITIZED 1
#endif
#endif

namespace kiln::e2e {
namespace {

using ir::DType;
using ir::Role;

// ---------------------------------------------------------------------------------------------
// The generator.

struct GenTensor {
  std::string name;
  Role role = Role::kTensor;
  DType dtype = DType::kF32;
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
  int small_adds = 0;       // += / -= statements on a bounded tensor (each adds at most 0.125)
  double value = 0;         // a const's value
  std::string init;         // the declaration's initializer, "" for none

  bool is_float() const { return dtype != DType::kI32; }
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

  std::string generate() {
    declare();
    const int routines = 1 + pick(3);
    std::string body;
    for (int r = 0; r < routines; ++r) {
      const bool top_level = chance(0.4) && r == 0 && allow_main_;
      std::string name = prefix_ + "r" + std::to_string(r);
      if (!top_level) body += "\nroutine " + name + " {\n";
      else body += "\n# statements outside a routine: the routine main\n";
      const int statements = 2 + pick(5);
      const std::string indent = top_level ? "" : "  ";
      if (!row_block_.empty() && !row_block_done_ && chance(0.6)) {
        // The row block: each row tensor from the earlier ones, then an output from the last.
        row_block_done_ = true;
        const GenTensor* previous = nullptr;
        for (size_t t : row_block_) {
          GenTensor& target = tensors_[t];
          body += indent + statement(&target, previous, true) + "\n";
          if (target.role == Role::kTensor) previous = &target;
        }
      }
      for (int s = 0; s < statements; ++s) {
        GenTensor* pipe = nullptr;
        for (GenTensor& t : tensors_) {
          if (t.pipe && !t.written && !pipe) pipe = &t;
        }
        if (pipe && chance(0.35)) {
          // An intermediate made for one reader.
          body += indent + statement(pipe) + "\n";
          body += indent + statement(nullptr, pipe) + "\n";
          if (chance(0.3)) pipe->pipe_open = true;
          ++s;
          continue;
        }
        body += indent + statement() + "\n";
      }
      if (!top_level) body += "}\n";
    }
    return declarations_ + body;
  }

 private:
  // --- randomness ----------------------------------------------------------------------------
  int pick(int n) { return static_cast<int>(rng_.next_u64() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return rng_.uniform() < p; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) { return v[static_cast<size_t>(pick(static_cast<int>(v.size())))]; }

  int64_t dim() { return chance(0.8) ? one_of(dim_pool_) : 1 + pick(7); }

  // --- declarations --------------------------------------------------------------------------
  GenTensor& add(Role role, const std::string& stem, DType dtype, std::vector<int64_t> dims) {
    GenTensor t;
    t.name = prefix_ + stem + std::to_string(tensors_.size());
    t.role = role;
    t.dtype = dtype;
    t.dims = std::move(dims);
    t.bounded = role == Role::kInput || role == Role::kConst || chance(0.5);
    t.written = false;
    tensors_.push_back(std::move(t));
    return tensors_.back();
  }

  DType float_or_int(double p_f64, double p_i32) {
    double u = rng_.uniform();
    return u < p_i32 ? DType::kI32 : u < p_i32 + p_f64 ? DType::kF64 : DType::kF32;
  }

  std::vector<int64_t> shape() {
    int rank = pick(10);
    rank = rank < 1 ? 0 : rank < 4 ? 1 : rank < 8 ? 2 : 3;
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(dim());
    return dims;
  }

  static std::string dims_text(const std::vector<int64_t>& dims, bool bare_scalar) {
    if (dims.empty()) return bare_scalar ? "" : "[]";
    std::string out = "[";
    for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
    return out + "]";
  }

  void declare() {
    const int pool = 2 + pick(2);
    for (int i = 0; i < pool; ++i) dim_pool_.push_back(1 + pick(7));
    tensors_.reserve(32);  // references into tensors_ stay valid

    const int inputs = 1 + pick(4), params = pick(4), outputs = 1 + pick(3), temps = pick(4);
    for (int i = 0; i < inputs; ++i) add(Role::kInput, "x", float_or_int(0.15, 0.15), shape());
    for (int i = 0; i < params; ++i) {
      GenTensor& p = add(Role::kParam, "w", float_or_int(0.15, 0.15), shape());
      p.init = initializer(p);
    }
    for (int i = 0; i < outputs; ++i) add(Role::kOutput, "y", float_or_int(0.1, 0.15), shape());
    for (int i = 0; i < temps; ++i) {
      GenTensor& t = add(Role::kTensor, "t", float_or_int(0.1, 0.15), shape());
      if (chance(0.2)) t.init = initializer(t);
    }
    for (int i = pick(3); i > 0; --i) {
      GenTensor& t = add(Role::kTensor, "v", chance(0.85) ? DType::kF32 : DType::kF64, shape());
      t.pipe = true;
      t.bounded = true;
    }
    if (chance(0.6)) {
      // The row block: 2-4 intermediates and an output sharing dimension 0.
      const int64_t rows = one_of(dim_pool_);
      const int count = 2 + pick(3);
      for (int i = 0; i <= count; ++i) {
        std::vector<int64_t> dims = {rows};
        for (int d = pick(3); d > 0; --d) dims.push_back(dim());
        const bool last = i == count;
        GenTensor& t = add(last ? Role::kOutput : Role::kTensor, last ? "z" : "r",
                           chance(0.9) ? DType::kF32 : DType::kF64, std::move(dims));
        t.row = true;
        t.bounded = true;
        row_block_.push_back(tensors_.size() - 1);
      }
    }
    // Consts: an integer one (for subscripts and bounds), a float scalar, a filled tensor.
    if (chance(0.5)) {
      GenTensor& c = add(Role::kConst, "n", DType::kI32, {});
      c.value = 1 + pick(3);
      c.init = std::to_string(static_cast<int>(c.value));
    }
    if (chance(0.4)) {
      GenTensor& c = add(Role::kConst, "c", chance(0.8) ? DType::kF32 : DType::kF64, {});
      c.value = one_of(std::vector<double>{0.5, 0.25, 1.5, -0.75});
      c.init = format_number(c.value);
    }
    if (chance(0.3)) {
      GenTensor& c = add(Role::kConst, "k", DType::kF32, shape());
      c.value = one_of(std::vector<double>{0.5, 2, -1});
      c.init = format_number(c.value);
    }

    for (const GenTensor& t : tensors_) {
      std::string line = std::string(ir::role_name(t.role));
      line += std::string(line.size() < 6 ? 7 - line.size() : 1, ' ');
      line += t.name + " : " + std::string(ir::dtype_name(t.dtype)) + dims_text(t.dims, chance(0.5));
      if (!t.init.empty()) line += " = " + t.init;
      if (chance(0.1)) line += "  # " + std::string(t.bounded ? "bounded" : "free");
      declarations_ += line + "\n";
    }
  }

  static std::string format_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }

  // Initial values within [-1, 1] (bounded tensors stay within [-2, 2] after their writes).
  std::string initializer(const GenTensor& t) {
    if (t.dtype == DType::kI32) {
      switch (pick(3)) {
        case 0: return std::to_string(pick(5) - 2);
        case 1: return "uniform(-3, 4)";
        default: return "normal(0, 2)";
      }
    }
    switch (pick(4)) {
      case 0: return one_of(std::vector<std::string>{"0", "1", "0.5", "-0.25", "1e-1"});
      case 1: return "uniform(-1, 1)";
      case 2: return "uniform(0, 0.5)";
      default: return "normal(0, 0.2)";
    }
  }

  // --- statements ----------------------------------------------------------------------------
  GenTensor& choose_target() {
    std::vector<std::pair<int, size_t>> weighted;
    int total = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const GenTensor& t = tensors_[i];
      int w = 0;
      if (t.pipe || t.row) continue;
      if (t.role == Role::kOutput) w = t.written ? 1 : 4;
      if (t.role == Role::kParam) w = 2;
      if (t.role == Role::kTensor) w = t.written ? 2 : 3;
      if (w) weighted.push_back({w, i}), total += w;
    }
    int r = pick(total);
    for (auto [w, i] : weighted) {
      if (r < w) return tensors_[i];
      r -= w;
    }
    return tensors_[weighted.back().second];
  }

  // A statement; `pipe_target`: an elementwise `=` to that tensor; `must_read`: a statement with
  // a float target whose right side reads that tensor.
  // `row_target`: a statement of the row block writing that tensor (mostly with `=`).
  std::string statement(GenTensor* pipe_target = nullptr, const GenTensor* must_read = nullptr,
                        bool row_block = false) {
    GenTensor* row_target = row_block ? pipe_target : nullptr;
    if (row_block) pipe_target = nullptr;
    GenTensor* chosen = row_target ? row_target : pipe_target ? pipe_target : &choose_target();
    for (int tries = 0; must_read && !chosen->is_float() && tries < 20; ++tries) chosen = &choose_target();
    GenTensor& target = *chosen;
    StatementCtx ctx;
    ctx.target = &target;
    ctx.row_mode = row_block;
    if (target.is_float()) ctx.must_read = must_read;
    // Index names: target indices first, then candidates for reduced indices.
    std::vector<std::string> names = {"i", "j", "k", "l", "m", "n", "ky", "kx", "co"};
    for (size_t i = names.size(); i > 1; --i) std::swap(names[i - 1], names[static_cast<size_t>(pick(static_cast<int>(i)))]);
    size_t next_name = 0;
    for (int64_t d : target.dims) ctx.indices.push_back({names[next_name++], d, true, true, true, true});

    // Accumulation and reduction.
    const bool is_float = target.is_float();
    ir::Accum accum = ir::Accum::kAssign;
    {
      int a = pick(20);
      accum = a < 11 ? ir::Accum::kAssign : a < 15 ? ir::Accum::kAdd : a < 17 ? ir::Accum::kSub : ir::Accum::kMul;
    }
    if (is_float && target.bounded && (accum == ir::Accum::kAdd || accum == ir::Accum::kSub) &&
        target.small_adds >= 4) {
      accum = ir::Accum::kAssign;
    }
    if (is_float && target.may_inf && accum == ir::Accum::kMul) accum = ir::Accum::kAdd;

    if (pipe_target || (row_target && chance(0.85))) accum = ir::Accum::kAssign;
    ir::Reduce reduce = ir::Reduce::kNone;
    if (!pipe_target && chance(0.45)) {
      std::vector<ir::Reduce> allowed = {ir::Reduce::kSum, ir::Reduce::kProd, ir::Reduce::kMax,
                                         ir::Reduce::kMin, ir::Reduce::kMean};
      if (is_float && (target.bounded || accum == ir::Accum::kMul)) {
        allowed = {ir::Reduce::kProd, ir::Reduce::kMax, ir::Reduce::kMin, ir::Reduce::kMean};
      }
      reduce = one_of(allowed);
      // Reduced-index candidates; their extents multiply to at most 7^3.
      const int count = pick(10) < 1 ? 0 : pick(10) < 7 ? 1 : pick(10) < 8 ? 2 : 3;
      for (int c = 0; c < count; ++c) ctx.indices.push_back({names[next_name++], dim(), false, false, false, false});
      ctx.reduction = true;
      // An empty max / min (every point out of range) gives -inf / +inf: keep that out of
      // bounded targets and of products.
      ctx.no_compound = (reduce == ir::Reduce::kMax || reduce == ir::Reduce::kMin) &&
                        (!is_float || target.bounded || accum == ir::Accum::kMul || chance(0.3));
      if (!is_float) ctx.no_compound = ctx.no_compound && chance(0.5);
    }

    // The right side.
    std::string rhs;
    if (!is_float) {
      Gen e = chance(0.15) && reduce == ir::Reduce::kNone ? exact_float(ctx) : int_expr(ctx, 3);
      if (reduce != ir::Reduce::kNone && e.literal) e = binary(e, "*", nonliteral_int(ctx), INFINITY);
      rhs = e.text;
    } else {
      double limit = 8;  // bound of the right side (of the reduced expression for a reduction)
      bool bounded = target.bounded;
      if (bounded) limit = accum == ir::Accum::kAssign || accum == ir::Accum::kMul ? 1 : 0.125;
      else if (accum == ir::Accum::kMul) limit = 2;
      if (reduce == ir::Reduce::kSum || reduce == ir::Reduce::kMean) limit = std::min(limit, 2.0);
      if (reduce == ir::Reduce::kProd) limit = std::min(limit, 1.0);
      Gen e = float_expr(ctx, 3);
      if (reduce != ir::Reduce::kNone && e.literal) e = binary(e, "*", nonliteral_float(ctx), e.bound * 8);
      e = shape_bound(e, limit);
      rhs = e.text;
      if (bounded && (accum == ir::Accum::kAdd || accum == ir::Accum::kSub)) ++target.small_adds;
    }
    if (reduce != ir::Reduce::kNone) {
      rhs = std::string(ir::reduce_name(reduce)) + "(" + rhs + ")";
      if ((reduce == ir::Reduce::kMax || reduce == ir::Reduce::kMin) && ctx.any_compound &&
          target.is_float()) {
        target.may_inf = true;  // (only free targets get here)
      }
    }

    // The statement.
    std::string text = target.name;
    if (target.rank() > 0) {
      text += "[";
      for (int d = 0; d < target.rank(); ++d) text += (d ? ", " : "") + ctx.indices[static_cast<size_t>(d)].name;
      text += "]";
    }
    text += " " + std::string(ir::accum_name(accum)) + " " + rhs;
    std::vector<std::string> bounds;
    for (const Index& index : ctx.indices) {
      if (!index.used) continue;
      if (!index.bare || (chance(0.1) && index.extent > 0)) {
        // An integer const of the same value may stand for the bound.
        std::string limit = std::to_string(index.extent);
        for (const GenTensor& t : tensors_) {
          if (t.role == Role::kConst && t.dtype == DType::kI32 && t.value == double(index.extent) && chance(0.5)) {
            limit = t.name;
          }
        }
        bounds.push_back(index.name + " < " + limit);
      }
    }
    if (!bounds.empty()) {
      text += " where ";
      for (size_t b = 0; b < bounds.size(); ++b) text += (b ? ", " : "") + bounds[b];
    }
    target.written = true;
    return text;
  }

  // --- subscripts ----------------------------------------------------------------------------
  std::vector<size_t> usable_indices(const StatementCtx& ctx) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < ctx.indices.size(); ++i) out.push_back(i);
    return out;
  }

  std::string term(StatementCtx& ctx, size_t i, int64_t coefficient) {
    ctx.indices[i].used = true;
    ctx.indices[i].in_subscript = true;
    const std::string& name = ctx.indices[i].name;
    if (coefficient == 1) return name;
    return chance(0.8) ? std::to_string(coefficient) + "*" + name : name + "*" + std::to_string(coefficient);
  }

  static std::string plus_offset(std::string text, int64_t offset) {
    if (offset > 0) return text + " + " + std::to_string(offset);
    if (offset < 0) return text + " - " + std::to_string(-offset);
    return text;
  }

  const GenTensor* int_const() {
    std::vector<const GenTensor*> consts;
    for (const GenTensor& t : tensors_) {
      if (t.role == Role::kConst && t.dtype == DType::kI32) consts.push_back(&t);
    }
    return consts.empty() ? nullptr : one_of(consts);
  }

  // One subscript for a dimension of size `size`. `shift_of` >= 0: a read of the target at a
  // point shifted from its own (the target index of that dimension plus a small offset).
  std::string subscript(StatementCtx& ctx, int64_t size, int shift_of) {
    if (shift_of >= 0) {
      const int64_t offset = ctx.no_compound ? 0 : pick(4) - 1;  // -1 .. 2
      if (offset != 0) ctx.any_compound = true;
      if (offset == 0) ctx.indices[static_cast<size_t>(shift_of)].bare = true;
      return plus_offset(term(ctx, static_cast<size_t>(shift_of), 1), offset);
    }
    std::vector<size_t> bare, all = usable_indices(ctx);
    for (size_t i : all) {
      if (ctx.indices[i].extent == size) bare.push_back(i);
    }
    // Prefer an unused reduced index (so that reductions reduce), then any bare candidate.
    for (size_t i : bare) {
      if (!ctx.indices[i].target && !ctx.indices[i].used && chance(0.7)) {
        ctx.indices[i].bare = true;
        return term(ctx, i, 1);
      }
    }
    if (!bare.empty() && (ctx.no_compound || chance(0.65))) {
      size_t i = one_of(bare);
      ctx.indices[i].bare = true;
      return term(ctx, i, 1);
    }
    if (all.empty() || ctx.no_compound || chance(0.1)) {
      return std::to_string(pick(static_cast<int>(size)));  // a literal in range
    }
    ctx.any_compound = true;
    const size_t a = one_of(all), b = one_of(all);
    switch (pick(7)) {
      case 0: return plus_offset(term(ctx, a, 1), one_of(std::vector<int64_t>{-2, -1, 1, 2}));
      case 1: return plus_offset(term(ctx, a, 2) + " + " + term(ctx, b, 1), -1);  // 2*i + k - 1
      case 2: return term(ctx, a, 1) + " + " + term(ctx, b, 1);
      case 3: return std::to_string(pick(static_cast<int>(size) + 1)) + " - " + term(ctx, a, 1);
      case 4: {
        const GenTensor* c = int_const();
        if (c) return term(ctx, a, 1) + (chance(0.5) ? " + " : " - ") + c->name;
        return plus_offset(term(ctx, a, 1), 1);
      }
      case 5: return term(ctx, a, 2);
      default: return plus_offset(term(ctx, a, 1) + " + " + term(ctx, b, 1), -1 - pick(2));
    }
  }

  std::string reference(StatementCtx& ctx, const GenTensor& t, bool shifted_self) {
    if (t.rank() == 0) return t.name;
    std::string out = t.name + "[";
    // In the row block, a row tensor is read in the statement's own row.
    const bool in_row = ctx.row_mode && t.row && !shifted_self && ctx.target->rank() > 0 &&
                        t.dims[0] == ctx.target->dims[0];
    for (int d = 0; d < t.rank(); ++d) {
      if (d == 0 && in_row) {
        ctx.indices[0].bare = true;
        out += term(ctx, 0, 1);
        continue;
      }
      out += (d ? ", " : "") + subscript(ctx, t.dims[static_cast<size_t>(d)], shifted_self ? d : -1);
    }
    return out + "]";
  }

  // Tensors a statement may read: inputs, consts, params, outputs, intermediates already
  // written (in file order) and the target itself.
  std::vector<const GenTensor*> readable(const StatementCtx& ctx, bool want_float, bool exact_only) const {
    std::vector<const GenTensor*> out;
    for (const GenTensor& t : tensors_) {
      if (t.is_float() != want_float) continue;
      if (t.role == Role::kConst && t.dtype == DType::kI32) continue;  // used in subscripts
      if (t.role == Role::kTensor && !t.written && &t != ctx.target) continue;
      if (t.pipe && !t.pipe_open) continue;
      if (ctx.row_mode && &t == ctx.target && t.row) continue;  // would need a snapshot
      if (exact_only && t.is_float() && t.role != Role::kInput && t.role != Role::kConst) continue;
      out.push_back(&t);
    }
    return out;
  }

  // --- expressions ---------------------------------------------------------------------------
  static Gen atom(std::string text, double bound, bool literal = false) {
    return Gen{std::move(text), bound, literal, true};
  }
  static std::string operand(const Gen& g) { return g.atom ? g.text : "(" + g.text + ")"; }
  static Gen binary(const Gen& a, const std::string& op, const Gen& b, double bound) {
    return Gen{operand(a) + " " + op + " " + operand(b), bound, a.literal && b.literal, false};
  }
  static Gen call(const std::string& f, const std::vector<Gen>& args, double bound) {
    std::string text = f + "(";
    bool literal = true;
    for (size_t i = 0; i < args.size(); ++i) {
      text += (i ? ", " : "") + args[i].text;
      literal = literal && args[i].literal;
    }
    return Gen{text + ")", bound, literal, true};
  }

  // Keeps |value| <= limit (limit > 0).
  Gen shape_bound(const Gen& e, double limit) {
    if (e.bound <= limit) return e;
    Gen squashed = call(chance(0.8) ? "tanh" : "sin", {e}, 1);
    if (limit >= 1) return squashed;
    return binary(atom(format_number(limit), limit, true), "*", squashed, limit);
  }

  // An exact value that is not a literal: a float input (in [-1, 1)), else an i32 input (in
  // [-8, 8]; every program has an input).
  Gen float_input(StatementCtx& ctx) {
    std::vector<const GenTensor*> floats, ints;
    for (const GenTensor& t : tensors_) {
      if (t.role == Role::kInput) (t.is_float() ? floats : ints).push_back(&t);
    }
    if (!floats.empty()) return atom(reference(ctx, *one_of(floats), false), 1);
    return atom(reference(ctx, *one_of(ints), false), 8);
  }
  Gen nonliteral_float(StatementCtx& ctx) { return float_input(ctx); }
  Gen nonliteral_int(StatementCtx& ctx) {
    for (const GenTensor& t : tensors_) {
      if (t.role == Role::kInput && !t.is_float()) return atom(reference(ctx, t, false), 8);
    }
    return call("i32", {call("floor", {binary(float_input(ctx), "*", atom("4", 4, true), 4)}, 4)}, 4);
  }
  static Gen negate(const Gen& a) {
    std::string inner = operand(a);
    if (!inner.empty() && inner[0] == '-') inner = "(" + inner + ")";
    return Gen{"-" + inner, a.bound, a.literal, false};
  }

  // An exact condition (true when non-zero).
  Gen condition(StatementCtx& ctx, int depth) {
    static const std::vector<std::string> cmp = {"<", "<=", ">", ">=", "==", "!="};
    switch (pick(4)) {
      case 0: {
        Gen a = int_expr(ctx, depth), b = int_expr(ctx, depth);
        return binary(a, one_of(cmp), b, 1);
      }
      case 1: {
        Gen x = float_input(ctx);
        return binary(x, one_of(cmp), atom(one_of(std::vector<std::string>{"0", "0.25", "-0.5"}), 1, true), 1);
      }
      case 2: return binary(float_input(ctx), one_of(cmp), float_input(ctx), 1);
      default: return int_expr(ctx, depth);
    }
  }

  // An exact float value: a comparison of exact values, floor/ceil of a scaled input, a select.
  Gen exact_float(StatementCtx& ctx) {
    switch (pick(3)) {
      case 0: return condition(ctx, 1);
      case 1: {
        Gen x = float_input(ctx);
        Gen scaled = binary(x, "*", atom(one_of(std::vector<std::string>{"2", "4", "8", "0.5"}), 8, true), 8 * x.bound);
        return call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
      }
      default: {
        Gen x = float_input(ctx);
        return call("select", {condition(ctx, 1), x, atom("0.5", 0.5, true)}, 1);
      }
    }
  }

  // An i32 expression whose value every backend computes exactly (wrapping arithmetic).
  Gen int_expr(StatementCtx& ctx, int depth) {
    if (depth <= 0 || chance(0.35)) {
      std::vector<const GenTensor*> ints = readable(ctx, false, true);
      switch (pick(6)) {
        case 0:
        case 1:
          if (!ints.empty()) {
            const GenTensor& t = *one_of(ints);
            const bool self = &t == ctx.target && chance(0.5);
            return atom(reference(ctx, t, self), t.role == Role::kInput ? 8 : INFINITY);
          }
          [[fallthrough]];
        case 2: return atom(std::to_string(pick(6)), 5, true);
        case 3:
          if (Index* index = value_index(ctx)) return atom(index->name, double(index->extent));
          return atom("3", 3, true);
        case 4: {
          Gen x = float_input(ctx);
          Gen scaled = binary(x, "*", atom(one_of(std::vector<std::string>{"2", "4", "8"}), 8, true), 8 * x.bound);
          if (chance(0.5)) scaled = call(chance(0.5) ? "floor" : "ceil", {scaled}, 8 * x.bound + 1);
          return call("i32", {scaled}, 8 * x.bound + 1);
        }
        default: return call("i32", {condition(ctx, 0)}, 1);
      }
    }
    Gen a = int_expr(ctx, depth - 1);
    auto second = [&] {
      Gen b = int_expr(ctx, depth - 1);
      for (int tries = 0; a.literal && b.literal && tries < 8; ++tries) b = int_expr(ctx, depth - 1);
      if (a.literal && b.literal) b = nonliteral_int(ctx);
      return b;
    };
    switch (pick(12)) {
      case 0: { Gen b = second(); return binary(a, "+", b, a.bound + b.bound); }
      case 1: { Gen b = second(); return binary(a, "-", b, a.bound + b.bound); }
      case 2: { Gen b = second(); return binary(a, "*", b, a.bound * b.bound); }
      case 3: { Gen b = second(); return binary(a, "/", b, a.bound); }
      case 4: return negate(a);
      case 5: return call("abs", {a}, a.bound);
      case 6: return call("relu", {a}, a.bound);
      case 7: { Gen b = second(); return call(chance(0.5) ? "max" : "min", {a, b}, std::max(a.bound, b.bound)); }
      case 8: { Gen b = second(); return call("select", {condition(ctx, depth - 1), a, b}, std::max(a.bound, b.bound)); }
      case 9: { Gen b = second(); return binary(a, one_of(std::vector<std::string>{"<", ">=", "!="}), b, 1); }
      case 10: return call("pow", {a, atom("2", 2, true)}, a.bound * a.bound);
      default: return call(chance(0.5) ? "floor" : "ceil", {a}, a.bound);
    }
  }

  // An index to use as a value: one that occurs in a subscript (the language's definition of an
  // index); nullptr if there is none yet.
  Index* value_index(StatementCtx& ctx) {
    std::vector<Index*> candidates;
    for (Index& index : ctx.indices) {
      if (index.in_subscript) candidates.push_back(&index);
    }
    if (candidates.empty()) return nullptr;
    return one_of(candidates);
  }

  // Squashes a read of a free tensor (finite, even for +-inf).
  Gen squash(const std::string& ref) {
    switch (pick(3)) {
      case 0: return call("tanh", {atom(ref, INFINITY)}, 1);
      case 1: return call("sigmoid", {atom(ref, INFINITY)}, 1);
      default: return call("tanh", {binary(atom(ref, INFINITY), "*", atom("0.5", 0.5, true), INFINITY)}, 1);
    }
  }

  Gen float_leaf(StatementCtx& ctx) {
    if (const GenTensor* t = ctx.must_read) {
      ctx.must_read = nullptr;
      return atom(reference(ctx, *t, false), 2);
    }
    std::vector<const GenTensor*> floats = readable(ctx, true, false);
    const int kind = pick(12);
    if (kind < 6 && !floats.empty()) {
      // Prefer the target itself now and then (a read at a shifted point).
      const GenTensor* t = one_of(floats);
      if (ctx.target->is_float() && chance(0.15)) t = ctx.target;
      const bool self = t == ctx.target && chance(0.7);
      std::string ref = reference(ctx, *t, self);
      if (t->role == Role::kConst) return atom(ref, std::fabs(t->value));
      if (t->role == Role::kInput) return atom(ref, 1);
      if (t->bounded) return atom(ref, 2);
      return squash(ref);
    }
    switch (kind) {
      case 6:
      case 7: {
        static const std::vector<std::pair<std::string, double>> literals = {
            {"0.5", 0.5}, {"0.25", 0.25}, {"1.5", 1.5}, {"2", 2}, {"3", 3}, {"0.75", 0.75},
            {"1e-1", 0.1}, {"2.5E-1", 0.25}, {"1.0", 1}, {"0.125", 0.125}};
        auto [text, bound] = one_of(literals);
        return atom(text, bound, true);
      }
      case 8:
        if (Index* index = value_index(ctx)) {
          if (chance(0.5)) return atom(index->name, double(index->extent));
          return binary(call("f32", {atom(index->name, double(index->extent))}, double(index->extent)), "*",
                        atom("0.25", 0.25, true), double(index->extent) * 0.25);
        }
        return atom("0.5", 0.5, true);
      case 9: {
        Gen e = int_expr(ctx, 2);
        if (e.bound <= 16) return e;
        return call("tanh", {binary(call("f32", {e}, INFINITY), "*", atom("0.125", 0.125, true), INFINITY)}, 1);
      }
      case 10: {
        // Non-input i32 tensors: squashed.
        std::vector<const GenTensor*> ints = readable(ctx, false, false);
        if (!ints.empty()) {
          const GenTensor& t = *one_of(ints);
          std::string ref = reference(ctx, t, false);
          if (t.role == Role::kInput) return atom(ref, 8);
          return call("tanh", {binary(call("f32", {atom(ref, INFINITY)}, INFINITY), "*", atom("0.125", 0.125, true), INFINITY)}, 1);
        }
        return float_input(ctx);
      }
      default: {
        Gen e = exact_float(ctx);
        return e;
      }
    }
  }

  Gen float_expr(StatementCtx& ctx, int depth) {
    if (depth <= 0 || chance(0.3)) return float_leaf(ctx);
    Gen a = float_expr(ctx, depth - 1);
    auto second = [&] {
      Gen b = float_expr(ctx, depth - 1);
      for (int tries = 0; a.literal && b.literal && tries < 8; ++tries) b = float_leaf(ctx);
      if (a.literal && b.literal) b = nonliteral_float(ctx);
      return b;
    };
    Gen out;
    switch (pick(26)) {
      case 0: case 1: { Gen b = second(); out = binary(a, "+", b, a.bound + b.bound); break; }
      case 2: case 3: { Gen b = second(); out = binary(a, "-", b, a.bound + b.bound); break; }
      case 4: case 5: { Gen b = second(); out = binary(a, "*", b, a.bound * b.bound); break; }
      case 6: {
        Gen b = shape_bound(second(), 4);
        Gen denominator = binary(atom("1", 1, true), "+", binary(b, "*", b, 16), 17);
        out = binary(a, "/", denominator, a.bound);
        break;
      }
      case 7: out = negate(a); break;
      case 8: {
        Gen x = a.bound <= 3 ? a : call("tanh", {a}, 1);
        out = call("exp", {x}, std::exp(x.bound));
        break;
      }
      case 9: {
        Gen inner = binary(call("abs", {a}, a.bound), "+", atom("1", 1, true), a.bound + 1);
        out = call("log", {inner}, std::log(a.bound + 1) + 1e-9);
        break;
      }
      case 10: out = call("sqrt", {call("abs", {a}, a.bound)}, std::sqrt(a.bound) + 1e-9); break;
      case 11: {
        Gen inner = binary(call("abs", {a}, a.bound), "+", atom("1", 1, true), a.bound + 1);
        out = call("rsqrt", {inner}, 1);
        break;
      }
      case 12: out = call("tanh", {a}, 1); break;
      case 13: out = call("sigmoid", {a}, 1); break;
      case 14: out = call("relu", {a}, a.bound); break;
      case 15: out = call("abs", {a}, a.bound); break;
      case 16: out = call("sin", {a}, 1); break;
      case 17: out = call("cos", {a}, 1); break;
      case 18: { Gen b = second(); out = call(chance(0.5) ? "max" : "min", {a, b}, std::max(a.bound, b.bound)); break; }
      case 19: {
        Gen base = binary(call("sigmoid", {a}, 1), "+", atom("0.5", 0.5, true), 1.5);
        Gen exponent = shape_bound(second(), 2);
        out = call("pow", {base, exponent}, 4);
        break;
      }
      case 20: { Gen b = second(); out = call("select", {condition(ctx, 1), a, b}, std::max(a.bound, b.bound)); break; }
      case 21: out = call(chance(0.5) ? "f64" : "f32", {a}, a.bound); break;
      case 22: out = binary(a, "*", exact_float(ctx), a.bound * 9); break;
      case 23: {
        // floor / ceil of an exact value, scaled back.
        Gen x = float_input(ctx);
        Gen scaled = binary(x, "*", atom("4", 4, true), 4 * x.bound);
        Gen f = call(chance(0.5) ? "floor" : "ceil", {scaled}, 4 * x.bound + 1);
        out = binary(a, "+", binary(f, "*", atom("0.25", 0.25, true), x.bound + 1), a.bound + x.bound + 1);
        break;
      }
      default: {
        // Precedence: A * B + C without parentheses around the product.
        Gen b = second(), c = float_expr(ctx, depth - 1);
        if (c.literal) c = nonliteral_float(ctx);
        out = Gen{operand(a) + " * " + operand(b) + " + " + operand(c), a.bound * b.bound + c.bound, false, false};
        break;
      }
    }
    if (out.bound > 8) out = call("tanh", {out}, 1);
    return out;
  }

  Random rng_;
  std::string prefix_;
  bool allow_main_;
  std::vector<int64_t> dim_pool_;
  std::vector<GenTensor> tensors_;
  std::vector<size_t> row_block_;  // indices into tensors_: the row block's tensors, in order
  bool row_block_done_ = false;
  std::string declarations_;
};

// ---------------------------------------------------------------------------------------------
// Running.

struct Settings {
  uint64_t seed = 1;
  uint64_t count = 300;
};

Settings settings() {
  Settings s;
#ifdef KILN_E2E_SANITIZED
  s.count = 90;
#endif
  Result<std::optional<uint64_t>> seed = env_uint("KILN_DIFF_SEED", 0, UINT64_MAX / 2);
  EXPECT_TRUE(seed.ok()) << seed.status();
  if (seed.ok() && seed->has_value()) s.seed = **seed;
  Result<std::optional<uint64_t>> count = env_uint("KILN_DIFF_COUNT", 0, 1000000);
  EXPECT_TRUE(count.ok()) << count.status();
  if (count.ok() && count->has_value()) s.count = **count;
  return s;
}

constexpr int kShards = 4;
constexpr size_t kBatch = 10;

// Whether the program of a seed may put its first routine's statements at the top level.
bool allows_main(uint64_t seed) { return seed % 4 == 0; }

struct Generated {
  uint64_t seed;
  std::string prefix;
  std::string text;
  ir::Program program;  // parsed alone
};

std::string numbered(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  for (int n = 1; std::getline(in, line); ++n) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%4d| ", n);
    out += buf + line + "\n";
  }
  return out;
}

std::string describe(const Generated& g) {
  return "seed " + std::to_string(g.seed) + " (reproduce: KILN_DIFF_SEED=" + std::to_string(g.seed) +
         " KILN_DIFF_COUNT=1 kiln_runtime_test --gtest_filter='*Differential*'), program:\n" + numbered(g.text);
}

struct DeviceRun {
  std::unique_ptr<runtime::ProgramInstance> instance;
  Status status;
};

// Compiles `program` for `device`, writes the inputs of each generated program (random values
// from its seed).
DeviceRun start(const hal::DeviceRef& device, const ir::Program& program,
                const std::vector<const Generated*>& parts, const runtime::ProgramOptions& options) {
  DeviceRun run;
  auto instance = runtime::ProgramInstance::create(device, program, options);
  if (!instance.ok()) {
    run.status = instance.status();
    return run;
  }
  run.instance = std::move(*instance);
  for (const Generated* g : parts) {
    for (const ir::TensorNode& node : g->program.nodes) {
      if (node.role != Role::kInput) continue;
      Status st = write_tensor(*run.instance, node.name, random_tensor(node, g->seed));
      if (!st.ok()) {
        run.status = st.annotate("writing input " + node.name);
        return run;
      }
    }
  }
  return run;
}

class DifferentialTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(cache_.path().empty());
    auto cpu = open_device("cpu", cache_.path());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *cpu;
    auto interp = open_device("interp", cache_.path());
    ASSERT_TRUE(interp.ok()) << interp.status();
    interp_ = *interp;
    // OpenCL too where a platform is present (CPU-hosted PoCL in CI); otherwise cpu only.
    if (drivers::builtin_registry().find("opencl").ok() &&
        (*drivers::builtin_registry().find("opencl"))->availability().ok()) {
      auto opencl = open_device("opencl", cache_.path());
      ASSERT_TRUE(opencl.ok()) << opencl.status();
      opencl_ = *opencl;
    }
  }

  // Runs a batch of generated programs, concatenated, on both devices; returns how many were
  // checked without a failure.
  int run_batch(const std::vector<const Generated*>& parts) {
    std::string text;
    for (const Generated* g : parts) text += "# ---- program seed " + std::to_string(g->seed) + "\n" + g->text + "\n";
    Result<ir::Program> program = lang::parse_program(text, "differential.kiln");
    if (!program.ok()) {
      // Each part parsed alone: a failure here is about the concatenation.
      ADD_FAILURE() << "a batch of programs that each parse alone does not parse: " << program.status()
                    << "\n" << numbered(text);
      return 0;
    }
    // The reference is the interpreter running the plainest lowering (every intermediate
    // stored, no optimization passes); the CPU runs the default one (single-use intermediates
    // inlined, constants folded, invariants hoisted, fma formed).
    runtime::ProgramOptions plain;
    plain.lower.inline_virtual = false;
    plain.lower.fuse = false;
    plain.lower.collapse = false;
    plain.lower.local_arrays = false;
    plain.lower.optimize = false;
    DeviceRun reference = start(interp_, *program, parts, plain);
    DeviceRun cpu = start(cpu_, *program, parts, {});
    DeviceRun opencl;
    if (opencl_ && use_opencl_) opencl = start(opencl_, *program, parts, {});
    if (!reference.status.ok() || !cpu.status.ok() || !opencl.status.ok()) {
      if (parts.size() > 1) {
        // Find the culprit(s) one by one.
        int ok = 0;
        for (const Generated* g : parts) ok += run_batch({g});
        return ok;
      }
      ADD_FAILURE() << "compiling failed: interp: " << reference.status << "; cpu: " << cpu.status
                    << "; opencl: " << opencl.status << "\n" << describe(*parts[0]);
      return 0;
    }
    for (const ir::TensorNode& node : cpu.instance->lowered().program.nodes) {
      if (node.role != Role::kTensor) continue;
      (node.memory == ir::MemoryMode::kVirtual ? stats_.inlined
       : node.memory == ir::MemoryMode::kLocal ? stats_.local
                                               : stats_.stored)++;
    }
    for (const ir::LoweredRoutine& r : reference.instance->lowered().routines) stats_.kernels_plain += static_cast<int64_t>(r.kernels.size());
    for (const ir::LoweredRoutine& r : cpu.instance->lowered().routines) stats_.kernels += static_cast<int64_t>(r.kernels.size());
    std::set<const Generated*> failed;
    for (int pass = 1; pass <= 2; ++pass) {
      for (const ir::Routine& routine : program->routines) {
        Status a = reference.instance->run(routine.name);
        Status b = cpu.instance->run(routine.name);
        if (b.ok() && opencl.instance) b = opencl.instance->run(routine.name).annotate("opencl");
        if (!a.ok() || !b.ok()) {
          const Generated* owner = owner_of(parts, routine.name);
          if (failed.insert(owner).second) {
            ADD_FAILURE() << "running routine " << routine.name << " (pass " << pass << ") failed: interp: " << a
                          << "; cpu: " << b << "\n" << (owner ? describe(*owner) : text);
          }
        }
      }
      for (const Generated* g : parts) {
        if (failed.count(g)) continue;
        for (const ir::TensorNode* node : result_nodes(g->program)) {
          Result<HostTensor> expected = read_tensor(*reference.instance, *node);
          Result<HostTensor> actual = read_tensor(*cpu.instance, *node);
          if (!expected.ok() || !actual.ok()) {
            ADD_FAILURE() << "reading " << node->name << ": " << expected.status() << " / " << actual.status()
                          << "\n" << describe(*g);
            failed.insert(g);
            break;
          }
          if (pass == 2) {
            for (int64_t i = 0; i < expected->size(); ++i) {
              const double v = expected->at(i);
              ++stats_.values;
              stats_.nonzero += v != 0;
              stats_.nonfinite += !std::isfinite(v);
            }
          }
          if (auto diff = first_difference(node->name, *expected, *actual)) {
            ADD_FAILURE() << "cpu differs from interp after pass " << pass << " of the routines: " << *diff
                          << "\n" << describe(*g);
            failed.insert(g);
            break;
          }
          if (opencl.instance) {
            Result<HostTensor> device = read_tensor(*opencl.instance, *node);
            std::optional<std::string> diff =
                device.ok() ? first_difference(node->name, *expected, *device)
                            : std::optional<std::string>(device.status().to_string());
            if (diff) {
              ADD_FAILURE() << "opencl differs from interp after pass " << pass << " of the routines: "
                            << *diff << "\n" << describe(*g);
              failed.insert(g);
              break;
            }
          }
        }
      }
    }
    return static_cast<int>(parts.size() - failed.size());
  }

  static const Generated* owner_of(const std::vector<const Generated*>& parts, const std::string& routine) {
    for (const Generated* g : parts) {
      if (routine.rfind(g->prefix, 0) == 0) return g;
    }
    return parts.empty() ? nullptr : parts[0];  // `main` belongs to the first program
  }

  TempDir cache_;
  hal::DeviceRef cpu_, interp_, opencl_;  // opencl_: null without an OpenCL platform
  // OpenCL builds with LLVM (slow): only the first KILN_DIFF_OPENCL_BATCHES batches of a shard
  // (default 1) also run there.
  int opencl_batches_ = [] {
    Result<std::optional<uint64_t>> n = env_uint("KILN_DIFF_OPENCL_BATCHES", 0, 1000);
    return n.ok() && n->has_value() ? static_cast<int>(**n) : 1;
  }();
  bool use_opencl_ = false;
  struct {
    int64_t values = 0, nonzero = 0, nonfinite = 0, inlined = 0, stored = 0, local = 0;
    int64_t kernels_plain = 0, kernels = 0;
  } stats_;
};

TEST_P(DifferentialTest, RandomProgramsAgreeOnInterpAndCpu) {
  const Settings s = settings();
  const int shard = GetParam();
  const int64_t start_ns = now_ns();
  // Programs with top-level statements (routine `main`) go first in a batch, one per batch.
  std::vector<Generated> mains, others;
  for (uint64_t n = static_cast<uint64_t>(shard); n < s.count; n += kShards) {
    Generated g;
    g.seed = s.seed + n;
    g.prefix = "s" + std::to_string(g.seed) + "_";
    g.text = ProgramGenerator(g.seed, g.prefix, allows_main(g.seed)).generate();
    if (env_string("KILN_DIFF_PRINT")) std::printf("# seed %llu\n%s\n", static_cast<unsigned long long>(g.seed), g.text.c_str());
    Result<ir::Program> parsed = lang::parse_program(g.text, "seed" + std::to_string(g.seed) + ".kiln");
    if (!parsed.ok()) {
      ADD_FAILURE() << "a generated program does not parse: " << parsed.status() << "\n" << describe(g);
      continue;
    }
    g.program = std::move(*parsed);
    (g.program.find_routine("main") ? mains : others).push_back(std::move(g));
  }
  const size_t total = mains.size() + others.size();
  size_t next_main = 0, next_other = 0;
  int checked = 0;
  while (next_main < mains.size() || next_other < others.size()) {
    std::vector<const Generated*> batch;
    if (next_main < mains.size()) batch.push_back(&mains[next_main++]);
    while (batch.size() < kBatch && next_other < others.size()) batch.push_back(&others[next_other++]);
    use_opencl_ = opencl_batches_-- > 0;
    checked += run_batch(batch);
  }
  std::printf("shard %d: %d of %zu generated programs agree (seeds %llu + n, n = %d mod %d), %.1f s; "
              "%lld values compared, %lld non-zero, %lld not finite; intermediates: %lld inlined, %lld local, "
              "%lld stored; kernels: %lld one per statement, %lld grouped\n",
              shard, checked, total, static_cast<unsigned long long>(s.seed), shard, kShards,
              double(now_ns() - start_ns) / 1e9, static_cast<long long>(stats_.values),
              static_cast<long long>(stats_.nonzero), static_cast<long long>(stats_.nonfinite),
              static_cast<long long>(stats_.inlined), static_cast<long long>(stats_.local),
              static_cast<long long>(stats_.stored), static_cast<long long>(stats_.kernels_plain),
              static_cast<long long>(stats_.kernels));
}

INSTANTIATE_TEST_SUITE_P(Shards, DifferentialTest, ::testing::Range(0, kShards));

// The generator itself: deterministic, and it produces what it promises.
TEST(DifferentialGeneratorTest, IsDeterministicAndVaried) {
  EXPECT_EQ(ProgramGenerator(7, "p_", true).generate(), ProgramGenerator(7, "p_", true).generate());
  EXPECT_NE(ProgramGenerator(7, "p_", true).generate(), ProgramGenerator(8, "p_", true).generate());
  std::string all;
  for (uint64_t seed = 0; seed < 200; ++seed) all += ProgramGenerator(seed, "p_", true).generate();
  for (const char* feature : {"sum(", "prod(", "max(", "min(", "mean(", " += ", " -= ", " *= ", " where ",
                              "routine ", "param ", "tensor ", "const ", ": i32", ": f64", "2*", "exp(",
                              "log(", "sqrt(", "rsqrt(", "tanh(", "sigmoid(", "relu(", "abs(", "sin(",
                              "cos(", "floor(", "ceil(", "pow(", "select(", "f32(", "f64(", "i32(",
                              " < ", " <= ", " > ", " >= ", " == ", " != ", " / ", "uniform(", "normal("}) {
    EXPECT_NE(all.find(feature), std::string::npos) << "no generated program uses '" << feature << "'";
  }
}

// The row blocks give lowering something to fuse and to keep in local arrays.
TEST(DifferentialGeneratorTest, RowBlocksGiveFusionAndLocalArrays) {
  int64_t locals = 0, kernels = 0, kernels_plain = 0;
  ir::LowerOptions plain;
  plain.fuse = plain.collapse = plain.local_arrays = false;
  for (uint64_t seed = 2000; seed < 2100; ++seed) {
    const std::string text = ProgramGenerator(seed, "q_", true).generate();
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\n" << numbered(text);
    Result<ir::LoweredProgram> grouped = ir::lower_program(*program);
    Result<ir::LoweredProgram> alone = ir::lower_program(*program, plain);
    ASSERT_TRUE(grouped.ok() && alone.ok()) << grouped.status() << alone.status() << "\n" << numbered(text);
    for (const ir::TensorNode& n : grouped->program.nodes) locals += n.memory == ir::MemoryMode::kLocal;
    for (const ir::LoweredRoutine& r : grouped->routines) kernels += static_cast<int64_t>(r.kernels.size());
    for (const ir::LoweredRoutine& r : alone->routines) kernels_plain += static_cast<int64_t>(r.kernels.size());
  }
  EXPECT_GT(locals, 20);
  EXPECT_LT(kernels * 5, kernels_plain * 4) << kernels << " kernels grouped, " << kernels_plain << " alone";
}

TEST(DifferentialGeneratorTest, ProgramsParse) {
  for (uint64_t seed = 1000; seed < 1100; ++seed) {
    const std::string text = ProgramGenerator(seed, "q_", true).generate();
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\nseed " << seed << ":\n" << numbered(text);
    Status valid = ir::validate_program(*program);
    ASSERT_TRUE(valid.ok()) << valid << "\n" << numbered(text);
  }
}

}  // namespace
}  // namespace kiln::e2e
