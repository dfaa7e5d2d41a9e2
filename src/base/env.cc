#include "kiln/base/env.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace kiln {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

Result<std::optional<uint64_t>> env_uint(const char* name, uint64_t min, uint64_t max) {
  std::optional<std::string> value = env_string(name);
  if (!value) return std::optional<uint64_t>();
  auto bad = [&] {
    return invalid_argument_error(std::string(name) + "='" + *value + "' is not an integer in [" +
                                  std::to_string(min) + ", " + std::to_string(max) + "]");
  };
  uint64_t n = 0;
  for (char c : *value) {
    if (c < '0' || c > '9') return bad();
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return bad();  // overflow
    n = n * 10 + digit;
  }
  if (n < min || n > max) return bad();
  return std::optional<uint64_t>(n);
}

Result<std::optional<double>> env_seconds(const char* name, double max) {
  std::optional<std::string> value = env_string(name);
  if (!value) return std::optional<double>();
  // strtod alone would take "inf", "nan", hex and leading spaces: digits and one point only.
  const bool plain = value->find_first_not_of("0123456789.") == std::string::npos &&
                     std::count(value->begin(), value->end(), '.') <= 1 && value->find_first_of("0123456789") != std::string::npos;
  const double seconds = plain ? std::strtod(value->c_str(), nullptr) : 0;
  if (!(seconds > 0 && seconds <= max)) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", max);
    return invalid_argument_error(std::string(name) + "='" + *value + "' is not a number of seconds in (0, " + bound + "]");
  }
  return std::optional<double>(seconds);
}

}  // namespace kiln
