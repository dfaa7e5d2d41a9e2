#include "kiln/base/log.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "kiln/base/settings.h"

namespace kiln {

namespace {

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}

void write_stderr(std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  // One write(2) in the normal case, so lines from different threads do not interleave; the loop
  // only finishes a short write.
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string format_line(LogLevel level, std::string_view message) {
  std::string line = "kiln: ";
  line += level_name(level);
  line += ": ";
  line += message;
  line += '\n';
  return line;
}

LogLevel current_level() {
  // Read once, with thread-safe initialization; a malformed value was reported by whoever
  // checked log_level_from_env() and is logged at warn.
  static const LogLevel level = [] {
    Result<LogLevel> parsed = log_level_from_env();
    return parsed.ok() ? *parsed : LogLevel::kWarn;
  }();
  return level;
}

}  // namespace

Result<LogLevel> log_level_from_env() {
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> value, setting_choice("KILN_LOG"));
  if (!value) return LogLevel::kWarn;
  for (LogLevel level : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug}) {
    if (*value == level_name(level)) return level;
  }
  return internal_error("KILN_LOG='" + *value + "' has no log level");
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(current_level());
}

void log_message(LogLevel level, std::string_view message) {
  write_stderr(format_line(level, message));
}

}  // namespace kiln
