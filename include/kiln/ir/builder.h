// ProgramBuilder: the C++ way to write what a `.kiln` file says, with the same checks (statements
// go through complete_statement(), the whole program through validate_program()).
//
//   ProgramBuilder b;
//   Tensor a = b.input("a", DType::kF32, {64, 128});
//   Tensor w = b.input("w", DType::kF32, {128, 32});
//   Tensor y = b.output("y", DType::kF32, {64, 32});
//   Index i("i"), j("j"), k("k");
//   b.main().assign(y(i, j), relu(sum(a(i, k) * w(k, j))));   // error: reduction not at the top
//   b.main().assign(y(i, j), sum(a(i, k) * w(k, j)));         // fine
//   Result<Program> program = b.build();
//
// Sizes (language version 2): `Size n = b.size("N"); b.input("x", DType::kF32, {n, 10});`.
//
// Index expressions are affine (`i + 1`, `2*k - 1`, `i - j`) and serve as subscripts and, where a
// Value is expected, as the index's value (i32). Values combine with + - * / and unary -, the
// bitwise & | ^ << >> and ~ (language version 3), and with the functions below; numbers convert
// to weak literals (an int to an integer literal, a double to a float literal) and a C++ bool to
// the bool literal `true` / `false`. Errors (bad names, a reduction in the wrong place, an unbounded
// index, ...) are reported by build(), all of them, each naming its routine and statement.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/call.h"
#include "kiln/ir/program.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

class Tensor;

// An affine index expression: a named index, an integer, or +, -, * of those.
class Index {
 public:
  explicit Index(std::string name);
  template <std::integral T>
  Index(T value) : Index(raw_number(static_cast<double>(value), false)) {}  // NOLINT: implicit
  explicit Index(RawExprRef raw) : raw_(std::move(raw)) {}

  const RawExprRef& raw() const { return raw_; }

 private:
  RawExprRef raw_;
};

Index operator+(const Index& a, const Index& b);
Index operator-(const Index& a, const Index& b);
Index operator*(const Index& a, const Index& b);  // affine when one side is a number
Index operator-(const Index& a);

// Language version 2: a size of the program (ProgramBuilder::size), or an affine expression of
// sizes (`n + 2`, `2 * n`). It stands in dimensions, in where bounds (`k < n`) and as a value (an
// i32, like an index).
class Size {
 public:
  explicit Size(RawExprRef raw) : raw_(std::move(raw)) {}
  const RawExprRef& raw() const { return raw_; }

 private:
  RawExprRef raw_;
};
Size operator+(const Size& a, const Size& b);
Size operator+(const Size& a, int64_t b);
Size operator-(const Size& a, int64_t b);
Size operator*(int64_t a, const Size& b);

// A dimension of a declaration: a positive integer, or a Size.
class Dim {
 public:
  template <std::integral T>
  Dim(T value) : raw_(raw_number(static_cast<double>(value), false)) {}  // NOLINT: implicit
  Dim(const Size& size) : raw_(size.raw()) {}                            // NOLINT: implicit
  const RawExprRef& raw() const { return raw_; }

 private:
  RawExprRef raw_;
};

// A declaration's dimensions: `{64, 128}`, `{n, 10}`, or a std::vector<int64_t>. {} is a scalar.
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<Dim> dims) : dims_(dims) {}                      // NOLINT: implicit
  Dims(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) {}  // NOLINT: implicit
  const std::vector<Dim>& dims() const { return dims_; }

 private:
  std::vector<Dim> dims_;
};

// `where k < 3` (or `k < n` for a size): the range of an index that never stands alone as a
// whole subscript. Language version 2, a triangular bound: `u < t + 1` limits a reduced index by
// an affine expression of other indices (with integers, and sizes through Index + Size).
struct Bound {
  std::string index;
  int64_t limit = 0;
  RawExprRef sized_limit;  // a Size's (or an Index's) expression, instead of `limit`
};
Bound operator<(const Index& index, int64_t limit);
Bound operator<(const Index& index, const Size& limit);
Bound operator<(const Index& index, const Index& limit);
Index operator+(const Index& a, const Size& b);

// A value expression.
class Value {
 public:
  Value(const Index& index) : raw_(index.raw()) {}  // NOLINT: implicit
  template <std::integral T>
  Value(T v) : raw_(raw_number(static_cast<double>(v), false)) {}  // NOLINT: implicit
  template <std::floating_point T>
  Value(T v) : raw_(raw_number(static_cast<double>(v), true)) {}  // NOLINT: implicit
  Value(bool v) : raw_(raw_name(v ? "true" : "false")) {}  // NOLINT: implicit; `true`, `false`
  Value(const Tensor& scalar);  // NOLINT: implicit; a scalar tensor or const
  Value(const Size& size) : raw_(size.raw()) {}  // NOLINT: implicit; a size's value (i32)
  explicit Value(RawExprRef raw) : raw_(std::move(raw)) {}

  const RawExprRef& raw() const { return raw_; }

 private:
  RawExprRef raw_;
};

Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator-(const Value& a);
// Language version 3: bitwise (logical on bool) and shifts, on bool and integer values.
Value operator&(const Value& a, const Value& b);
Value operator|(const Value& a, const Value& b);
Value operator^(const Value& a, const Value& b);
Value operator~(const Value& a);
Value operator<<(const Value& a, const Value& b);
Value operator>>(const Value& a, const Value& b);

// Comparisons give bool.
Value lt(const Value& a, const Value& b);
Value le(const Value& a, const Value& b);
Value gt(const Value& a, const Value& b);
Value ge(const Value& a, const Value& b);
Value eq(const Value& a, const Value& b);
Value ne(const Value& a, const Value& b);

Value exp(const Value& a);
Value log(const Value& a);
Value sqrt(const Value& a);
Value rsqrt(const Value& a);
Value tanh(const Value& a);
Value sigmoid(const Value& a);
Value relu(const Value& a);
Value abs(const Value& a);
Value sin(const Value& a);
Value cos(const Value& a);
Value erf(const Value& a);
Value floor(const Value& a);
Value ceil(const Value& a);
Value pow(const Value& a, const Value& b);
Value max(const Value& a, const Value& b);  // elementwise
Value min(const Value& a, const Value& b);  // elementwise
Value select(const Value& c, const Value& a, const Value& b);  // a where c != 0, else b
Value cast(const Value& a, DType type);  // `u8(a)`, `bf16(a)`, ...: a cast to any type
Value f32(const Value& a);
Value f64(const Value& a);
Value i32(const Value& a);

// Reductions: the whole right side of a statement, or (language version 2) anywhere inside it,
// nested too: each inner one is computed into a temporary first (kiln/ir/statement.h).
Value sum(const Value& a);
Value prod(const Value& a);
Value max(const Value& a);
Value min(const Value& a);
Value mean(const Value& a);
// The position of the largest / smallest value over the one reduced index (language version 2).
Value argmax(const Value& a);
Value argmin(const Value& a);

// Language version 2, a gather: a subscript that is the i32 value `position` reads from tensors,
// `z(n, gathered(lab(n)))`; it combines with indices like any Index (`gathered(t(i)) + 1`).
inline Index gathered(const Value& position) { return Index(position.raw()); }

// A declared tensor: t(i, j) reads it (or names the target of a statement), t.merge(i, j) reads
// its merge buffer. A scalar converts to a Value by itself (or t()).
class Tensor {
 public:
  Tensor() = default;
  Tensor(int id, std::string name) : id_(id), name_(std::move(name)) {}

  template <typename... S>
  Value operator()(const S&... subscripts) const {
    return Value(raw_tensor(name_, {Index(subscripts).raw()...}));
  }
  template <typename... S>
  Value merge(const S&... subscripts) const {
    return Value(raw_merge(name_, {Index(subscripts).raw()...}));
  }

  int id() const { return id_; }
  const std::string& name() const { return name_; }

 private:
  int id_ = -1;
  std::string name_;
};

Init value_init(double value);
Init uniform_init(double lo, double hi);
Init normal_init(double mean, double stddev);

class ProgramBuilder;

// The statements of one routine, in order.
class RoutineBuilder {
 public:
  RoutineBuilder(std::string name) : name_(std::move(name)) {}  // NOLINT

  // target = rhs, target += rhs, ... The target is a tensor read like y(i, j) (a scalar: y).
  RoutineBuilder& assign(const Value& target, const Value& rhs, std::vector<Bound> where = {});
  RoutineBuilder& add(const Value& target, const Value& rhs, std::vector<Bound> where = {});
  RoutineBuilder& sub(const Value& target, const Value& rhs, std::vector<Bound> where = {});
  RoutineBuilder& mul(const Value& target, const Value& rhs, std::vector<Bound> where = {});
  RoutineBuilder& statement(const Value& target, Accum accum, const Value& rhs,
                            std::vector<Bound> where = {});

  // call FUNCTION(TENSORS..., NAME=VALUE...) -> OUTPUTS, after the statements added so far
  // (kiln/ir/call.h); build() reports its problems like a statement's.
  RoutineBuilder& call(std::string function, const std::vector<Tensor>& tensors,
                       const std::vector<std::pair<std::string, double>>& attributes,
                       const std::vector<Tensor>& outputs);

  const std::string& name() const { return name_; }

 private:
  friend class ProgramBuilder;
  std::string name_;
  std::vector<RawStatement> statements_;
  std::vector<std::pair<size_t, RawCall>> calls_;  // (statements before it, the call)
  std::vector<std::vector<std::string>> errors_;  // per statement, found while adding it
  std::vector<bool> broken_;                      // statements_[i] cannot be completed
};

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string file = "<builder>") : file_(std::move(file)) {}
  ProgramBuilder(const ProgramBuilder&) = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  // Declarations, in order. dims {} is a scalar. A dimension may be a Size (language version 2:
  // a bare size for an input, an affine one for an output or tensor, none for a param or const).
  Tensor input(std::string name, DType dtype, Dims dims = {});
  Tensor output(std::string name, DType dtype, Dims dims = {});
  Tensor param(std::string name, DType dtype, Dims dims = {}, Init init = {});
  Tensor tensor(std::string name, DType dtype, Dims dims = {}, Init init = {});
  Tensor constant(std::string name, DType dtype, double value, Dims dims = {});
  Tensor declare(Role role, std::string name, DType dtype, Dims dims, Init init);
  // Declares a size (language version 2), like `size N` in text.
  Size size(std::string name);

  // Requests a memory mode for a declared tensor (kiln/ir/memory_mode.h): an inconsistent request
  // is refused with INVALID_ARGUMENT naming the tensor and why, which build() reports too.
  Status set_memory_mode(const Tensor& tensor, MemoryMode mode);

  // The routine of that name (created on first use; references stay valid). main() is the
  // routine "main", which build() puts first as the language does.
  RoutineBuilder& routine(const std::string& name);
  RoutineBuilder& main() { return routine("main"); }

  // The program, or INVALID_ARGUMENT listing every problem ("routine 'r', statement 2: ...").
  Result<Program> build() const;

 private:
  std::string file_;
  std::vector<SizeDecl> sizes_;
  std::vector<TensorNode> nodes_;
  std::set<std::string> names_;
  std::vector<std::unique_ptr<RoutineBuilder>> routines_;
  std::vector<std::string> errors_;
};

}  // namespace kiln::ir
