#include "tools/print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/loop/op_eval.h"
#include "tools/npy.h"

namespace kiln::tools {

namespace {

// NaN prints as `nan` whatever its sign bit (printf's `-nan`), as value traces print it.
std::string format_double(double v, int digits) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// An f16 or bf16 value with the fewest digits that read back as it (5 at most for f16, 4 for
// bf16): 0.1 rounded to f16 prints 0.1, not 0.0999755859375. An exponent only where %g with 6
// digits would write one (65504, not 6.55e+04).
std::string format_narrow(ir::DType dtype, double v) {
  if (!std::isfinite(v)) return format_double(v, 6);
  const bool exponent = format_double(v, 6).find('e') != std::string::npos;
  for (int digits = 1; digits < 17; ++digits) {
    const std::string text = format_double(v, digits);
    if ((exponent || text.find('e') == std::string::npos) &&
        ir::round_float(dtype, std::strtod(text.c_str(), nullptr)) == v) {
      return text;
    }
  }
  return format_double(v, 17);
}

// One element: bool as false / true, integers exactly (u64 unsigned), f16 and bf16 as above, f32
// and f64 with 6 significant digits.
std::string format_element(ir::DType dtype, ir::Scalar v) {
  if (dtype == ir::DType::kBool) return v.i != 0 ? "true" : "false";
  if (ir::is_unsigned_type(dtype)) return std::to_string(static_cast<uint64_t>(v.i));
  if (ir::is_integer_type(dtype)) return std::to_string(v.i);
  if (ir::is_narrow_float(dtype)) return format_narrow(dtype, v.f);
  return format_double(v.f, 6);
}

// Whether a < b as values of `dtype` (for the summary's min and max; NaNs are skipped).
bool less(ir::DType dtype, ir::Scalar a, ir::Scalar b) {
  if (ir::is_float_type(dtype)) return a.f < b.f;
  if (ir::is_unsigned_type(dtype)) return static_cast<uint64_t>(a.i) < static_cast<uint64_t>(b.i);
  return a.i < b.i;
}

}  // namespace

void print_tensor(const ir::TensorNode& node, std::span<const std::byte> bytes) {
  const size_t size = ir::dtype_size(node.dtype);
  const size_t n = bytes.size() / size;
  auto v = [&](size_t i) { return ir::load_scalar(node.dtype, bytes.data() + i * size); };
  std::printf("%s : %s\n", node.name.c_str(), describe(node.dtype, node.dims).c_str());
  const size_t row = node.dims.empty() ? 1 : std::max<size_t>(1, static_cast<size_t>(node.dims.back()));
  if (n <= 64) {
    for (size_t i = 0; i < n; i += row) {
      std::string line = " ";
      for (size_t j = i; j < std::min(n, i + row); ++j) {
        line += ' ';
        line += format_element(node.dtype, v(j));
      }
      std::printf("%s\n", line.c_str());
    }
    return;
  }
  // Min and max in the tensor's type (exact for integers), as std::min and std::max keep them (a
  // comparison with NaN is false); the mean in f64.
  const bool is_float = ir::is_float_type(node.dtype);
  ir::Scalar lo = v(0), hi = v(0);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const ir::Scalar x = v(i);
    if (less(node.dtype, x, lo)) lo = x;
    if (less(node.dtype, hi, x)) hi = x;
    sum += is_float ? x.f : ir::int_to_double(node.dtype, x.i);
  }
  std::string head = "  ";
  for (size_t i = 0; i < 8; ++i) head += format_element(node.dtype, v(i)) + " ";
  std::printf("%s... (%zu values) min %s max %s mean %s\n", head.c_str(), n, format_element(node.dtype, lo).c_str(),
              format_element(node.dtype, hi).c_str(), format_double(sum / double(n), 6).c_str());
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
