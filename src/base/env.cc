#include "kiln/base/env.h"

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

}  // namespace kiln
