// The high-level IR: names of its enums, the typing rule of ops (validate_program() is in
// program_validation.cc).
#include "kiln/ir/program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kiln::ir {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kInput: return "input";
    case Role::kOutput: return "output";
    case Role::kParam: return "param";
    case Role::kTensor: return "tensor";
    case Role::kConst: return "const";
  }
  return "?";
}

std::string_view memory_mode_name(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::kUnset: return "unset";
    case MemoryMode::kVirtual: return "virtual";
    case MemoryMode::kLocal: return "local";
    case MemoryMode::kOnDevice: return "on_device";
    case MemoryMode::kHosted: return "hosted";
  }
  return "?";
}

int64_t TensorNode::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return 0;
    if (n > INT64_MAX / d) return INT64_MAX;  // saturates; validate_program rejects it
    n *= d;
  }
  return n;
}

int64_t TensorNode::byte_size() const {
  const int64_t n = element_count();
  const auto size = static_cast<int64_t>(dtype_size(dtype));
  return n > INT64_MAX / size ? INT64_MAX : n * size;
}

int Affine::bare_index() const {
  if (terms.size() == 1 && terms[0].second == 1 && offset == 0 && gather < 0) return terms[0].first;
  return -1;
}

namespace {

constexpr std::pair<Op, DType> kCasts[] = {
    {Op::kCastBool, DType::kBool}, {Op::kCastI8, DType::kI8},   {Op::kCastU8, DType::kU8},
    {Op::kCastI16, DType::kI16},   {Op::kCastU16, DType::kU16}, {Op::kCastI32, DType::kI32},
    {Op::kCastU32, DType::kU32},   {Op::kCastI64, DType::kI64}, {Op::kCastU64, DType::kU64},
    {Op::kCastF16, DType::kF16},   {Op::kCastBF16, DType::kBF16}, {Op::kCastF32, DType::kF32},
    {Op::kCastF64, DType::kF64},
};

}  // namespace

Op cast_op(DType type) {
  for (const auto& [op, t] : kCasts) {
    if (t == type) return op;
  }
  return Op::kCastF32;
}

std::optional<DType> cast_target(Op op) {
  for (const auto& [o, t] : kCasts) {
    if (o == op) return t;
  }
  return std::nullopt;
}

bool is_comparison(Op op) {
  return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe || op == Op::kEq || op == Op::kNe;
}

int op_arity(Op op) {
  if (cast_target(op)) return 1;
  switch (op) {
    case Op::kNeg: case Op::kExp: case Op::kLog: case Op::kSqrt: case Op::kRsqrt:
    case Op::kTanh: case Op::kSigmoid: case Op::kRelu: case Op::kAbs: case Op::kSin:
    case Op::kCos: case Op::kFloor: case Op::kCeil: case Op::kErf: case Op::kBitNot:
      return 1;
    case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv: case Op::kLt: case Op::kLe:
    case Op::kGt: case Op::kGe: case Op::kEq: case Op::kNe: case Op::kMax: case Op::kMin:
    case Op::kPow: case Op::kBitAnd: case Op::kBitOr: case Op::kBitXor: case Op::kShl: case Op::kShr:
      return 2;
    case Op::kSelect: case Op::kFma:
      return 3;
    default:
      return 0;
  }
}

std::string_view op_name(Op op) {
  if (std::optional<DType> t = cast_target(op)) return dtype_name(*t);
  switch (op) {
    case Op::kNeg: return "-";
    case Op::kExp: return "exp";
    case Op::kLog: return "log";
    case Op::kSqrt: return "sqrt";
    case Op::kRsqrt: return "rsqrt";
    case Op::kTanh: return "tanh";
    case Op::kSigmoid: return "sigmoid";
    case Op::kRelu: return "relu";
    case Op::kAbs: return "abs";
    case Op::kSin: return "sin";
    case Op::kCos: return "cos";
    case Op::kErf: return "erf";
    case Op::kFloor: return "floor";
    case Op::kCeil: return "ceil";
    case Op::kBitNot: return "~";
    case Op::kAdd: return "+";
    case Op::kSub: return "-";
    case Op::kMul: return "*";
    case Op::kDiv: return "/";
    case Op::kLt: return "<";
    case Op::kLe: return "<=";
    case Op::kGt: return ">";
    case Op::kGe: return ">=";
    case Op::kEq: return "==";
    case Op::kNe: return "!=";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kPow: return "pow";
    case Op::kBitAnd: return "&";
    case Op::kBitOr: return "|";
    case Op::kBitXor: return "^";
    case Op::kShl: return "<<";
    case Op::kShr: return ">>";
    case Op::kSelect: return "select";
    case Op::kFma: return "fma";
    default: return "?";
  }
}

std::optional<DType> op_result_type(Op op, const std::vector<DType>& a) {
  if (static_cast<int>(a.size()) != op_arity(op)) return std::nullopt;
  if (std::optional<DType> t = cast_target(op)) return t;
  // Arithmetic on bool computes in i32, as C does (`(x > 0) + (y > 0)` counts).
  auto arithmetic = [](DType t) { return t == DType::kBool ? DType::kI32 : t; };
  switch (op) {
    case Op::kExp: case Op::kLog: case Op::kSqrt: case Op::kRsqrt: case Op::kTanh:
    case Op::kSigmoid: case Op::kSin: case Op::kCos: case Op::kErf:
      return is_float_type(a[0]) ? a[0] : DType::kF32;
    case Op::kNeg: case Op::kAbs: case Op::kRelu: case Op::kFloor: case Op::kCeil:
      return arithmetic(a[0]);
    case Op::kBitNot:
      if (is_float_type(a[0])) return std::nullopt;
      return a[0];
    case Op::kShl: case Op::kShr:
      if (!is_integer_type(a[0]) || !is_integer_type(a[1])) return std::nullopt;
      return a[0];  // a shift keeps its operand's type
    case Op::kBitAnd: case Op::kBitOr: case Op::kBitXor: {
      std::optional<DType> t = promote_types(a[0], a[1]);
      if (!t || is_float_type(*t)) return std::nullopt;
      return t;
    }
    case Op::kLt: case Op::kLe: case Op::kGt: case Op::kGe: case Op::kEq: case Op::kNe:
      if (!promote_types(a[0], a[1])) return std::nullopt;
      return DType::kBool;
    case Op::kMax: case Op::kMin:
      return promote_types(a[0], a[1]);
    case Op::kSelect: return promote_types(a[1], a[2]);
    case Op::kFma: {
      std::optional<DType> t = promote_types(a[0], a[1]);
      if (t) t = promote_types(*t, a[2]);
      if (t) t = arithmetic(*t);
      return t;
    }
    default: {
      std::optional<DType> t = promote_types(a[0], a[1]);
      if (t) t = arithmetic(*t);
      return t;
    }
  }
}

std::string_view accum_name(Accum accum) {
  switch (accum) {
    case Accum::kAssign: return "=";
    case Accum::kAdd: return "+=";
    case Accum::kSub: return "-=";
    case Accum::kMul: return "*=";
  }
  return "?";
}

std::string_view reduce_name(Reduce reduce) {
  switch (reduce) {
    case Reduce::kNone: return "";
    case Reduce::kSum: return "sum";
    case Reduce::kProd: return "prod";
    case Reduce::kMax: return "max";
    case Reduce::kMin: return "min";
    case Reduce::kMean: return "mean";
    case Reduce::kArgmax: return "argmax";
    case Reduce::kArgmin: return "argmin";
  }
  return "?";
}

std::vector<int> Assignment::reduced_indices() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(indices.size()); ++i) {
    if (std::find(target_indices.begin(), target_indices.end(), i) == target_indices.end()) {
      out.push_back(i);
    }
  }
  return out;
}

const TensorNode* Program::find_node(std::string_view name) const {
  for (const TensorNode& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const Routine* Program::find_routine(std::string_view name) const {
  for (const Routine& r : routines) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

int size_number(const std::vector<SizeDecl>& sizes, std::string_view name) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Program::find_size(std::string_view name) const { return size_number(sizes, name); }

bool is_keyword(std::string_view name) {
  static constexpr std::string_view kKeywords[] = {"input", "output", "param", "tensor",
                                                   "const", "routine", "where", "call",
                                                   "true",  "false"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), name) != std::end(kKeywords);
}

std::optional<double> predeclared_literal(std::string_view name) {
  if (name == "inf") return std::numeric_limits<double>::infinity();
  if (name == "nan") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

std::string_view predeclared_name(double value) {
  return std::isnan(value) ? "nan" : std::isinf(value) ? "inf" : "";
}

bool is_identifier(std::string_view name) {
  if (name.empty() || is_keyword(name)) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

}  // namespace kiln::ir
