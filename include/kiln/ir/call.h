// Call statements: the built-in functions' signatures, and the checks every call gets before it
// is accepted. A call names a built-in (below) or a function the host registers in the RAL
// registry; the latter are checked only for what every call must satisfy, and an unknown name
// fails when the routine is linked (docs/language.md, "Calls").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "kiln/ir/program.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

struct CallAttribute {
  std::string_view name;
  double default_value;
  // kFlag: 0 or 1, passed as i64; kCount: a whole number ≥ 0, passed as i64; kFinite,
  // kNonNegative: passed in the element type of the first output.
  enum class Rule { kFlag, kFinite, kNonNegative, kCount } rule;
};

struct BuiltinCall {
  std::string_view name;
  int tensor_args;  // whole tensors before the attributes
  int outputs;
  std::vector<CallAttribute> attributes;
  int optional_tensor_args = 0;  // more tensors a call may pass after the tensor_args (conv2d's z)
};

// The built-in of that name, or nullptr: gemm, conv2d, conv2d_blocked, qgemm, sort, argsort, topk, random_uniform,
// random_normal, and the collectives allreduce, allgather, reduce_scatter, broadcast, rank and
// world_size.
const BuiltinCall* find_builtin_call(std::string_view name);
const std::vector<BuiltinCall>& builtin_calls();

// The value of attribute `name` of `call`: as written, else the built-in's default.
double call_attribute(const Call& call, std::string_view name);

// The tensors a call passes, in the order the RAL receives them: the tensor arguments, then the
// outputs.
std::vector<int> call_tensors(const Call& call);

// A call as written, with tensors by name (the parser's and the builder's form).
struct RawCallArg {
  std::string name;       // a tensor, or the attribute's name
  bool attribute = false;
  double value = 0;       // the attribute's value
  SourceLoc loc;
};
struct RawCall {
  std::string function;
  std::vector<RawCallArg> args;
  std::vector<std::pair<std::string, SourceLoc>> outputs;
  SourceLoc loc;           // of the `call` keyword
  SourceLoc function_loc;
};

// Resolves names among nodes[0, visible_nodes) and checks the call (check_call), as
// complete_statement does for assignments; nullopt after reporting into `diagnostics`.
// `position` is where it runs among the routine's assignments.
std::optional<Call> complete_call(const RawCall& raw, const std::vector<TensorNode>& nodes, size_t visible_nodes,
                                  int position, std::vector<Diagnostic>* diagnostics, const NodeLookup* lookup);

// Every problem of `call` against the program's nodes, each at the place it concerns: arity,
// ranks, element types, shapes, attributes (unknown, repeated, out of their range), outputs that
// are inputs or consts, a tensor both argument and output. Empty when the call is valid.
std::vector<Diagnostic> check_call(const Call& call, const std::vector<TensorNode>& nodes);

// What a valid collective needs of the number of ranks R, known once the job runs: allgather's
// output and reduce_scatter's argument have a first dimension of R × the other's, broadcast's
// root is a rank. Empty when it holds, for other calls, and where a dimension is sized (checked
// when the call runs).
std::vector<Diagnostic> check_collective_ranks(const Call& call, const std::vector<TensorNode>& nodes, int ranks);

}  // namespace kiln::ir
