#include "runtime/initial_value.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/base/random.h"

namespace kiln::runtime {

void fill_initial_value(const ir::TensorNode& node, uint64_t seed, std::vector<std::byte>& bytes) {
  const int64_t count = node.element_count();
  bytes.assign(static_cast<size_t>(count) * ir::dtype_size(node.dtype), std::byte{0});
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
    if (node.dtype == ir::DType::kF32) {
      float f = static_cast<float>(v);
      std::memcpy(at, &f, sizeof f);
    } else if (node.dtype == ir::DType::kF64) {
      std::memcpy(at, &v, sizeof v);
    } else {
      int32_t n = static_cast<int32_t>(std::clamp(std::floor(v), -2147483648.0, 2147483647.0));
      std::memcpy(at, &n, sizeof n);
    }
  }
}

}  // namespace kiln::runtime
