// The statement completer's state, shared by statement.cc (names, subscripts, extents, rules)
// and statement_typing.cc (types of the right side). Private to kiln_ir.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/ir/statement.h"

namespace kiln::ir::internal {

// "1 dimension", "3 dimensions".
std::string dims_text(size_t n);

// Same kind, type, values, nodes, subscripts and arguments.
bool same_expr(const Expr& a, const Expr& b);

// A subscript with indices still named: sum(coeff * name) + offset.
struct NamedTerm {
  std::string name;
  int64_t coeff = 0;
  SourceLoc loc;  // where the index first appears in the subscript
};

struct NamedAffine {
  std::vector<NamedTerm> terms;  // in order of first appearance
  int64_t offset = 0;
  // Language version 2, gathers: the terms of a subscript's + / - chain that read tensors, each
  // with whether it is subtracted; their i32 values add to the affine part.
  std::vector<std::pair<const RawExpr*, bool>> gathers;
  bool ok = true;  // false after an error was reported
  SourceLoc loc;
};

// The affine form of `e`: integers combined with +, - and multiplication by an integer, and names
// (kName) as `names` makes them (a term, or a constant offset; it reports its own errors). Errors
// name the thing being read (`what`: "subscript", "dimension", "bound") and end with `rule`.
using AffineNames = std::function<NamedAffine(const RawExpr& name)>;
using AffineErrors = std::function<void(SourceLoc, std::string)>;
NamedAffine affine_form(const RawExpr& e, const AffineNames& names, const AffineErrors& error,
                        std::string_view what, std::string_view rule);
// Multiplies every coefficient and the offset by `factor`; false on overflow.
bool scale_affine(NamedAffine& a, int64_t factor);
// `a` over sizes (every term names one of `sizes`) as a SizeExpr: zero terms dropped, by size number.
SizeExpr size_expr_of(const NamedAffine& a, const std::vector<SizeDecl>& sizes);

class Completer {
 public:
  Completer(const RawStatement& s, const std::vector<TensorNode>& nodes, size_t visible,
            std::vector<Diagnostic>* diagnostics, const NodeLookup* lookup, const std::vector<SizeDecl>& sizes)
      : s_(s), nodes_(nodes), visible_(visible), diagnostics_(diagnostics), lookup_(lookup), sizes_(sizes) {}

  // The statement, after the assignments of the temporaries its inner reductions became.
  std::optional<CompletedStatement> run();

 private:
  // A tensor or merge read on the right side.
  struct Ref {
    const RawExpr* raw = nullptr;
    const TensorNode* node = nullptr;  // null if unresolved or given the wrong subscript count
    std::vector<NamedAffine> subs;
  };
  // A dimension an index stands alone in: its size, and where (for messages).
  struct Standing {
    SizeExpr size;
    std::string from;  // "dimension 1 of 'x' (size 10)"
    SourceLoc loc;
    bool target = false;
  };
  struct IndexInfo {
    std::string name;
    SourceLoc first;  // where it first appears
    std::vector<Standing> alone;  // the dimensions it stands alone in, target first
    std::optional<SizeExpr> extent;
    std::string extent_from;  // "dimension 1 of 'x' (size 10)"
    bool from_target = false; // the extent is the target's dimension
    bool bounded = false;     // has a `where` bound
    SourceLoc bound_loc;      // where that bound is written
    // A triangular bound (`where u < t + 1`): the indices it names (by number) and the rest.
    std::optional<IndexLimit> limit;
  };

  void error(SourceLoc loc, std::string message);
  // Refuses (at the widest `where` bound) a statement whose loops no 64-bit counter can count.
  // `old_numbers` maps out's index numbers back to the statement's.
  bool check_trip_count(const Assignment& out, const std::vector<int>& old_numbers);
  const TensorNode* find(const std::string& name) const;
  bool visible(const TensorNode* node) const;
  int position(const TensorNode* node) const;  // its index in nodes_ (its id)
  void report_later(const TensorNode* node, SourceLoc loc);
  std::optional<int64_t> const_value(const TensorNode* node, SourceLoc loc);
  static std::string subscript_count_message(const TensorNode& node, size_t given);

  // statement_subscripts.cc
  NamedAffine affine(const RawExpr& e);
  NamedAffine subscript(const RawExpr* e, SourceLoc fallback);
  // statement.cc
  void check_target();
  void collect_refs(const RawExpr& e);
  // statement_indices.cc
  void add_index(const std::string& name, SourceLoc loc);
  void number_indices(const RawExpr& e);
  void set_extent(const std::string& name, const SizeExpr& size, const TensorNode& node, size_t dim,
                  SourceLoc loc, bool target);
  // Each index's extent from the dimensions it stands alone in (docs/language.md, "Index ranges").
  void resolve_extents();
  void apply_bounds();
  // The range of each index that a triangular bound limits and that stands alone nowhere: the
  // most its limit reaches over the others' ranges.
  void limit_extents();
  // Adds to `indices` the ones that the limits of those in it name, and theirs.
  void add_limited(std::set<int>* indices) const;

  // statement_reductions.cc: which indices each reduction keeps and reduces (by number).
  struct InnerReduction {
    std::vector<int> kept, reduced;
  };
  // A reduction inside the right side, computed into temporary node `node`.
  struct Temporary {
    int node = -1;
    Reduce reduce = Reduce::kNone;
    std::vector<int> kept, reduced;
    ExprRef arg;  // typed, in the statement's numbering
    SourceLoc loc;
  };
  void direct_indices(const RawExpr& e, std::set<int>* out);  // outside reductions
  void scope_reductions(const RawExpr& e, std::vector<const RawExpr*>* out);  // outermost ones
  // The indices of reduction argument `arg` once its own inner reductions are split off.
  std::set<int> reduction_scope(const RawExpr& arg, const std::set<int>& around);
  std::set<int> split_reduction(const RawExpr& r, const std::set<int>& around);  // the kept ones
  void check_reduced(Reduce reduce, const std::vector<int>& reduced, SourceLoc loc, bool inner);
  std::string temporary_name(std::string_view kind) const;  // "sum": TARGET__sum1, or __sum2 where taken
  // A hidden tensor named temporary_name(kind), with one dimension per index of `indices` (each
  // its extent, a size's where the extent names one), numbered after the temporaries so far.
  TensorNode temporary_node(std::string_view kind, DType type, const std::vector<int>& indices, SourceLoc loc) const;
  // An assignment over the indices `rhs` and the target use, numbered afresh.
  std::optional<Assignment> assignment(int target, const std::vector<int>& target_indices, Accum accum,
                                       Reduce reduce, const ExprRef& rhs, SourceLoc loc);
  bool add_temporaries(std::vector<Assignment>* out);
  // The right side `rhs` with each reduction argument that it also computes outside the
  // reductions read from a temporary of its own instead (statement_reductions.cc).
  ExprRef share_reduced_arguments(const ExprRef& rhs);

  // statement_typing.cc
  struct Typed {
    std::shared_ptr<Expr> expr;  // null after an error
    bool weak = false;           // made only of literals: typed by its context
  };
  ExprRef type_rhs(const RawExpr& rhs, DType target_type);
  Typed type_expr(const RawExpr& e);
  Typed type_op(const RawExpr& e);
  Typed type_inner_reduction(const RawExpr& e);  // statement_reductions.cc
  // The gathered part of subscript `a` of a read, as one i32 expression; null after an error.
  ExprRef type_gather(const NamedAffine& a, const std::string& tensor);
  void settle(const ExprRef& e, DType context);

  const RawStatement& s_;
  const std::vector<TensorNode>& nodes_;
  size_t visible_;
  std::vector<Diagnostic>* diagnostics_;
  const NodeLookup* lookup_;
  const std::vector<SizeDecl>& sizes_;
  int size_number(const std::string& name) const;  // -1 when `name` is not a size
  bool failed_ = false;
  bool unresolved_ = false;           // a name did not resolve: skip checks that would only cascade
  std::map<const RawExpr*, InnerReduction> inner_;  // every reduction but a whole right side
  std::vector<TensorNode> temporaries_;
  std::vector<Temporary> temporary_reductions_;  // in the order they must run (inner first)

  const TensorNode* target_ = nullptr;
  std::vector<std::pair<std::string, SourceLoc>> target_names_;
  std::map<const RawExpr*, Ref> refs_;
  std::vector<const RawExpr*> ref_order_;
  std::set<std::string> index_names_;
  std::map<std::string, int> index_number_;
  std::vector<IndexInfo> indices_;
  std::unordered_set<const Expr*> weak_;
};

}  // namespace kiln::ir::internal
