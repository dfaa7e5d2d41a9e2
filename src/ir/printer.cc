// print_program (kiln/ir/printer.h): a Program as `.kiln` text.
#include "kiln/ir/printer.h"

#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "kiln/ir/sizes.h"

namespace kiln::ir {

std::string format_number(double value, bool as_float) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  if (!as_float && value == std::trunc(value) && std::fabs(value) < 1e18) {
    if (value == 0 && std::signbit(value)) return "-0";
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(value));
    return std::string(buf, r.ptr);
  }
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  std::string s(buf, r.ptr);
  if (as_float && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// Precedence levels, loosest first, as the parser reads them (docs/language.md, "Expressions").
constexpr int kPrecOr = 1, kPrecXor = 2, kPrecAnd = 3, kPrecCompare = 4, kPrecShift = 5, kPrecAdd = 6,
              kPrecMul = 7, kPrecUnary = 8, kPrecPrimary = 9;
// Hand-made programs may be deeper than kMaxExprDepth; print a marker rather than recurse on.
constexpr int kMaxPrintDepth = 4 * kMaxExprDepth;

int binary_prec(Op op) {
  switch (op) {
    case Op::kAdd: case Op::kSub: return kPrecAdd;
    case Op::kMul: case Op::kDiv: return kPrecMul;
    case Op::kLt: case Op::kLe: case Op::kGt: case Op::kGe: case Op::kEq: case Op::kNe:
      return kPrecCompare;
    case Op::kShl: case Op::kShr: return kPrecShift;
    case Op::kBitAnd: return kPrecAnd;
    case Op::kBitXor: return kPrecXor;
    case Op::kBitOr: return kPrecOr;
    default: return 0;  // not an infix operator
  }
}

// A literal of `type` as text that reads back as that literal: `true` / `false` for bool; an
// integer type's value without '.' or exponent, all its digits (a weak integer literal takes the
// context's type again; `1e+18` would read as a float); a float type's with one.
std::string literal_text(double value, DType type) {
  if (type == DType::kBool) return value != 0 ? "true" : "false";
  if (is_float_type(type) || !std::isfinite(value) || std::fabs(value) < 1e18) {
    return format_number(value, is_float_type(type));
  }
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, 0);
  return std::string(buf, r.ptr);
}

class ExprPrinter {
 public:
  ExprPrinter(const Program& p, const Assignment& s) : p_(p), s_(s) {}

  std::string print(const Expr& e, int min_prec, int depth) {
    int prec = kPrecPrimary;
    std::string text = render(e, &prec, depth);
    return prec < min_prec ? "(" + text + ")" : text;
  }

  std::string index_name(int i) const {
    if (i < 0 || i >= static_cast<int>(s_.indices.size())) return "<index " + std::to_string(i) + ">";
    return s_.indices[i].name;
  }

  std::string affine(const Affine& a) const {
    std::string out;
    for (const auto& [index, coeff] : a.terms) {
      int64_t c = coeff;
      if (out.empty()) {
        if (c < 0) out += "-";
      } else {
        out += c < 0 ? " - " : " + ";
      }
      uint64_t magnitude = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
      if (magnitude != 1) out += std::to_string(magnitude) + "*";
      out += index_name(index);
    }
    if (out.empty()) return std::to_string(a.offset);
    if (a.offset > 0) out += " + " + std::to_string(a.offset);
    if (a.offset < 0) out += " - " + std::to_string(0 - static_cast<uint64_t>(a.offset));
    return out;
  }

  std::string node_name(int node) const {
    if (node < 0 || node >= static_cast<int>(p_.nodes.size())) return "<node " + std::to_string(node) + ">";
    return p_.nodes[node].name;
  }

  // The subscripts of a read (or target): a gathered one prints its i32 value, then the affine rest.
  std::string subscripts(const std::vector<Affine>& subs, const Expr* read = nullptr, int depth = 0) {
    if (subs.empty()) return "";
    std::string out = "[";
    for (size_t d = 0; d < subs.size(); ++d) {
      const Affine& a = subs[d];
      std::string text = affine(a);
      if (a.gather >= 0) {
        const bool valid = read && static_cast<size_t>(a.gather) < read->args.size() && read->args[a.gather];
        std::string gathered =
            valid ? print(*as_written(read->args[a.gather], depth), binary_prec(Op::kAdd), depth + 1) : "<gather>";
        if (text != "0") gathered += text[0] == '-' ? " - " + text.substr(1) : " + " + text;
        text = gathered;
      }
      out += (d ? ", " : "") + text;
    }
    return out + "]";
  }

 private:
  // A gathered subscript's terms as written: typing converts each term of a narrower integer type
  // to i32 (u32 and u64 to i64) before adding them, and reading the term back does that again.
  static ExprRef as_written(const ExprRef& e, int depth) {
    if (!e || e->kind != Expr::Kind::kOp || depth > kMaxPrintDepth) return e;
    if (e->op == Op::kAdd || e->op == Op::kSub || e->op == Op::kNeg) {  // the chain of terms
      auto copy = std::make_shared<Expr>(*e);
      for (ExprRef& a : copy->args) a = as_written(a, depth + 1);
      return copy;
    }
    const std::optional<DType> to = cast_target(e->op);
    if (!to || e->args.size() != 1 || !e->args[0]) return e;
    const DType from = e->args[0]->type;
    const bool implicit = (*to == DType::kI32 && is_integer_type(from) && dtype_bits(from) < 32) ||
                          (*to == DType::kI64 && (from == DType::kU32 || from == DType::kU64));
    return implicit ? e->args[0] : e;
  }

  std::string render(const Expr& e, int* prec, int depth) {
    if (depth > kMaxPrintDepth) return "<too deep>";
    switch (e.kind) {
      case Expr::Kind::kLiteral: {
        std::string s = literal_text(e.literal, e.type);
        if (!s.empty() && s[0] == '-') *prec = kPrecUnary;
        return s;
      }
      case Expr::Kind::kIndex:
        return index_name(e.index);
      case Expr::Kind::kTensor:
        return node_name(e.node) + subscripts(e.subscripts, &e, depth);
      case Expr::Kind::kMerge:
        return node_name(e.node) + ".merge" + subscripts(e.subscripts, &e, depth);
      case Expr::Kind::kSize:
        return e.index >= 0 && static_cast<size_t>(e.index) < p_.sizes.size() ? p_.sizes[e.index].name
                                                                                  : "<size " + std::to_string(e.index) + ">";
      case Expr::Kind::kOp:
        break;
    }
    auto arg = [&](size_t i, int min_prec) -> std::string {
      if (i >= e.args.size() || !e.args[i]) return "<missing>";
      return print(*e.args[i], min_prec, depth + 1);
    };
    if ((e.op == Op::kNeg || e.op == Op::kBitNot) && e.args.size() == 1) {
      *prec = kPrecUnary;
      return std::string(op_name(e.op)) + arg(0, kPrecPrimary);
    }
    int p = binary_prec(e.op);
    if (p > 0 && e.args.size() == 2) {
      *prec = p;
      return arg(0, p) + " " + std::string(op_name(e.op)) + " " + arg(1, p + 1);
    }
    std::string out = std::string(op_name(e.op)) + "(";
    for (size_t i = 0; i < e.args.size(); ++i) out += (i ? ", " : "") + arg(i, 0);
    return out + ")";
  }

  const Program& p_;
  const Assignment& s_;
};

// Indices standing alone as a whole subscript of a dimension of their own range somewhere in the
// statement (one of another size does not give the range back when parsed).
void standalone(const Program& p, const Assignment& s, const Expr& e, std::set<int>* out, int depth) {
  if (depth > kMaxPrintDepth) return;
  if ((e.kind == Expr::Kind::kTensor || e.kind == Expr::Kind::kMerge) && e.node >= 0 &&
      static_cast<size_t>(e.node) < p.nodes.size()) {
    const TensorNode& node = p.nodes[static_cast<size_t>(e.node)];
    for (size_t d = 0; d < e.subscripts.size() && d < node.dims.size(); ++d) {
      const int bare = e.subscripts[d].bare_index();
      if (bare >= 0 && static_cast<size_t>(bare) < s.indices.size() && s.indices[bare].range() == node.dimension(d)) {
        out->insert(bare);
      }
    }
  }
  for (const ExprRef& a : e.args) {
    if (a) standalone(p, s, *a, out, depth + 1);
  }
}

// `u < t + 1`: a triangular bound's limit in the language.
std::string limit_text(const Program& p, const Assignment& s, const IndexLimit& limit) {
  std::string out;
  auto term = [&](int64_t c, const std::string& name) {
    if (out.empty()) {
      if (c < 0) out += "-";
    } else {
      out += c < 0 ? " - " : " + ";
    }
    const uint64_t magnitude = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (magnitude != 1) out += std::to_string(magnitude) + "*";
    out += name;
  };
  for (const auto& [index, c] : limit.indices) {
    term(c, index >= 0 && static_cast<size_t>(index) < s.indices.size() ? s.indices[index].name
                                                                          : "<index " + std::to_string(index) + ">");
  }
  for (const auto& [size, c] : limit.rest.terms) {
    term(c, size >= 0 && static_cast<size_t>(size) < p.sizes.size() ? p.sizes[size].name
                                                                      : "<size " + std::to_string(size) + ">");
  }
  if (limit.rest.offset > 0) out += " + " + std::to_string(limit.rest.offset);
  if (limit.rest.offset < 0) out += " - " + std::to_string(0 - static_cast<uint64_t>(limit.rest.offset));
  return out;
}

std::string print_init(const TensorNode& node) {
  const Init& init = node.init;
  switch (init.kind) {
    case Init::Kind::kNone: return "";
    case Init::Kind::kValue:
      return " = " + (node.dtype == DType::kBool && (init.a == 0 || init.a == 1) ? literal_text(init.a, DType::kBool)
                                                                                  : format_number(init.a, false));
    case Init::Kind::kUniform:
      return " = uniform(" + format_number(init.a, false) + ", " + format_number(init.b, false) + ")";
    case Init::Kind::kNormal:
      return " = normal(" + format_number(init.a, false) + ", " + format_number(init.b, false) + ")";
  }
  return "";
}

}  // namespace

std::string dims_text(const TensorNode& node, const std::vector<SizeDecl>& sizes) {
  std::string out = "[";
  for (size_t d = 0; d < node.dims.size(); ++d) {
    out += (d ? ", " : "") + (node.is_sized() ? size_expr_text(node.sized_dims[d], sizes) : std::to_string(node.dims[d]));
  }
  return out + "]";
}

std::string print_declaration(const TensorNode& node, const std::vector<SizeDecl>& sizes) {
  std::string role(role_name(node.role));
  role.resize(6, ' ');
  std::string out = role + " " + node.name + " : " + std::string(dtype_name(node.dtype));
  if (!node.dims.empty()) out += dims_text(node, sizes);
  out += print_init(node);
  switch (node.memory) {  // a request, as written in text (docs/language.md, "Memory modes")
    case MemoryMode::kUnset: break;
    case MemoryMode::kVirtual: out += " @virtual"; break;
    case MemoryMode::kLocal: out += " @local"; break;
    case MemoryMode::kOnDevice: out += " @device"; break;
    case MemoryMode::kHosted: out += " @hosted"; break;
  }
  return out;
}

std::string print_expr(const Program& program, const Assignment& statement, const Expr& expr) {
  return ExprPrinter(program, statement).print(expr, 0, 1);
}

std::string print_statement(const Program& program, const Assignment& s) {
  ExprPrinter printer(program, s);
  std::string out = printer.node_name(s.target);
  if (!s.target_indices.empty()) {
    out += "[";
    for (size_t d = 0; d < s.target_indices.size(); ++d) {
      out += (d ? ", " : "") + printer.index_name(s.target_indices[d]);
    }
    out += "]";
  }
  out += " " + std::string(accum_name(s.accum)) + " ";
  std::string rhs = s.rhs ? printer.print(*s.rhs, 0, 1) : "<missing>";
  if (s.reduce != Reduce::kNone) rhs = std::string(reduce_name(s.reduce)) + "(" + rhs + ")";
  out += rhs;
  std::set<int> alone(s.target_indices.begin(), s.target_indices.end());
  if (s.rhs) standalone(program, s, *s.rhs, &alone, 1);
  std::string bounds;
  for (int i = 0; i < static_cast<int>(s.indices.size()); ++i) {
    const IndexVar& v = s.indices[i];
    if (alone.count(i) && !v.limit) continue;
    bounds += (bounds.empty() ? " where " : ", ") + v.name + " < " +
              (v.limit          ? limit_text(program, s, *v.limit)
               : v.sized_extent ? size_expr_text(*v.sized_extent, program.sizes)
                                : std::to_string(v.extent));
  }
  return out + bounds;
}

std::string print_call(const Program& program, const Call& call) {
  std::string out = "call " + call.function + "(";
  for (size_t i = 0; i < call.args.size(); ++i) {
    const CallArg& a = call.args[i];
    if (i) out += ", ";
    out += a.node >= 0 ? program.nodes[static_cast<size_t>(a.node)].name
                       : a.attribute + "=" + format_number(a.value, a.value != std::trunc(a.value));
  }
  out += ") ->";
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    out += (i ? ", " : " ") + program.nodes[static_cast<size_t>(call.outputs[i])].name;
  }
  return out;
}

namespace {

// The routine's statements and calls in the order they run, one per line.
std::string print_body(const Program& program, const Routine& routine, const std::string& indent) {
  std::string out;
  size_t next_call = 0;
  for (size_t i = 0; i <= routine.statements.size(); ++i) {
    while (next_call < routine.calls.size() && routine.calls[next_call].position <= static_cast<int>(i)) {
      out += indent + print_call(program, routine.calls[next_call++]) + "\n";
    }
    if (i < routine.statements.size()) out += indent + print_statement(program, routine.statements[i]) + "\n";
  }
  return out;
}

}  // namespace

std::string print_program(const Program& program) {
  std::string out;
  for (const SizeDecl& size : program.sizes) out += "size " + size.name + "\n";
  for (const TensorNode& node : program.nodes) out += print_declaration(node, program.sizes) + "\n";
  for (size_t r = 0; r < program.routines.size(); ++r) {
    const Routine& routine = program.routines[r];
    if (!out.empty()) out += "\n";
    if (r == 0 && routine.name == "main" && (!routine.statements.empty() || !routine.calls.empty())) {
      out += print_body(program, routine, "");
      continue;
    }
    out += "routine " + routine.name + " {\n" + print_body(program, routine, "  ") + "}\n";
  }
  return out;
}

}  // namespace kiln::ir
