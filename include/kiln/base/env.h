// Configuration from the environment. Every KILN_* variable is read through here, so that a bad
// value becomes a Status naming the variable, never a crash or a silent default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/base/status.h"

namespace kiln {

// The variable's value, nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);
// An unsigned integer in [min, max]; nullopt when unset. A malformed or out-of-range value is
// INVALID_ARGUMENT: "KILN_CPU_THREADS='abc' is not an integer in [1, 1024]".
Result<std::optional<uint64_t>> env_uint(const char* name, uint64_t min, uint64_t max);
// A number of seconds (decimal, e.g. "60" or "0.5") in (0, max]; nullopt when unset. Anything
// else is INVALID_ARGUMENT: "KILN_COLLECTIVE_TIMEOUT='soon' is not a number of seconds in (0, 86400]".
Result<std::optional<double>> env_seconds(const char* name, double max);

}  // namespace kiln
