#include "tools/print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tools/npy.h"

namespace kiln::tools {

namespace {

// Element i of a tensor's bytes, as a double, for printing.
double value_at(ir::DType dtype, std::span<const std::byte> bytes, size_t i) {
  if (dtype == ir::DType::kF32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  if (dtype == ir::DType::kF64) {
    double d;
    std::memcpy(&d, bytes.data() + 8 * i, 8);
    return d;
  }
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

// NaN prints as `nan` whatever its sign bit (printf's `-nan`), as value traces print it.
std::string format_value(ir::DType dtype, double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  if (dtype == ir::DType::kI32) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

void print_tensor(const ir::TensorNode& node, std::span<const std::byte> bytes) {
  const size_t n = bytes.size() / ir::dtype_size(node.dtype);
  auto v = [&](size_t i) { return value_at(node.dtype, bytes, i); };
  std::printf("%s : %s\n", node.name.c_str(), describe(node.dtype, node.dims).c_str());
  const size_t row = node.dims.empty() ? 1 : std::max<size_t>(1, static_cast<size_t>(node.dims.back()));
  if (n <= 64) {
    for (size_t i = 0; i < n; i += row) {
      std::string line = " ";
      for (size_t j = i; j < std::min(n, i + row); ++j) {
        line += ' ';
        line += format_value(node.dtype, v(j));
      }
      std::printf("%s\n", line.c_str());
    }
    return;
  }
  double lo = v(0), hi = v(0), sum = 0;
  for (size_t i = 0; i < n; ++i) {
    lo = std::min(lo, v(i));
    hi = std::max(hi, v(i));
    sum += v(i);
  }
  std::string head = "  ";
  for (size_t i = 0; i < 8; ++i) head += format_value(node.dtype, v(i)) + " ";
  std::printf("%s... (%zu values) min %s max %s mean %s\n", head.c_str(), n,
              format_value(ir::DType::kF64, lo).c_str(), format_value(ir::DType::kF64, hi).c_str(),
              format_value(ir::DType::kF64, sum / double(n)).c_str());
}

std::string milliseconds_text(double ms) {
  // Three significant digits below 1 ms, three decimals above: 0.000812, 0.0123, 0.500, 12.345.
  int decimals = 3;
  if (ms > 0 && ms < 1) decimals = std::min(12, 2 - static_cast<int>(std::floor(std::log10(ms))));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, ms);
  return buf;
}

}  // namespace kiln::tools
