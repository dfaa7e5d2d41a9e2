// Minimal leveled logging to stderr. The level comes from KILN_LOG (error, warn, info, debug);
// the default is warn.
#pragma once

#include <string_view>

namespace kiln {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, std::string_view message);

}  // namespace kiln

#define KILN_LOG(level, msg)                                                         \
  do {                                                                               \
    if (::kiln::log_enabled(::kiln::LogLevel::level)) ::kiln::log_message(::kiln::LogLevel::level, (msg)); \
  } while (0)
