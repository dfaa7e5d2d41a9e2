#include "kiln/ir/sizes.h"

#include <algorithm>
#include <cmath>

#include "base/suggest.h"
#include "ir/statement_internal.h"
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
                                           std::vector<Diagnostic>* diagnostics) {
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
  const std::string rule = "a dimension is a positive integer or an affine expression of sizes (`N`, `N + 2`, `2*N`)";
  auto name = [&](const RawExpr& n) {
    internal::NamedAffine a;
    a.loc = n.loc;
    auto it = std::find_if(sizes.begin(), sizes.end(), [&](const SizeDecl& s) { return s.name == n.name; });
    if (it == sizes.end()) {
      error(n.loc, "'" + n.name + "' is not a declared size" + did_you_mean(n.name, size_names(sizes)) +
                       "; declare it with `size " + n.name + "` before this line");
      a.ok = false;
      return a;
    }
    a.terms.push_back({n.name, 1, n.loc});
    return a;
  };
  internal::NamedAffine a = internal::affine_form(raw, name, error, "dimension", rule);
  if (!a.ok || failed) return std::nullopt;
  std::erase_if(a.terms, [](const internal::NamedTerm& t) { return t.coeff == 0; });
  SizeExpr e;
  e.offset = a.offset;
  for (const internal::NamedTerm& t : a.terms) {
    const auto number = std::find_if(sizes.begin(), sizes.end(), [&](const SizeDecl& s) { return s.name == t.name; });
    e.terms.push_back({static_cast<int>(number - sizes.begin()), t.coeff});
  }
  std::sort(e.terms.begin(), e.terms.end());
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
  std::string out;
  for (const auto& [number, coeff] : e.terms) {
    const std::string name = number >= 0 && static_cast<size_t>(number) < sizes.size() ? sizes[number].name : "?";
    const int64_t magnitude = coeff < 0 ? -coeff : coeff;
    out += out.empty() ? (coeff < 0 ? "-" : "") : (coeff < 0 ? " - " : " + ");
    out += magnitude == 1 ? name : std::to_string(magnitude) + "*" + name;
  }
  if (out.empty()) return std::to_string(e.offset);
  if (e.offset != 0) out += (e.offset < 0 ? " - " : " + ") + std::to_string(e.offset < 0 ? -e.offset : e.offset);
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

}  // namespace kiln::ir
