// ProgramBuilder (kiln/ir/builder.h): raw expressions from C++ operators, completed by the same
// code as parsed statements.
#include "kiln/ir/builder.h"

#include <algorithm>

#include "kiln/ir/memory_mode.h"
#include "kiln/ir/sizes.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

Index::Index(std::string name) : raw_(raw_name(std::move(name))) {}

Index operator+(const Index& a, const Index& b) { return Index(raw_op(Op::kAdd, {a.raw(), b.raw()})); }
Index operator-(const Index& a, const Index& b) { return Index(raw_op(Op::kSub, {a.raw(), b.raw()})); }
Index operator*(const Index& a, const Index& b) { return Index(raw_op(Op::kMul, {a.raw(), b.raw()})); }
Index operator-(const Index& a) { return Index(raw_op(Op::kNeg, {a.raw()})); }

Bound operator<(const Index& index, int64_t limit) {
  // A compound index expression gets an empty name, which build() reports.
  const RawExprRef& r = index.raw();
  return Bound{r && r->kind == RawExpr::Kind::kName ? r->name : std::string(), limit, nullptr};
}

Bound operator<(const Index& index, const Size& limit) {
  Bound b = index < 0;
  b.sized_limit = limit.raw();
  return b;
}

Bound operator<(const Index& index, const Index& limit) {
  Bound b = index < 0;
  b.sized_limit = limit.raw();
  return b;
}

Index operator+(const Index& a, const Size& b) { return Index(raw_op(Op::kAdd, {a.raw(), b.raw()})); }

Size operator+(const Size& a, const Size& b) { return Size(raw_op(Op::kAdd, {a.raw(), b.raw()})); }
Size operator+(const Size& a, int64_t b) { return Size(raw_op(Op::kAdd, {a.raw(), raw_number(double(b), false)})); }
Size operator-(const Size& a, int64_t b) { return Size(raw_op(Op::kSub, {a.raw(), raw_number(double(b), false)})); }
Size operator*(int64_t a, const Size& b) { return Size(raw_op(Op::kMul, {raw_number(double(a), false), b.raw()})); }

Value::Value(const Tensor& scalar) : raw_(raw_tensor(scalar.name(), {})) {}

namespace {
Value op(Op o, std::initializer_list<Value> args) {
  std::vector<RawExprRef> raws;
  for (const Value& v : args) raws.push_back(v.raw());
  return Value(raw_op(o, std::move(raws)));
}
}  // namespace

Value operator+(const Value& a, const Value& b) { return op(Op::kAdd, {a, b}); }
Value operator-(const Value& a, const Value& b) { return op(Op::kSub, {a, b}); }
Value operator*(const Value& a, const Value& b) { return op(Op::kMul, {a, b}); }
Value operator/(const Value& a, const Value& b) { return op(Op::kDiv, {a, b}); }
Value operator-(const Value& a) { return op(Op::kNeg, {a}); }
Value operator&(const Value& a, const Value& b) { return op(Op::kBitAnd, {a, b}); }
Value operator|(const Value& a, const Value& b) { return op(Op::kBitOr, {a, b}); }
Value operator^(const Value& a, const Value& b) { return op(Op::kBitXor, {a, b}); }
Value operator~(const Value& a) { return op(Op::kBitNot, {a}); }
Value operator<<(const Value& a, const Value& b) { return op(Op::kShl, {a, b}); }
Value operator>>(const Value& a, const Value& b) { return op(Op::kShr, {a, b}); }
Value lt(const Value& a, const Value& b) { return op(Op::kLt, {a, b}); }
Value le(const Value& a, const Value& b) { return op(Op::kLe, {a, b}); }
Value gt(const Value& a, const Value& b) { return op(Op::kGt, {a, b}); }
Value ge(const Value& a, const Value& b) { return op(Op::kGe, {a, b}); }
Value eq(const Value& a, const Value& b) { return op(Op::kEq, {a, b}); }
Value ne(const Value& a, const Value& b) { return op(Op::kNe, {a, b}); }
Value exp(const Value& a) { return op(Op::kExp, {a}); }
Value log(const Value& a) { return op(Op::kLog, {a}); }
Value sqrt(const Value& a) { return op(Op::kSqrt, {a}); }
Value rsqrt(const Value& a) { return op(Op::kRsqrt, {a}); }
Value tanh(const Value& a) { return op(Op::kTanh, {a}); }
Value sigmoid(const Value& a) { return op(Op::kSigmoid, {a}); }
Value erf(const Value& a) { return op(Op::kErf, {a}); }
Value relu(const Value& a) { return op(Op::kRelu, {a}); }
Value abs(const Value& a) { return op(Op::kAbs, {a}); }
Value sin(const Value& a) { return op(Op::kSin, {a}); }
Value cos(const Value& a) { return op(Op::kCos, {a}); }
Value floor(const Value& a) { return op(Op::kFloor, {a}); }
Value ceil(const Value& a) { return op(Op::kCeil, {a}); }
Value pow(const Value& a, const Value& b) { return op(Op::kPow, {a, b}); }
Value max(const Value& a, const Value& b) { return op(Op::kMax, {a, b}); }
Value min(const Value& a, const Value& b) { return op(Op::kMin, {a, b}); }
Value select(const Value& c, const Value& a, const Value& b) { return op(Op::kSelect, {c, a, b}); }
Value cast(const Value& a, DType type) { return op(cast_op(type), {a}); }
Value f32(const Value& a) { return op(Op::kCastF32, {a}); }
Value f64(const Value& a) { return op(Op::kCastF64, {a}); }
Value i32(const Value& a) { return op(Op::kCastI32, {a}); }
Value sum(const Value& a) { return Value(raw_reduce(Reduce::kSum, a.raw())); }
Value prod(const Value& a) { return Value(raw_reduce(Reduce::kProd, a.raw())); }
Value max(const Value& a) { return Value(raw_reduce(Reduce::kMax, a.raw())); }
Value min(const Value& a) { return Value(raw_reduce(Reduce::kMin, a.raw())); }
Value mean(const Value& a) { return Value(raw_reduce(Reduce::kMean, a.raw())); }
Value argmax(const Value& a) { return Value(raw_reduce(Reduce::kArgmax, a.raw())); }
Value argmin(const Value& a) { return Value(raw_reduce(Reduce::kArgmin, a.raw())); }

Init value_init(double value) { return Init{Init::Kind::kValue, value, 0}; }
Init uniform_init(double lo, double hi) { return Init{Init::Kind::kUniform, lo, hi}; }
Init normal_init(double mean, double stddev) { return Init{Init::Kind::kNormal, mean, stddev}; }

RoutineBuilder& RoutineBuilder::assign(const Value& target, const Value& rhs, std::vector<Bound> where) {
  return statement(target, Accum::kAssign, rhs, std::move(where));
}
RoutineBuilder& RoutineBuilder::add(const Value& target, const Value& rhs, std::vector<Bound> where) {
  return statement(target, Accum::kAdd, rhs, std::move(where));
}
RoutineBuilder& RoutineBuilder::sub(const Value& target, const Value& rhs, std::vector<Bound> where) {
  return statement(target, Accum::kSub, rhs, std::move(where));
}
RoutineBuilder& RoutineBuilder::mul(const Value& target, const Value& rhs, std::vector<Bound> where) {
  return statement(target, Accum::kMul, rhs, std::move(where));
}

RoutineBuilder& RoutineBuilder::statement(const Value& target, Accum accum, const Value& rhs,
                                          std::vector<Bound> where) {
  const RawExprRef& t = target.raw();
  RawStatement s;
  std::vector<std::string> errors;
  bool broken = false;
  if (!t || t->kind != RawExpr::Kind::kTensor) {
    errors.push_back("the target must be a tensor, like y(i, j) (or y for a scalar)");
    broken = true;
  } else {
    s.target = t->name;
    s.target_subscripts = t->args;
  }
  s.accum = accum;
  s.rhs = rhs.raw();
  for (const Bound& b : where) {
    if (b.index.empty()) {
      errors.push_back("a where bound must name one index, like k < 3");
      continue;
    }
    s.where.push_back(RawBound{b.index, b.sized_limit ? b.sized_limit : raw_number(static_cast<double>(b.limit), false), {}});
  }
  statements_.push_back(std::move(s));
  errors_.push_back(std::move(errors));
  broken_.push_back(broken);
  return *this;
}

Tensor ProgramBuilder::input(std::string name, DType dtype, Dims dims) {
  return declare(Role::kInput, std::move(name), dtype, std::move(dims), Init{});
}
Tensor ProgramBuilder::output(std::string name, DType dtype, Dims dims) {
  return declare(Role::kOutput, std::move(name), dtype, std::move(dims), Init{});
}
Tensor ProgramBuilder::param(std::string name, DType dtype, Dims dims, Init init) {
  return declare(Role::kParam, std::move(name), dtype, std::move(dims), init);
}
Tensor ProgramBuilder::tensor(std::string name, DType dtype, Dims dims, Init init) {
  return declare(Role::kTensor, std::move(name), dtype, std::move(dims), init);
}
Tensor ProgramBuilder::constant(std::string name, DType dtype, double value, Dims dims) {
  return declare(Role::kConst, std::move(name), dtype, std::move(dims), value_init(value));
}

Tensor ProgramBuilder::declare(Role role, std::string name, DType dtype, Dims dims, Init init) {
  TensorNode node;
  node.id = static_cast<int>(nodes_.size());
  node.name = name;
  node.role = role;
  node.dtype = dtype;
  node.init = init;
  std::vector<Diagnostic> problems;
  std::vector<SizeExpr> sized;
  for (const Dim& d : dims.dims()) {
    const RawExpr& raw = *d.raw();
    if (raw.kind == RawExpr::Kind::kNumber) {  // version 1: check_declaration reports a bad one
      node.dims.push_back(static_cast<int64_t>(raw.number));
      sized.push_back(SizeExpr::constant(node.dims.back()));
      continue;
    }
    sized.push_back(declared_dimension(raw, {}, node, sizes_, &problems).value_or(SizeExpr::constant(1)));
    node.dims.push_back(1);
  }
  if (std::any_of(sized.begin(), sized.end(), [](const SizeExpr& e) { return !e.is_constant(); })) {
    node.sized_dims = std::move(sized);
  }
  check_declaration(node, &problems);
  // Text spells an infinite or NaN value `inf` / `nan`, which would read an earlier name instead.
  if (const std::string_view spelled = predeclared_name(init.a);
      init.kind == Init::Kind::kValue && !spelled.empty() && names_.count(std::string(spelled))) {
    problems.push_back({{}, "its value is " + std::string(spelled) + ", but '" + std::string(spelled) +
                                "' is declared before it; rename that"});
  }
  if (!names_.insert(name).second) {
    problems.push_back({{}, "'" + name + "' is already declared; every name is declared once"});
  }
  for (const Diagnostic& d : problems) errors_.push_back("declaration of '" + name + "': " + d.message);
  nodes_.push_back(std::move(node));
  return Tensor(nodes_.back().id, name);
}

Size ProgramBuilder::size(std::string name) {
  if (!is_identifier(name)) {
    errors_.push_back("size '" + name + "' is not a valid name");
  } else if (!names_.insert(name).second) {
    errors_.push_back("size '" + name + "': '" + name + "' is already declared; every name is declared once");
  } else {
    sizes_.push_back(SizeDecl{name, {}});
  }
  return Size(raw_name(std::move(name)));
}

Status ProgramBuilder::set_memory_mode(const Tensor& tensor, MemoryMode mode) {
  Status status;
  if (tensor.id() < 0 || tensor.id() >= static_cast<int>(nodes_.size()) ||
      nodes_[static_cast<size_t>(tensor.id())].name != tensor.name()) {
    status = not_found_error("set_memory_mode: '" + tensor.name() + "' is not a tensor of this builder");
  } else {
    status = check_memory_mode_request(nodes_[static_cast<size_t>(tensor.id())], mode);
  }
  if (!status.ok()) {
    errors_.push_back(status.message());
    return status;
  }
  nodes_[static_cast<size_t>(tensor.id())].memory = mode;
  return status;
}

RoutineBuilder& ProgramBuilder::routine(const std::string& name) {
  for (auto& r : routines_) {
    if (r->name() == name) return *r;
  }
  if (!is_identifier(name)) errors_.push_back("routine name '" + name + "' is not a valid name");
  routines_.push_back(std::make_unique<RoutineBuilder>(name));
  return *routines_.back();
}

RoutineBuilder& RoutineBuilder::call(std::string function, const std::vector<Tensor>& tensors,
                                     const std::vector<std::pair<std::string, double>>& attributes,
                                     const std::vector<Tensor>& outputs) {
  RawCall raw;
  raw.function = std::move(function);
  for (const Tensor& t : tensors) raw.args.push_back(RawCallArg{t.name(), false, 0, {}});
  for (const auto& [name, value] : attributes) raw.args.push_back(RawCallArg{name, true, value, {}});
  for (const Tensor& t : outputs) raw.outputs.emplace_back(t.name(), SourceLoc{});
  calls_.emplace_back(statements_.size(), std::move(raw));
  return *this;
}

Result<Program> ProgramBuilder::build() const {
  std::vector<std::string> errors = errors_;
  Program program;
  program.file = file_;
  program.sizes = sizes_;
  program.nodes = nodes_;
  const size_t declared = nodes_.size();
  NodeLookup lookup(program.nodes);
  for (const auto& r : routines_) {
    Routine routine;
    routine.name = r->name();
    // Where each statement's assignments start (a statement with inner reductions makes several,
    // a broken one none), for the positions of the calls among them.
    std::vector<size_t> first_assignment;
    for (size_t i = 0; i < r->statements_.size(); ++i) {
      first_assignment.push_back(routine.statements.size());
      const std::string where = "routine '" + r->name() + "', statement " + std::to_string(i + 1) + ": ";
      for (const std::string& e : r->errors_[i]) errors.push_back(where + e);
      if (r->broken_[i]) continue;
      std::vector<Diagnostic> diagnostics;
      std::optional<CompletedStatement> c =
          complete_statement(r->statements_[i], program.nodes, declared, &diagnostics, &lookup, &sizes_);
      for (const Diagnostic& d : diagnostics) errors.push_back(where + d.message);
      if (!c) continue;
      program.nodes.insert(program.nodes.end(), c->temporaries.begin(), c->temporaries.end());
      lookup.add_appended();
      for (Assignment& a : c->assignments) routine.statements.push_back(std::move(a));
    }
    first_assignment.push_back(routine.statements.size());
    for (size_t c = 0; c < r->calls_.size(); ++c) {
      const auto& [before, raw] = r->calls_[c];
      const size_t position = first_assignment[before];
      std::vector<Diagnostic> diagnostics;
      std::optional<Call> call = complete_call(raw, program.nodes, declared, static_cast<int>(position), &diagnostics, &lookup);
      for (const Diagnostic& d : diagnostics) {
        errors.push_back("routine '" + r->name() + "', call " + std::to_string(c + 1) + ": " + d.message);
      }
      if (call) routine.calls.push_back(std::move(*call));
    }
    if (routine.name == "main") {
      program.routines.insert(program.routines.begin(), std::move(routine));
    } else {
      program.routines.push_back(std::move(routine));
    }
  }
  if (!errors.empty()) {
    std::string message = file_ + ": " + std::to_string(errors.size()) +
                          (errors.size() == 1 ? " error" : " errors");
    for (const std::string& e : errors) message += "\n" + e;
    return invalid_argument_error(message);
  }
  KILN_RETURN_IF_ERROR(validate_program(program));
  return program;
}

}  // namespace kiln::ir
