// kiln's environment variables, in one table: they are read through it (setting_uint,
// setting_choice), checked all at once before a command runs anything (check_settings), and
// listed by `kiln --help` from it, so that the three never disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

struct Setting {
  const char* name;
  const char* help;  // what it sets and its default, for `kiln --help`
  // A number in [min, max] when max > 0 (a decimal number of seconds in (0, max] when
  // `seconds`); else one of `choices` (case as written) when any; else any text (a path, a command).
  uint64_t min = 0, max = 0;
  std::vector<std::string> choices = {};
  bool seconds = false;
};

// Every KILN_* variable kiln reads, by name.
const std::vector<Setting>& settings();

// The variable `name` (one of settings()) as a number in its range; nullopt when unset or empty.
// INVALID_ARGUMENT for a malformed value: "KILN_CPU_THREADS='abc' is not an integer in [1, 1024]".
Result<std::optional<uint64_t>> setting_uint(const char* name);
// The variable `name` (a `seconds` setting) in seconds; nullopt when unset. INVALID_ARGUMENT
// otherwise: "KILN_COLLECTIVE_TIMEOUT='soon' is not a number of seconds in (0, 86400]".
Result<std::optional<double>> setting_seconds(const char* name);
// The variable `name` as one of its choices (compared without case); nullopt when unset.
// INVALID_ARGUMENT naming the choices otherwise.
Result<std::optional<std::string>> setting_choice(const char* name);

// OK when every variable that is set has a valid value; else the first malformed one's error.
Status check_settings();

}  // namespace kiln
