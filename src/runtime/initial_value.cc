#include "runtime/initial_value.h"

#include <cmath>
#include <exception>
#include <string>

#include "kiln/base/random.h"
#include "kiln/loop/op_eval.h"

namespace kiln::runtime {

bool initial_value_is_zero(const ir::TensorNode& node) {
  return node.init.kind == ir::Init::Kind::kNone ||
         (node.init.kind == ir::Init::Kind::kValue && node.init.a == 0 && !std::signbit(node.init.a));
}

Status fill_initial_value(const ir::TensorNode& node, uint64_t seed, HostBytes& bytes, bool zeros_reserved) {
  const int64_t count = node.element_count();
  const auto size = static_cast<size_t>(node.byte_size());
  try {
    bytes = HostBytes(size, HostMemoryAllocator<std::byte>(!(zeros_reserved && initial_value_is_zero(node))));
  } catch (const std::exception&) {  // bad_alloc, length_error: the host has no room for the node
    return resource_exhausted_error("cannot allocate " + std::to_string(size) +
                                    " bytes of host memory for tensor '" + node.name + "'");
  }
  if (initial_value_is_zero(node)) return Status();
  Random random = Random::for_name(seed, node.name);
  for (int64_t i = 0; i < count; ++i) {
    double v = 0;
    switch (node.init.kind) {
      case ir::Init::Kind::kNone: v = 0; break;
      case ir::Init::Kind::kValue: v = node.init.a; break;
      case ir::Init::Kind::kUniform: v = random.uniform(node.init.a, node.init.b); break;
      case ir::Init::Kind::kNormal: v = random.normal(node.init.a, node.init.b); break;
    }
    std::byte* at = bytes.data() + i * ir::dtype_size(node.dtype);
    ir::Scalar value;
    if (ir::is_float_type(node.dtype)) {
      value.f = v;  // rounded to the type (f32, f16, bf16: to nearest even) as it is stored
    } else {
      // A value fits its type (declarations check it); a draw (i32's only) is rounded down and
      // clamped to the type's range.
      value.i = ir::saturate_int(node.dtype, node.init.kind == ir::Init::Kind::kValue ? v : std::floor(v));
    }
    ir::store_scalar(node.dtype, value, at);
  }
  return Status();
}

}  // namespace kiln::runtime
