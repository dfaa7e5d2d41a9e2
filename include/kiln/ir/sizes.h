// Sizes (language version 2, docs/language.md "Sizes"): dimensions whose values are known only
// when a routine runs. The front end keeps them symbolic (SizeExpr in TensorNode::sized_dims,
// IndexVar::sized_extent, Expr::Kind::kSize), and so does lowering: the kernels read the sizes
// from each dispatch (kiln/loop/loop.h). Before a run every size is bound from the shapes of the
// inputs that name it or from the host; specialize_sizes gives the program at those values (the
// shapes the runtime allocates, or a build for known sizes).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/ir/statement.h"

namespace kiln::ir {

// The largest value a size may take (2^40): a tensor with such a dimension is terabytes, a loop
// over it hours. Kernels compiled for every size rely on it to index without overflow checks.
inline constexpr int64_t kMaxSizeValue = int64_t{1} << 40;

// The dimension written as `raw` in the declaration of `node` (its role and name): a positive
// integer, or an affine expression of `sizes` with integer coefficients (`N + 2`, `2*N`) for an
// output or a tensor, a bare size name for an input, and no size at all for a param or a const.
// A scalar i32 const among `consts` (the nodes declared before) stands for its value anywhere in
// it (`D`, `D + 1`, `2*D`, `N * D`). Reports what is wrong at its place and
// returns nullopt. What concerns the dimension as a whole is reported at `at` (where it starts).
std::optional<SizeExpr> declared_dimension(const RawExpr& raw, SourceLoc at, const TensorNode& node,
                                           const std::vector<SizeDecl>& sizes,
                                           std::vector<Diagnostic>* diagnostics,
                                           const std::vector<TensorNode>& consts = {});

// "N + 2", "2*N", "7": how the language writes a size expression.
std::string size_expr_text(const SizeExpr& e, const std::vector<SizeDecl>& sizes);

// The value of `e` for the sizes' `values`, or nullopt when it does not fit in int64.
std::optional<int64_t> evaluate(const SizeExpr& e, const std::vector<int64_t>& values);

// The values of a program's sizes for one run (binding, docs/language.md "Sizes"): from the shapes
// of the inputs in `input_shapes` (by name; an input whose dimensions name a size binds it, and
// every input naming it must agree), and from `host` (by size name) for sizes no input names.
// INVALID_ARGUMENT, naming the tensor, the dimension, the size and the values, for: a value past
// kMaxSizeValue, a wrong rank,
// a fixed dimension that differs, two values for one size (inputs that disagree, or an input and
// the host), a host value for an unknown size or a negative one, a size left unbound (all of
// them listed, with `unbound_hint` appended: what the caller's user can do), and a dimension or
// bound that is negative, or a tensor too large, at the bound values.
Result<std::vector<int64_t>> bind_sizes(const Program& program,
                                        const std::map<std::string, std::vector<int64_t>, std::less<>>& input_shapes,
                                        const std::map<std::string, int64_t, std::less<>>& host,
                                        const std::string& unbound_hint = "");

// `program` at the sizes' `values` (from bind_sizes): every sized dimension and extent becomes
// its number and every size value an i32 literal, and the program has no sizes left. A size used
// as a value must fit in an i32 (INVALID_ARGUMENT naming it otherwise).
Result<Program> specialize_sizes(const Program& program, const std::vector<int64_t>& values);

}  // namespace kiln::ir
