#include "drivers/cpu/c_units.h"

#include <algorithm>
#include <numeric>

#include "kiln/kernel_abi.h"

namespace kiln::cpu {

CUnits split_units(std::string_view source) {
  constexpr std::string_view kBoundary = KILN_UNIT_BOUNDARY;
  CUnits out;
  std::vector<size_t> starts;  // where each boundary line starts
  for (size_t line = 0; line < source.size();) {
    size_t end = source.find('\n', line);
    if (end == std::string_view::npos) end = source.size();
    if (source.substr(line, end - line) == kBoundary) starts.push_back(line);
    line = end + 1;
  }
  if (starts.empty()) {
    out.common = source;
    return out;
  }
  out.common = source.substr(0, starts[0]);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : source.size();
    out.units.push_back(source.substr(starts[i], end - starts[i]));
  }
  return out;
}

std::vector<std::string> group_units(std::string_view source, size_t jobs, size_t min_bytes) {
  const CUnits split = split_units(source);
  size_t unit_bytes = 0;
  for (std::string_view u : split.units) unit_bytes += u.size();
  const size_t by_size = min_bytes == 0 ? split.units.size() : unit_bytes / min_bytes;
  const size_t count = std::min({std::max<size_t>(jobs, 1), split.units.size(), std::max<size_t>(by_size, 1)});
  if (count <= 1) return {std::string(source)};

  std::vector<size_t> order(split.units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return split.units[a].size() > split.units[b].size(); });
  std::vector<size_t> group_of(split.units.size());
  std::vector<size_t> bytes(count, 0);
  for (size_t u : order) {
    const size_t g = static_cast<size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    group_of[u] = g;
    bytes[g] += split.units[u].size();
  }
  std::vector<std::string> sources(count, std::string(split.common));
  for (size_t u = 0; u < split.units.size(); ++u) sources[group_of[u]] += split.units[u];
  return sources;
}

}  // namespace kiln::cpu
