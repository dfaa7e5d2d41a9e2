// validate_program(): the checks a Program passes before it is lowered (kiln/ir/program.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "kiln/ir/call.h"
#include "kiln/ir/program.h"

namespace kiln::ir {

namespace {

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

// Checks one statement; `where` is "routine 'r', statement N (line L)".
class StatementValidator {
 public:
  StatementValidator(const Program& p, const std::set<std::string>& node_names, const Assignment& s,
                     std::string where)
      : p_(p), node_names_(node_names), s_(s), where_(std::move(where)), used_(s.indices.size(), false) {}

  Status run();

 private:
  Status error(const std::string& what) const { return invalid_argument_error(where_ + ": " + what); }
  std::string index_name(int i) const { return quoted(s_.indices[i].name); }
  Status check_ref(const TensorNode& node, const std::vector<Affine>& subs, bool target);
  Status check_expr(const Expr& e, int depth);
  // Triangular bounds: on reduced indices, naming other valid indices and sizes, without a cycle.
  Status check_limits();

  const Program& p_;
  const std::set<std::string>& node_names_;
  const Assignment& s_;
  std::string where_;
  std::vector<bool> used_;
};

Status StatementValidator::check_ref(const TensorNode& node, const std::vector<Affine>& subs,
                                     bool target) {
  if (subs.size() != node.dims.size()) {
    return error(quoted(node.name) + " has " + std::to_string(node.dims.size()) +
                 " dimensions but is referenced with " + std::to_string(subs.size()) +
                 " subscripts");
  }
  const int n = static_cast<int>(s_.indices.size());
  for (size_t d = 0; d < subs.size(); ++d) {
    const Affine& a = subs[d];
    std::set<int> seen;
    for (const auto& [index, coeff] : a.terms) {
      if (index < 0 || index >= n) {
        return error("subscript " + std::to_string(d) + " of " + quoted(node.name) +
                     " names index number " + std::to_string(index) + ", which does not exist");
      }
      if (coeff == 0) {
        return error("subscript " + std::to_string(d) + " of " + quoted(node.name) +
                     " has a zero coefficient for index " + index_name(index));
      }
      if (!seen.insert(index).second) {
        return error("subscript " + std::to_string(d) + " of " + quoted(node.name) +
                     " repeats index " + index_name(index));
      }
      used_[index] = true;
    }
    int bare = a.bare_index();
    // A read whose dimension differs from its index's range is checked like a compound subscript
    // (docs/language.md, "Index ranges"); a target's index spans its dimension exactly.
    if (target && bare >= 0 && s_.indices[bare].extent != node.dims[d]) {
      return error("index " + index_name(bare) + " has extent " +
                   std::to_string(s_.indices[bare].extent) + " but stands alone in dimension " +
                   std::to_string(d) + " of " + quoted(node.name) + ", of size " +
                   std::to_string(node.dims[d]));
    }
    if (a.gather >= 0 && target) return error("target subscript " + std::to_string(d) + " gathers");
    if (target && bare < 0) {
      return error("target subscript " + std::to_string(d) + " is not a bare index");
    }
  }
  return Status();
}

Status StatementValidator::check_expr(const Expr& e, int depth) {
  if (depth > kMaxExprDepth) {
    return error("expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
  }
  const int node_count = static_cast<int>(p_.nodes.size());
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      // Float literals may be inf, -inf or nan (the predeclared names); integer ones are checked.
      if (!is_float_type(e.type) && !integer_value_fits(e.type, e.literal)) {
        return error(std::string(dtype_name(e.type)) + " literal " + std::to_string(e.literal) + " is not a " +
                     std::string(dtype_name(e.type)) + " value");
      }
      return Status();
    case Expr::Kind::kIndex:
      if (e.index < 0 || e.index >= static_cast<int>(s_.indices.size())) {
        return error("index value names index number " + std::to_string(e.index) +
                     ", which does not exist");
      }
      if (e.type != DType::kI32) return error("the value of index " + index_name(e.index) + " is not i32");
      used_[e.index] = true;
      return Status();
    case Expr::Kind::kSize:
      if (e.index < 0 || e.index >= static_cast<int>(p_.sizes.size())) {
        return error("size value names size number " + std::to_string(e.index) + ", which does not exist");
      }
      if (e.type != DType::kI32) return error("the value of size '" + p_.sizes[e.index].name + "' is not i32");
      return Status();
    case Expr::Kind::kTensor:
    case Expr::Kind::kMerge: {
      if (e.node < 0 || e.node >= node_count) {
        return error("read of node " + std::to_string(e.node) + ", which does not exist");
      }
      const TensorNode& node = p_.nodes[e.node];
      if (e.kind == Expr::Kind::kMerge && node.role == Role::kConst) {
        return error("merge read of const " + quoted(node.name));
      }
      if (e.type != node.dtype) {
        return error("read of " + quoted(node.name) + " has type " +
                     std::string(dtype_name(e.type)) + ", not its dtype " +
                     std::string(dtype_name(node.dtype)));
      }
      KILN_RETURN_IF_ERROR(check_ref(node, e.subscripts, false));
      // Gathers: each argument is the i32 value that exactly one subscript adds.
      std::vector<int> gathers(e.args.size(), 0);
      for (const Affine& a : e.subscripts) {
        if (a.gather >= static_cast<int>(e.args.size())) {
          return error("a subscript of " + quoted(node.name) + " gathers argument " + std::to_string(a.gather) +
                       ", which does not exist");
        }
        if (a.gather >= 0) ++gathers[static_cast<size_t>(a.gather)];
      }
      for (size_t g = 0; g < e.args.size(); ++g) {
        if (gathers[g] != 1 || !e.args[g]) {
          return error("argument " + std::to_string(g) + " of the read of " + quoted(node.name) +
                       " is not the gather of exactly one subscript");
        }
        KILN_RETURN_IF_ERROR(check_expr(*e.args[g], depth + 1));
        if (e.args[g]->type != DType::kI32 && e.args[g]->type != DType::kI64) {
          return error("a gathered subscript of " + quoted(node.name) + " is not i32 or i64");
        }
      }
      return Status();
    }
    case Expr::Kind::kOp: {
      if (static_cast<int>(e.args.size()) != op_arity(e.op)) {
        return error("op " + quoted(op_name(e.op)) + " has " + std::to_string(e.args.size()) +
                     " arguments, expected " + std::to_string(op_arity(e.op)));
      }
      std::vector<DType> types;
      for (const ExprRef& a : e.args) {
        if (!a) return error("op " + quoted(op_name(e.op)) + " has a missing argument");
        KILN_RETURN_IF_ERROR(check_expr(*a, depth + 1));
        types.push_back(a->type);
      }
      std::optional<DType> expected = op_result_type(e.op, types);
      if (!expected) {
        std::string names;
        for (DType t : types) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
        return error("op " + quoted(op_name(e.op)) + " does not take arguments of types " + names);
      }
      if (e.type != *expected) {
        return error("op " + quoted(op_name(e.op)) + " has type " +
                     std::string(dtype_name(e.type)) + " but its arguments give " +
                     std::string(dtype_name(*expected)));
      }
      return Status();
    }
  }
  return error("unknown expression kind");
}

Status StatementValidator::check_limits() {
  const int n = static_cast<int>(s_.indices.size());
  for (int i = 0; i < n; ++i) {
    const std::optional<IndexLimit>& limit = s_.indices[static_cast<size_t>(i)].limit;
    if (!limit) continue;
    if (std::find(s_.target_indices.begin(), s_.target_indices.end(), i) != s_.target_indices.end()) {
      return error("index " + index_name(i) + " is a target index but has a limit; only a reduced index may");
    }
    std::set<int> seen;
    for (const auto& [index, coeff] : limit->indices) {
      if (index < 0 || index >= n || index == i || coeff == 0 || !seen.insert(index).second) {
        return error("the limit of index " + index_name(i) + " names index number " + std::to_string(index) +
                     " (coefficient " + std::to_string(coeff) + "), which it may not");
      }
      used_[static_cast<size_t>(index)] = true;
      // mean divides by a product of counts, one per reduced index (lowering's mean_count).
      if (s_.reduce == Reduce::kMean &&
          std::find(s_.target_indices.begin(), s_.target_indices.end(), index) == s_.target_indices.end()) {
        return error("mean over index " + index_name(i) + ", whose limit names index " + index_name(index) +
                     ", which it also reduces over");
      }
    }
    for (const auto& [size, coeff] : limit->rest.terms) {
      if (size < 0 || size >= static_cast<int>(p_.sizes.size())) {
        return error("the limit of index " + index_name(i) + " names size number " + std::to_string(size) +
                     ", which does not exist");
      }
    }
  }
  // No index may be limited, through others, by itself: the loops must nest.
  std::vector<int> state(static_cast<size_t>(n), 0);  // 0 new, 1 on the path, 2 done
  std::function<bool(int)> acyclic = [&](int i) {
    if (state[static_cast<size_t>(i)] != 0) return state[static_cast<size_t>(i)] == 2;
    state[static_cast<size_t>(i)] = 1;
    if (const auto& limit = s_.indices[static_cast<size_t>(i)].limit) {
      for (const auto& [index, coeff] : limit->indices) {
        if (!acyclic(index)) return false;
      }
    }
    state[static_cast<size_t>(i)] = 2;
    return true;
  };
  for (int i = 0; i < n; ++i) {
    if (!acyclic(i)) return error("the limits of index " + index_name(i) + " and the indices they name form a cycle");
  }
  return Status();
}

Status StatementValidator::run() {
  const int node_count = static_cast<int>(p_.nodes.size());
  if (s_.target < 0 || s_.target >= node_count) {
    return error("target node " + std::to_string(s_.target) + " does not exist");
  }
  const TensorNode& target = p_.nodes[s_.target];
  if (target.role == Role::kInput || target.role == Role::kConst) {
    return error("assigns to " + std::string(role_name(target.role)) + " " + quoted(target.name) +
                 ", which is read-only");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < s_.indices.size(); ++i) {
    const IndexVar& v = s_.indices[i];
    if (v.name.empty()) return error("index number " + std::to_string(i) + " has no name");
    if (!names.insert(v.name).second) return error("two indices are named " + quoted(v.name));
    if (node_names_.count(v.name)) return error("index " + quoted(v.name) + " has the name of a tensor");
    if (v.extent < 0) {
      return error("index " + quoted(v.name) + " has extent " + std::to_string(v.extent) +
                   "; extents must be 0 or more");
    }
  }
  if (s_.target_indices.size() != target.dims.size()) {
    return error("target " + quoted(target.name) + " has " + std::to_string(target.dims.size()) +
                 " dimensions but " + std::to_string(s_.target_indices.size()) +
                 " target indices");
  }
  std::vector<Affine> target_subs;
  std::set<int> distinct;
  for (int i : s_.target_indices) {
    if (i < 0 || i >= static_cast<int>(s_.indices.size())) {
      return error("target index number " + std::to_string(i) + " does not exist");
    }
    if (!distinct.insert(i).second) {
      return error("index " + index_name(i) + " appears twice in the target");
    }
    target_subs.push_back(Affine::index(i));
  }
  KILN_RETURN_IF_ERROR(check_ref(target, target_subs, true));
  if (!s_.rhs) return error("the right side is missing");
  KILN_RETURN_IF_ERROR(check_expr(*s_.rhs, 1));
  KILN_RETURN_IF_ERROR(check_limits());
  for (size_t i = 0; i < s_.indices.size(); ++i) {
    if (!used_[i]) return error("index " + index_name(static_cast<int>(i)) + " is not used");
  }
  const std::vector<int> reduced = s_.reduced_indices();
  if (s_.reduce == Reduce::kNone && !reduced.empty()) {
    return error("index " + index_name(reduced[0]) +
                 " is not on the left side and there is no reduction");
  }
  if ((s_.reduce == Reduce::kArgmax || s_.reduce == Reduce::kArgmin) && reduced.size() != 1) {
    return error(std::string(reduce_name(s_.reduce)) + "(...) gives a position along one index, but it reduces over " +
                 std::to_string(reduced.size()) + " (" +
                 (reduced.empty() ? std::string("none: every index of the right side is on the left side")
                                  : "index " + index_name(reduced[0]) + " and more") + ")");
  }
  return Status();
}

Status validate_node(const Program& p, size_t position, std::set<std::string>& names) {
  const TensorNode& n = p.nodes[position];
  const std::string where = "node " + std::to_string(position) +
                            (n.name.empty() ? std::string() : " " + quoted(n.name));
  auto error = [&](const std::string& what) { return invalid_argument_error(where + ": " + what); };
  if (n.id != static_cast<int>(position)) {
    return error("id is " + std::to_string(n.id) + ", expected " + std::to_string(position));
  }
  if (n.name.empty()) return error("has no name");
  if (!names.insert(n.name).second) return error("the name is declared twice");
  if (!dtype_from_name(dtype_name(n.dtype))) return error("has no valid element type");
  for (size_t d = 0; d < n.dims.size(); ++d) {
    if (n.dims[d] < 0) {
      return error("dimension " + std::to_string(d) + " has size " + std::to_string(n.dims[d]) +
                   "; sizes must be 0 or more");
    }
  }
  if (n.byte_size() >= kMaxTensorBytes) return error("has 2^62 or more bytes");
  const bool has_init = n.init.kind != Init::Kind::kNone;
  if ((n.role == Role::kInput || n.role == Role::kOutput) && has_init) {
    return error(std::string(role_name(n.role)) + " nodes have no initializer");
  }
  if (n.role == Role::kConst && n.init.kind != Init::Kind::kValue) {
    return error("a const needs a value initializer");
  }
  // A float value may be inf, -inf or nan; random initializers and integer values are finite.
  const bool may_be_infinite = n.init.kind == Init::Kind::kValue && is_float_type(n.dtype);
  if (has_init && !may_be_infinite && (!std::isfinite(n.init.a) || !std::isfinite(n.init.b))) {
    return error("the initializer is not finite");
  }
  return Status();
}

}  // namespace

Status validate_program(const Program& program) {
  std::set<std::string> names;
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    KILN_RETURN_IF_ERROR(validate_node(program, i, names));
  }
  std::set<std::string> routines;
  for (const Routine& r : program.routines) {
    if (r.name.empty()) return invalid_argument_error("a routine has no name");
    if (!routines.insert(r.name).second) {
      return invalid_argument_error("routine " + quoted(r.name) + " is defined twice");
    }
    for (size_t i = 0; i < r.statements.size(); ++i) {
      const Assignment& s = r.statements[i];
      std::string where = "routine " + quoted(r.name) + ", statement " + std::to_string(i + 1);
      if (s.loc.line > 0) where += " (line " + std::to_string(s.loc.line) + ")";
      KILN_RETURN_IF_ERROR(StatementValidator(program, names, s, where).run());
    }
    int previous = 0;
    for (size_t i = 0; i < r.calls.size(); ++i) {
      const Call& c = r.calls[i];
      const std::string where = "routine " + quoted(r.name) + ", call " + std::to_string(i + 1) + " (" + c.function + ")";
      if (c.position < previous || c.position > static_cast<int>(r.statements.size())) {
        return invalid_argument_error(where + ": position " + std::to_string(c.position) +
                                      " is out of order or past the routine's " +
                                      std::to_string(r.statements.size()) + " statements");
      }
      previous = c.position;
      std::vector<Diagnostic> problems = check_call(c, program.nodes);
      if (!problems.empty()) return invalid_argument_error(where + ": " + problems.front().message);
    }
  }
  return Status();
}

}  // namespace kiln::ir
