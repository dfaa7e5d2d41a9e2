// Expression builders shared by lowering and its analyses (lower_arith.h).
#include "loop/lower_arith.h"

#include <cmath>
#include <limits>
#include <utility>

#include "kiln/loop/op_eval.h"

namespace kiln::ir::lowering {

LExprRef i64(int64_t v) { return lconst(DType::kI64, static_cast<double>(v)); }

bool is_const(const LExprRef& e, double v) {
  return e->kind == LExpr::Kind::kConst && e->value == v;
}

LExprRef add(LExprRef a, LExprRef b) {
  if (is_const(a, 0)) return b;
  if (is_const(b, 0)) return a;
  if (a->kind == LExpr::Kind::kConst && b->kind == LExpr::Kind::kConst) {
    return i64(static_cast<int64_t>(a->value) + static_cast<int64_t>(b->value));
  }
  return lop(Op::kAdd, DType::kI64, {std::move(a), std::move(b)});
}

LExprRef mul(LExprRef a, LExprRef b) {
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  if (is_const(a, 0) || is_const(b, 0)) return i64(0);
  if (a->kind == LExpr::Kind::kConst && b->kind == LExpr::Kind::kConst) {
    return i64(static_cast<int64_t>(a->value) * static_cast<int64_t>(b->value));
  }
  return lop(Op::kMul, DType::kI64, {std::move(a), std::move(b)});
}

LExprRef div(LExprRef a, LExprRef b) {
  if (is_const(b, 1)) return a;
  return lop(Op::kDiv, DType::kI64, {std::move(a), std::move(b)});
}

LExprRef mod(LExprRef a, LExprRef b) {
  if (is_const(b, 1)) return i64(0);
  // a - (a / b) * b: the loop IR has no remainder op; the values here are never negative.
  return lop(Op::kSub, DType::kI64, {a, mul(div(a, b), b)});
}

LExprRef conjunction(const std::vector<LExprRef>& conditions) {
  LExprRef all;
  for (const LExprRef& c : conditions) all = all ? lop(Op::kMul, DType::kI64, {all, c}) : c;
  return all;
}

double convert_constant(double v, DType type) {
  const Scalar s = const_scalar(type, v);
  return is_float_type(type) ? s.f : int_to_double(type, s.i);
}

LExprRef cast_to(LExprRef e, DType type) {
  if (e->type == type) return e;
  if (e->kind == LExpr::Kind::kConst) return lconst(type, convert_constant(e->value, type));
  return lop(cast_op(type), type, {std::move(e)});
}

LExprRef size_value(const SizeExpr& e) {
  LExprRef v = i64(e.offset);
  for (const auto& [size, coefficient] : e.terms) v = add(v, mul(i64(coefficient), lsize(size)));
  return v;
}

LExprRef dim_value(const TensorNode& node, size_t d) { return size_value(node.dimension(d)); }

LExprRef extent_value(const IndexVar& index) { return size_value(index.range()); }

LExprRef leading_extent_value(const TensorNode& node, int k) {
  LExprRef extent = i64(1);
  for (size_t d = 0; static_cast<int>(d) < k && d < node.dims.size(); ++d) extent = mul(extent, dim_value(node, d));
  return extent;
}

LExprRef element_count_value(const TensorNode& node) {
  return leading_extent_value(node, static_cast<int>(node.dims.size()));
}

std::vector<LExprRef> strides_of(const TensorNode& node) {
  std::vector<LExprRef> strides(node.dims.size(), i64(1));
  for (size_t d = node.dims.size(); d-- > 1;) strides[d - 1] = mul(strides[d], dim_value(node, d));
  return strides;
}

double neutral(Reduce reduce, DType type) {
  const bool integer = !is_float_type(type);
  if (type == DType::kBool && (reduce == Reduce::kMax || reduce == Reduce::kMin)) return reduce == Reduce::kMin ? 1 : 0;
  const double inf = std::numeric_limits<double>::infinity();
  switch (reduce) {
    case Reduce::kProd: return 1;
    case Reduce::kMax: return integer ? convert_constant(-inf, type) : -inf;  // the type's least value
    case Reduce::kMin: return integer ? convert_constant(inf, type) : inf;    // its greatest
    default: return 0;
  }
}

Op fold_op(Reduce reduce) {
  switch (reduce) {
    case Reduce::kProd: return Op::kMul;
    case Reduce::kMax: return Op::kMax;
    case Reduce::kMin: return Op::kMin;
    default: return Op::kAdd;
  }
}

Op combine_op(Accum accum) {
  switch (accum) {
    case Accum::kAdd: return Op::kAdd;
    case Accum::kSub: return Op::kSub;
    default: return Op::kMul;
  }
}

bool loads_node(const LExprRef& e, int node) {
  if (e->kind == LExpr::Kind::kLoad && e->node == node) return true;
  if (e->offset && loads_node(e->offset, node)) return true;
  for (const LExprRef& a : e->args) {
    if (loads_node(a, node)) return true;
  }
  return false;
}

bool loads_local(const LExprRef& e, int local) {
  if (e->kind == LExpr::Kind::kLocalLoad && e->local == local) return true;
  if (e->offset && loads_local(e->offset, local)) return true;
  for (const LExprRef& a : e->args) {
    if (loads_local(a, local)) return true;
  }
  return false;
}

}  // namespace kiln::ir::lowering
