// Statement completion: the one place that turns a statement as written (names, untyped
// expressions, `where` bounds) into a checked, typed Assignment. The parser and ProgramBuilder
// both use it, so a statement means the same and is refused for the same reasons whichever way
// it was made (the rules are those of docs/language.md).
//
// What completion does:
//  - resolves names: a name inside a subscript is a `const` (its integer value) or an index; a
//    name used as a value is an index of the statement (one that appears in a subscript, the
//    target, or a `where` bound), else a scalar tensor or const;
//  - turns subscripts into affine forms (sums of integer multiples of indices plus an offset);
//  - numbers the indices (target indices first, then in reading order of the right side) and
//    finds each index's extent: the size of every dimension where it stands alone as a whole
//    subscript (all must agree), or its `where` bound (which must agree with those);
//  - types every expression: i32 < f32 < f64; literals are weak (an integer literal takes the
//    type of what it is combined with, a float literal f32 unless that is f64; a subexpression
//    made only of literals is typed as a whole the same way, and a right side made only of
//    literals takes the target's type); see op_result_type() for ops;
//  - splits reductions inside the right side (language version 2) into hidden temporaries,
//    computed by assignments before the statement (statement_reductions.cc);
//  - checks the rules: subscript counts, bare distinct target indices, no writes to inputs or
//    consts, every reduction reducing over some index, every index of an elementwise right
//    side on the left, affine subscripts, literal ranges, depth.
// Every problem found is reported as a Diagnostic, not only the first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir {

// One error: where (line 0 for built programs) and what, with what to do about it.
struct Diagnostic {
  SourceLoc loc;
  std::string message;

  friend bool operator==(const Diagnostic& a, const Diagnostic& b) {
    return a.loc.line == b.loc.line && a.loc.column == b.loc.column && a.message == b.message;
  }
};

// A message about something declared or written at `loc`, for a check made after parsing (a
// memory mode lowering cannot honour): "LINE:COL: MESSAGE" for a parsed program, the message alone
// for a built one (line 0). located_diagnostic() reads such a message back into a Diagnostic, so
// that the command line can show the line and a caret as it does for parse errors.
std::string at_source(SourceLoc loc, const std::string& message);
std::optional<Diagnostic> located_diagnostic(std::string_view message);

struct RawExpr;
using RawExprRef = std::shared_ptr<const RawExpr>;

// An expression as written: names unresolved, no types.
struct RawExpr {
  enum class Kind : uint8_t {
    kNumber,  // `number`; is_float for a literal written with '.' or an exponent
    kName,    // `name` alone: an index, or a scalar tensor / const
    kTensor,  // name[args...]; a scalar may have no args
    kMerge,   // name.merge[args...]
    kOp,      // op(args...), including unary minus and the binary operators
    kReduce,  // reduce(args[0]); anywhere in the right side, nested too (language version 2)
  };
  Kind kind = Kind::kNumber;
  double number = 0;
  bool is_float = false;
  std::string name;
  Op op = Op::kAdd;
  Reduce reduce = Reduce::kNone;
  std::vector<RawExprRef> args;
  SourceLoc loc;
};

RawExprRef raw_number(double value, bool is_float, SourceLoc loc = {});
RawExprRef raw_name(std::string name, SourceLoc loc = {});
RawExprRef raw_tensor(std::string name, std::vector<RawExprRef> subscripts, SourceLoc loc = {});
RawExprRef raw_merge(std::string name, std::vector<RawExprRef> subscripts, SourceLoc loc = {});
RawExprRef raw_op(Op op, std::vector<RawExprRef> args, SourceLoc loc = {});
RawExprRef raw_reduce(Reduce reduce, RawExprRef arg, SourceLoc loc = {});

// `where index < limit`; limit is an integer literal or the name of an integer const.
struct RawBound {
  std::string index;
  RawExprRef limit;
  SourceLoc loc;  // of the index name
};

// TARGET[target_subscripts] ACCUM RHS [where BOUNDS]
struct RawStatement {
  std::string target;
  std::vector<RawExprRef> target_subscripts;  // each must be a bare index name
  Accum accum = Accum::kAssign;
  RawExprRef rhs;  // a kReduce at its top makes it a reduction
  std::vector<RawBound> where;
  SourceLoc loc;  // of the target name
};

// Checks one declaration by itself (its name's uniqueness is the caller's business): the name is
// an identifier and not a keyword, the dtype is not i64, dims are positive with fewer than 2^62
// elements in all, inputs and outputs have no initializer, a const is initialized with a number,
// an i32 value is an integer in range, uniform has LO <= HI, normal has STD >= 0, all finite.
// Problems are reported at node.loc, those about the initializer at init_loc (if given).
void check_declaration(const TensorNode& node, std::vector<Diagnostic>* diagnostics,
                       std::optional<SourceLoc> init_loc = std::nullopt);

// Name → node over a node list (the first node of each name), built once to complete many
// statements without scanning the list for every name. `nodes` must outlive it, unchanged.
class NodeLookup {
 public:
  explicit NodeLookup(const std::vector<TensorNode>& nodes);
  const TensorNode* find(std::string_view name) const;
  // Indexes the nodes appended to the list since (the temporaries of a completed statement).
  void add_appended();

 private:
  const std::vector<TensorNode>* nodes_;
  size_t indexed_ = 0;
  // Owned names (the list may grow), looked up by string_view without a copy.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> positions_;
};

// At most this many distinct indices in one statement (and so in one subscript).
inline constexpr size_t kMaxStatementIndices = 256;

// What one statement became: `temporaries`, tensor nodes with ids nodes.size(), nodes.size() + 1,
// ... (the caller appends them to the program's nodes, in order), each holding a reduction that
// stood inside the right side, and the assignments in the order they run: those of the
// temporaries (inner reductions first), then the statement itself. A temporary is named
// TARGET__REDUCE1 (`o__sum1`; the number grows past names already taken), has the type of its
// argument (i32 for argmax / argmin, at least f32 for mean) and one dimension per index it keeps;
// the same reduction of the same argument written twice is computed once.
struct CompletedStatement {
  std::vector<TensorNode> temporaries;
  std::vector<Assignment> assignments;
};

// Completes one statement against the program's nodes. Only nodes[0, visible_nodes) are declared
// before the statement; a name of a later node is reported as "used before its declaration".
// `lookup`, if given, indexes `nodes`. `sizes` (language version 2) are the sizes declared before
// it: names that may stand in `where` bounds and as values, never in subscripts. Returns what the
// statement became, or nullopt after appending at least one diagnostic.
std::optional<CompletedStatement> complete_statement(const RawStatement& statement,
                                             const std::vector<TensorNode>& nodes,
                                             size_t visible_nodes,
                                             std::vector<Diagnostic>* diagnostics = nullptr,
                                             const NodeLookup* lookup = nullptr,
                                             const std::vector<SizeDecl>* sizes = nullptr);

}  // namespace kiln::ir
