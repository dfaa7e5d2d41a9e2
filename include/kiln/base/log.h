// Minimal leveled logging to stderr. The level comes from KILN_LOG (error, warn, info, debug);
// the default is warn.
#pragma once

#include <string_view>

#include "kiln/base/status.h"

namespace kiln {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// KILN_LOG parsed: warn when unset or empty; INVALID_ARGUMENT naming the variable and the levels
// for anything else. Device creation and the command line check it first, so a malformed value
// is an error; the logger itself, which cannot fail, then uses warn.
Result<LogLevel> log_level_from_env();

bool log_enabled(LogLevel level);
void log_message(LogLevel level, std::string_view message);

}  // namespace kiln

#define KILN_LOG(level, msg)                                                         \
  do {                                                                               \
    if (::kiln::log_enabled(::kiln::LogLevel::level)) ::kiln::log_message(::kiln::LogLevel::level, (msg)); \
  } while (0)
