#include "ral/collective_types.h"

#include <exception>
#include <span>

#include "kiln/loop/op_eval.h"

namespace kiln::ral::internal {

Combination combination_of(const Collective& c) {
  if (c.type == ir::DType::kBool) {
    return {c.type, c.op == CollectiveOp::kMin ? CollectiveOp::kMin : CollectiveOp::kMax, false};
  }
  if (ir::is_narrow_float(c.type)) return {ir::DType::kF32, c.op, true};
  if (ir::is_integer_type(c.type) && c.op == CollectiveOp::kMean) return {ir::DType::kF64, c.op, true};
  return {c.type, c.op, false};
}

void convert_elements(ir::DType from, ir::DType to, const void* in, void* out, int64_t count) {
  // The language's conversion (a cast), element by element: op_eval holds its exact rules.
  const ir::Op cast = ir::cast_op(to);
  const size_t in_size = ir::dtype_size(from), out_size = ir::dtype_size(to);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  for (int64_t i = 0; i < count; ++i) {
    const ir::Scalar v = ir::load_scalar(from, src + static_cast<size_t>(i) * in_size);
    ir::store_scalar(to, ir::eval_op(cast, to, std::span(&from, 1), std::span(&v, 1)),
                     dst + static_cast<size_t>(i) * out_size);
  }
}

Result<std::vector<std::byte>> staging_buffer(const Collective& c, ir::DType type, int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * ir::dtype_size(type);
  try {
    return std::vector<std::byte>(bytes);
  } catch (const std::exception&) {  // bad_alloc, length_error
    return resource_exhausted_error(c.describe() + ": no host memory for the " + std::to_string(bytes) +
                                    " bytes it combines in " + std::string(ir::dtype_name(type)));
  }
}

namespace {

template <typename T>
void divide(void* data, int64_t count, int ranks) {
  T* v = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(ranks));
}

}  // namespace

void finish_combination(const Collective& c, const Combination& how, void* combined, int ranks) {
  // A mean divides in the type it combined in (f32 or f64 here: integer means are staged in f64).
  if (how.op == CollectiveOp::kMean) {
    if (how.type == ir::DType::kF32) divide<float>(combined, c.count, ranks);
    else if (how.type == ir::DType::kF64) divide<double>(combined, c.count, ranks);
  }
  if (how.staged) convert_elements(how.type, c.type, combined, c.out, c.count);
}

}  // namespace kiln::ral::internal
