#include "kiln/ir/sizes.h"

#include <algorithm>
#include <cmath>

#include "base/suggest.h"
#include "ir/statement_internal.h"
#include "kiln/ir/loop_extents.h"
#include "kiln/ir/printer.h"

namespace kiln::ir {

namespace {

constexpr int64_t kMaxDimension = int64_t{1} << 62;

std::vector<std::string> size_names(const std::vector<SizeDecl>& sizes) {
  std::vector<std::string> names;
  for (const SizeDecl& s : sizes) names.push_back(s.name);
  return names;
}

}  // namespace

std::optional<SizeExpr> declared_dimension(const RawExpr& raw, SourceLoc at, const TensorNode& node,
                                           const std::vector<SizeDecl>& sizes,
                                           std::vector<Diagnostic>* diagnostics,
                                           const std::vector<TensorNode>& consts) {
  bool failed = false;
  auto error = [&](SourceLoc loc, std::string message) {
    diagnostics->push_back(Diagnostic{loc, std::move(message)});
    failed = true;
  };
  // A plain number keeps version 1's messages.
  const RawExpr* number = &raw;
  const bool negative = raw.kind == RawExpr::Kind::kOp && raw.op == Op::kNeg && raw.args.size() == 1 && raw.args[0] &&
                        raw.args[0]->kind == RawExpr::Kind::kNumber;
  if (negative) number = raw.args[0].get();
  if (number->kind == RawExpr::Kind::kNumber) {
    const double v = negative ? -number->number : number->number;
    if (v != std::trunc(v) || v <= 0) {
      error(at, "dimension sizes must be positive integers, found " + format_number(v, false));
      return std::nullopt;
    }
    if (v > static_cast<double>(kMaxDimension)) {
      error(at, "dimension size " + format_number(v, false) + " is too large");
      return std::nullopt;
    }
    return SizeExpr::constant(static_cast<int64_t>(v));
  }
  const std::string rule =
      "a dimension is a positive integer or an affine expression of sizes and integer consts (`N`, `N + 2`, `2*N`, `D`)";
  auto name = [&](const RawExpr& n) {
    internal::NamedAffine a;
    a.loc = n.loc;
    if (size_number(sizes, n.name) < 0) {
      a.ok = false;
      auto declared = std::find_if(consts.begin(), consts.end(), [&](const TensorNode& c) { return c.name == n.name; });
      if (declared == consts.end()) {
        std::vector<std::string> names = size_names(sizes);
        for (const TensorNode& c : consts) {
          if (c.role == Role::kConst && c.dtype == DType::kI32 && c.is_scalar()) names.push_back(c.name);
        }
        error(n.loc, "'" + n.name + "' is not a declared size or integer const" + did_you_mean(n.name, names) +
                         "; declare it before this line, with `size " + n.name + "` or `const " + n.name +
                         " : i32 = 16`");
      } else if (declared->role != Role::kConst) {
        error(n.loc, "'" + n.name + "' is a " + std::string(role_name(declared->role)) +
                         ", whose values are not known when it is declared; a dimension takes sizes and integer consts");
      } else if (declared->dtype != DType::kI32 || !declared->is_scalar() || declared->init.kind != Init::Kind::kValue) {
        error(n.loc, "const '" + n.name + "' is " + std::string(dtype_name(declared->dtype)) +
                         (declared->is_scalar() ? "" : dims_text(*declared)) +
                         "; a dimension takes a scalar i32 const (`const " + n.name + " : i32 = 16`)");
      } else if (const double v = declared->init.a; v == std::trunc(v) && std::fabs(v) <= 2147483648.0) {
        a.ok = true;
        a.offset = static_cast<int64_t>(v);
      } else {
        failed = true;  // an i32 const without an i32 value: its declaration reported that
      }
      return a;
    }
    a.terms.push_back({n.name, 1, n.loc});
    return a;
  };
  const internal::NamedAffine a = internal::affine_form(raw, name, error, "dimension", rule);
  if (!a.ok || failed) return std::nullopt;
  const SizeExpr e = internal::size_expr_of(a, sizes);
  const std::string role(role_name(node.role));
  if (e.is_constant()) {
    if (e.offset <= 0 || e.offset > kMaxDimension) {
      error(at, "dimension sizes must be positive integers, found " + std::to_string(e.offset));
      return std::nullopt;
    }
    return e;
  }
  if (node.role == Role::kParam || node.role == Role::kConst) {
    error(at, "a " + role + " keeps one shape across runs, so its dimensions cannot name a size ('" +
                       node.name + "' is a " + role + ")");
    return std::nullopt;
  }
  if (node.role == Role::kInput && e.bare_size() < 0) {
    error(at, "an input's dimension is a number or a size's bare name, which the input binds; '" +
                       size_expr_text(e, sizes) + "' is an expression (declare an output or tensor with it)");
    return std::nullopt;
  }
  return e;
}

std::string size_expr_text(const SizeExpr& e, const std::vector<SizeDecl>& sizes) {
  // Magnitudes as unsigned: -INT64_MIN does not fit in an int64_t.
  auto magnitude = [](int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); };
  std::string out;
  for (const auto& [number, coeff] : e.terms) {
    const std::string name = number >= 0 && static_cast<size_t>(number) < sizes.size() ? sizes[number].name : "?";
    out += out.empty() ? (coeff < 0 ? "-" : "") : (coeff < 0 ? " - " : " + ");
    out += magnitude(coeff) == 1 ? name : std::to_string(magnitude(coeff)) + "*" + name;
  }
  if (out.empty()) return std::to_string(e.offset);
  if (e.offset != 0) out += (e.offset < 0 ? " - " : " + ") + std::to_string(magnitude(e.offset));
  return out;
}

std::optional<int64_t> evaluate(const SizeExpr& e, const std::vector<int64_t>& values) {
  __int128 v = e.offset;
  for (const auto& [number, coeff] : e.terms) {
    if (number < 0 || static_cast<size_t>(number) >= values.size()) return std::nullopt;
    v += static_cast<__int128>(coeff) * values[number];
    if (v > INT64_MAX || v < INT64_MIN) return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

std::string declared_text(const TensorNode& node, const std::vector<SizeDecl>& sizes) {
  return std::string(dtype_name(node.dtype)) + dims_text(node, sizes);
}

}  // namespace

Result<std::vector<int64_t>> bind_sizes(const Program& program,
                                        const std::map<std::string, std::vector<int64_t>, std::less<>>& input_shapes,
                                        const std::map<std::string, int64_t, std::less<>>& host,
                                        const std::string& unbound_hint) {
  const std::vector<SizeDecl>& sizes = program.sizes;
  std::vector<std::optional<int64_t>> bound(sizes.size());
  std::vector<std::string> bound_by(sizes.size());
  for (const TensorNode& node : program.nodes) {
    auto given = input_shapes.find(node.name);
    if (given == input_shapes.end()) continue;
    const std::vector<int64_t>& shape = given->second;
    const std::string what = std::string(role_name(node.role)) + " '" + node.name + "'";
    if (shape.size() != node.dims.size()) {
      return invalid_argument_error(what + " is " + declared_text(node, sizes) + " (" + std::to_string(node.dims.size()) +
                                    " dimensions), but its value has " + std::to_string(shape.size()) + ": " +
                                    shape_text(shape));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      const std::string dim = "dimension " + std::to_string(d) + " of " + what;
      const int size = node.is_sized() ? node.sized_dims[d].bare_size() : -1;
      if (size < 0) {
        const int64_t fixed = node.is_sized() ? node.sized_dims[d].offset : node.dims[d];
        if (node.is_sized() && !node.sized_dims[d].is_constant()) {
          return invalid_argument_error(dim + " is " + size_expr_text(node.sized_dims[d], sizes) +
                                        ", which a value cannot bind");
        }
        if (shape[d] != fixed) {
          return invalid_argument_error(dim + " is " + std::to_string(fixed) + ", but its value has " +
                                        std::to_string(shape[d]) + " (" + shape_text(shape) + ")");
        }
        continue;
      }
      if (bound[size] && *bound[size] != shape[d]) {
        return invalid_argument_error("size " + sizes[size].name + " is " + std::to_string(*bound[size]) + " from " +
                                      bound_by[size] + ", but " + std::to_string(shape[d]) + " from " + dim);
      }
      bound[size] = shape[d];
      bound_by[size] = dim;
    }
  }
  for (const auto& [name, value] : host) {
    const int size = program.find_size(name);
    if (size < 0) {
      if (sizes.empty()) return invalid_argument_error("size " + name + ": the program declares no sizes");
      return invalid_argument_error("size " + name + ": the program declares no such size" +
                                    did_you_mean(name, size_names(sizes)));
    }
    if (value < 0) return invalid_argument_error("size " + name + " cannot be " + std::to_string(value) + ": sizes are 0 or more");
    if (bound[size] && *bound[size] != value) {
      return invalid_argument_error("size " + name + " is given as " + std::to_string(value) + ", but " +
                                    bound_by[size] + " binds it to " + std::to_string(*bound[size]));
    }
    bound[size] = value;
  }
  std::string unbound;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!bound[i]) unbound += (unbound.empty() ? "" : ", ") + sizes[i].name;
  }
  if (!unbound.empty()) {
    const bool several = unbound.find(',') != std::string::npos;
    return invalid_argument_error((several ? "sizes " : "size ") + unbound + (several ? " are" : " is") +
                                  " not bound: no input given names " + (several ? "them" : "it") + unbound_hint);
  }
  std::vector<int64_t> values;
  for (size_t i = 0; i < bound.size(); ++i) {
    if (*bound[i] > kMaxSizeValue) {
      return invalid_argument_error("size " + sizes[i].name + " is " + std::to_string(*bound[i]) +
                                    " (from " + (bound_by[i].empty() ? std::string("the host") : bound_by[i]) +
                                    "), more than kiln's limit of 2^40");
    }
    values.push_back(*bound[i]);
  }
  // Every dimension and bound must be a count at these values.
  for (const TensorNode& node : program.nodes) {
    if (!node.is_sized()) continue;
    __int128 elements = 1;
    for (size_t d = 0; d < node.sized_dims.size(); ++d) {
      const std::optional<int64_t> v = evaluate(node.sized_dims[d], values);
      if (!v || *v < 0) {
        return invalid_argument_error("dimension " + std::to_string(d) + " of " + std::string(role_name(node.role)) + " '" +
                                      node.name + "' is " + size_expr_text(node.sized_dims[d], sizes) + " = " +
                                      (v ? std::to_string(*v) : "too large") + " at these sizes; a dimension is 0 or more");
      }
      elements *= *v;
      if (elements * static_cast<__int128>(dtype_size(node.dtype)) >= kMaxTensorBytes) {
        return invalid_argument_error(std::string(role_name(node.role)) + " '" + node.name + "' would need 2^62 or more bytes at these sizes");
      }
    }
  }
  for (const Routine& routine : program.routines) {
    for (const Assignment& a : routine.statements) {
      for (const IndexVar& index : a.indices) {
        if (!index.sized_extent) continue;
        const std::optional<int64_t> v = evaluate(*index.sized_extent, values);
        // The range a triangular bound reaches may be below 0 (`where u < t` over t < 0): no point.
        if (!v || (*v < 0 && !index.limit)) {
          return invalid_argument_error("the range of index '" + index.name + "' (line " + std::to_string(a.loc.line) +
                                        ") is " + size_expr_text(*index.sized_extent, sizes) + " = " +
                                        (v ? std::to_string(*v) : "too large") + " at these sizes; a range is 0 or more");
        }
      }
    }
  }
  return values;
}

namespace {

// `e` with every size value replaced by its literal; *error is set when one does not fit an i32.
ExprRef specialize_expr(const ExprRef& e, const std::vector<int64_t>& values, const std::vector<SizeDecl>& sizes,
                        Status* error) {
  if (!e) return e;
  if (e->kind == Expr::Kind::kSize) {
    const int64_t v = values[e->index];
    if (v > INT32_MAX) {
      *error = invalid_argument_error("size " + sizes[e->index].name + " = " + std::to_string(v) +
                                      " is used as a value, an i32, which it does not fit");
      return e;
    }
    auto literal = std::make_shared<Expr>();
    literal->kind = Expr::Kind::kLiteral;
    literal->type = DType::kI32;
    literal->literal = static_cast<double>(v);
    literal->loc = e->loc;
    return literal;
  }
  bool changed = false;
  std::vector<ExprRef> args;
  for (const ExprRef& a : e->args) {
    args.push_back(specialize_expr(a, values, sizes, error));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  auto copy = std::make_shared<Expr>(*e);
  copy->args = std::move(args);
  return copy;
}

}  // namespace

Result<Program> specialize_sizes(const Program& program, const std::vector<int64_t>& values) {
  if (values.size() != program.sizes.size()) {
    return invalid_argument_error("specialize_sizes: " + std::to_string(values.size()) + " values for " +
                                  std::to_string(program.sizes.size()) + " sizes");
  }
  Program out = program;
  out.sizes.clear();
  for (TensorNode& node : out.nodes) {
    if (!node.is_sized()) continue;
    for (size_t d = 0; d < node.dims.size(); ++d) node.dims[d] = evaluate(node.sized_dims[d], values).value_or(-1);
    node.sized_dims.clear();
  }
  Status error;
  for (Routine& routine : out.routines) {
    for (Assignment& a : routine.statements) {
      for (IndexVar& index : a.indices) {
        if (index.limit) {
          const std::optional<int64_t> rest = evaluate(index.limit->rest, values);
          if (!rest) {
            error = invalid_argument_error("the bound of index '" + index.name + "' (line " + std::to_string(a.loc.line) +
                                           ") does not fit in 64 bits at these sizes");
          }
          index.limit->rest = SizeExpr::constant(rest.value_or(0));
        }
        if (!index.sized_extent) continue;
        index.extent = evaluate(*index.sized_extent, values).value_or(-1);
        if (index.limit) index.extent = std::max<int64_t>(index.extent, 0);
        index.sized_extent.reset();
      }
      a.rhs = specialize_expr(a.rhs, values, program.sizes, &error);
    }
  }
  KILN_RETURN_IF_ERROR(error);
  KILN_RETURN_IF_ERROR(validate_program(out).annotate("specializing the program's sizes"));
  // As statement completion refuses for written bounds: loops no 64-bit counter can count.
  for (const Routine& routine : out.routines) {
    for (const Assignment& a : routine.statements) {
      if (loop_trip_count(loop_extents(a, out.nodes))) continue;
      return invalid_argument_error("the statement on line " + std::to_string(a.loc.line) + " of routine '" +
                                    routine.name + "' would visit more than 2^63 - 1 points at these sizes, "
                                    "which no device's loop counters can count");
    }
  }
  return out;
}

}  // namespace kiln::ir
