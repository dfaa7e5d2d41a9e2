// One kernel of the C-syntax emitter: pass 1 checks the kernel and works out what each binding
// is used for (kernel_analysis.cc), pass 2 prints its statements (kernel_statements.cc) and
// expressions (kernel_expressions.cc) in C syntax, with the dialect answering what differs.
// Internal to codegen; emit_kernels (c_emitter.cc) runs one per kernel.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/c_code.h"
#include "codegen/dialect.h"
#include "kiln/base/status.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/ir/sizes.h"
#include "kiln/loop/loop.h"

namespace kiln::codegen::internal {

// The loop IR's names, as the emitter's files use them.
using ir::DType;
using ir::LExpr;
using ir::LExprRef;
using ir::LStmt;
using ir::LStmtRef;
using ir::Op;

// A loop whose body only stores to one local array at the loop variable: a lane loop (one that
// fills a split reduction's lanes). Returns the local, or -1 (kernel_work_groups.cc).
int lane_loop_target(const LStmt& s);

// A node (a binding) or local that a loop stores, and the offset it stores at
// (kernel_vectors.cc, kernel_half_blocks.cc).
struct StoreTarget {
  bool node;
  int id;
  const LExpr* offset;
};

// Whether `offset` is affine in loop variable `var` with coefficient 1 and loads nothing, so that
// consecutive iterations touch consecutive elements (kernel_vectors.cc).
bool unit_stride(const LExpr* offset, int var);

class KernelEmitter {
 public:
  KernelEmitter(const DialectSyntax& dialect, HelperSet& helpers, const ir::Kernel& kernel,
                const ir::Program* program, const EmitOptions& options)
      : d_(dialect), helpers_(helpers), kernel_(kernel), program_(program), options_(options) {}

  Status emit(Printer& out);
  bool uses_heap() const { return uses_heap_; }
  // Whether the kernel prints (value tracing: kTrace statements).
  bool uses_print() const { return uses_print_; }
  // Whether the kernel can fail a check (kFail statements).
  bool fails() const { return fails_; }

 private:
  struct NodeUse {
    std::set<DType> load_types;
    std::set<DType> store_types;
    bool written = false;
    bool used = false;
  };

  Status error(const std::string& message) const {
    return invalid_argument_error("kernel '" + kernel_.name + "': " + message);
  }

  // Pass 1: shape checks and what each binding is used for.
  Status analyze(const LStmtRef& stmt);
  Status analyze(const LExprRef& expr);
  Status make_frame(KernelFrame* frame);

  // Pass 2: printing.
  // The statements after the kernel's prologue, for sizes up to size_hi_.
  Status body(Printer& out, bool parallel);
  // body(), twice where a bound on the sizes below kiln's limit makes integer arithmetic plain
  // that the limit makes wrapping: the kernel tests its sizes once and takes the plain copy.
  Status sized_body(Printer& out, bool parallel);
  // `tail`: nothing follows the statement in the enclosing C block, so a local declared by it
  // needs no block of its own.
  Status statement(const LStmtRef& stmt, Printer& out, bool tail);
  Status statement_body(const LStmt& stmt, Printer& out, bool tail);
  Status statements(const std::vector<LStmtRef>& list, Printer& out, bool tail);
  Status for_loop(const LStmt& stmt, Printer& out, bool split);
  // A loop's extent as an expression: its number, or its expression of sizes.
  Result<std::string> extent_text(const LStmt& loop);
  // Prints `loop` in vector form and returns true if it is a small inner loop that
  // kernel_vectors.cc writes with vectors; else prints nothing and returns false.
  Result<bool> vector_loop(const LStmt& loop, Printer& out);
  Result<std::string> vector_expr(const LExprRef& e, int var);
  // Prints `loop` over [from, to) (C expressions) with its f16 loads and stores converted in
  // blocks by the processor's vector instructions where the compiler targets F16C, and returns
  // true, if it is a loop of stores that kernel_half_blocks.cc writes so; else prints nothing
  // and returns false.
  Result<bool> half_block_loop(const LStmt& loop, const std::string& from, const std::string& to,
                               Printer& out);
  // What a loop's variable can be at most, plus one (its extent, or the value range's top).
  Result<int64_t> loop_extent_bound(const LStmt& loop);
  Status local_decl(const LStmt& stmt, Printer& out, bool tail);
  void trace_declarations(Printer& out);
  Status trace(const LStmt& stmt, Printer& out);

  // Work-group reductions (kernel_work_groups.cc): which lane arrays the work-items of a
  // workgroup share, the kernel's parallel loop printed for both local sizes, and whether a
  // statement reads lanes of other work-items (then fenced by barriers).
  void plan_work_groups();
  Status parallel_rows(Printer& out);
  bool reads_group_lanes(const LStmt& stmt) const;
  Result<Code> expr(const LExprRef& expr);
  Result<Code> op(const LExpr& expr);
  Result<Code> offset(const LExprRef& expr);
  // A C truth value for `c != 0`.
  Result<Code> condition(const LExprRef& c);
  Code convert(const Code& code, DType from, DType to);
  // An element of node binding `b` at `index` as a value of `type` (bool normalized to 0 or 1,
  // f16 / bf16 converted to float), and the statement that stores `value` there.
  Code load_element(const BindingInfo& b, DType type, const Code& index);
  std::string store_element(const BindingInfo& b, DType type, const Code& index, const Code& value);
  // A float value rounded to f16 / bf16 (what a store or a local of that type keeps).
  Code round_narrow_float(const Code& x, DType type);
  // The value a store of `value` writes, before a store of f16 / bf16 rounds it: expr(value),
  // without a cast to that type, which the store's rounding makes (and which would round twice).
  Result<Code> narrow_float_stored(const LExprRef& value);
  Code unary_float(Op op, const Code& x, DType type);
  // Integer + - * / and neg in type `type`, with the wrap-around / division rules.
  Code int_arith(Op op, Code a, Code b, DType type);
  Code int_neg(const Code& a, DType type);
  // & | ^ ~ << >> of bool and integers.
  Code bitwise(Op op, const Code& a, const Code& b, DType type);
  Code shift(Op op, const Code& a, const Code& amount, DType type);
  Code int_const(int64_t value, DType type) const { return int_constant(value, type, d_); }
  // The prelude's helper kiln_BASE_TYPE, of f32 for f16 and bf16 (their values are floats).
  std::string helper(std::string_view base, DType type) {
    return helpers_.use("kiln_" + std::string(base) + "_" + std::string(ir::dtype_name(computed_in(type))));
  }
  // The type a value of `type` is computed in: f32 for f16 and bf16, else itself.
  static DType computed_in(DType type) { return ir::is_narrow_float(type) ? DType::kF32 : type; }
  std::string_view tname(DType type) const { return d_.type_name(type); }
  std::string var_name(int var) const { return "v" + std::to_string(var); }
  std::string local_name(int local) const {
    return (in_group_mode_ && group_locals_.count(local) ? "w" : "l") + std::to_string(local);
  }

  const DialectSyntax& d_;
  HelperSet& helpers_;
  const ir::Kernel& kernel_;
  const ir::Program* program_;
  const EmitOptions& options_;

  std::map<int, int> binding_of_node_;  // node id -> binding index
  std::map<int, NodeUse> node_use_;
  std::vector<BindingInfo> bindings_;

  // Scope while printing.
  std::vector<std::optional<int64_t>> var_extent_;  // set while inside the loop over the var
  std::vector<std::optional<DType>> local_in_scope_;
  std::vector<std::string> heap_locals_;  // enclosing heap-allocated locals, outermost first
  int64_t stack_bytes_ = 0;               // bytes of stack locals in scope
  bool uses_heap_ = false;
  // The largest value a size takes in the text being printed (kiln's limit, or the bound that
  // sized_body tests), and how many integer ops that text printed through the wrapping or
  // saturating helpers because their range did not fit.
  int64_t size_hi_ = ir::kMaxSizeValue;
  int range_fallbacks_ = 0;
  std::set<int> printed_sizes_;  // the sizes the printed text reads
  bool uses_print_ = false;
  bool fails_ = false;
  std::map<const LStmt*, int> trace_counters_;  // kTrace statement → its line counter

  // Work-group reductions.
  std::set<int> group_locals_;             // lane arrays in the workgroup's shared memory
  std::set<const LStmt*> lane_loops_;      // loops that fill them, shared by the work-items
  bool in_group_mode_ = false;             // printing the several-work-items version
  bool in_lane_loop_ = false;              // inside one of lane_loops_

  // While half_block_loop prints a block's statement: the loop variable, which then counts
  // blocks (the statement's own iteration is it plus kiln_j), and the f16 loads whose values the
  // block has converted already (each with its array).
  int block_var_ = -1;
  std::vector<std::pair<const LExpr*, std::string>> block_loads_;
};

}  // namespace kiln::codegen::internal
