// Formatting of diagnostics (kiln/lang/diagnostics.h).
#include "kiln/lang/diagnostics.h"

#include <algorithm>

#include "lang/lexer.h"

namespace kiln::lang {

namespace {

// Quoted lines longer than this are cut to a window around the column.
constexpr size_t kMaxQuote = 160;

// Length of the valid UTF-8 sequence of a printable character at s[0], or 0: C1 control
// characters (U+0080..U+009F) are not printable.
size_t printable_utf8_length(std::string_view s) {
  const size_t n = utf8_length(s);
  if (n == 2 && static_cast<unsigned char>(s[0]) == 0xC2 && static_cast<unsigned char>(s[1]) < 0xA0) return 0;
  return n;
}

// The line holding `line_number` (1-based), without its newline; false if there is none.
bool find_line(std::string_view text, int line_number, std::string_view* line) {
  if (line_number <= 0) return false;
  size_t start = 0;
  for (int l = 1; l < line_number; ++l) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return false;
    start = nl + 1;
  }
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  *line = text.substr(start, end - start);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return true;
}

}  // namespace

std::string format_diagnostic(std::string_view file_name, std::string_view text,
                              const ir::Diagnostic& d) {
  std::string out(file_name);
  std::string_view line;
  if (d.loc.line <= 0 || !find_line(text, d.loc.line, &line)) {
    if (d.loc.line > 0) out += ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.column);
    return out + ": error: " + d.message + "\n";
  }
  out += ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.column) + ": error: " +
         d.message + "\n";
  // The column as a byte offset into the line (it may point just past its end).
  size_t column = static_cast<size_t>(std::max(d.loc.column, 1)) - 1;
  column = std::min(column, line.size());
  // A window of the line around the column, starting on a character boundary.
  size_t begin = 0, end = line.size();
  if (line.size() > kMaxQuote) {
    begin = column > kMaxQuote / 2 ? column - kMaxQuote / 2 : 0;
    while (begin > 0 && (static_cast<unsigned char>(line[begin]) & 0xC0) == 0x80) --begin;
    end = std::min(line.size(), begin + kMaxQuote);
  }
  std::string quote = begin > 0 ? "..." : "";
  std::string caret(quote.size(), ' ');
  for (size_t i = begin; i < end;) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    size_t n = 1;
    std::string shown;
    if (c == '\t') {
      shown = "\t";
    } else if (c >= 0x20 && c < 0x7F) {
      shown = std::string(1, static_cast<char>(c));
    } else if (c >= 0x80 && (n = printable_utf8_length(line.substr(i))) > 0) {
      shown = std::string(line.substr(i, n));
    } else {
      n = 1;
      shown = "?";
    }
    quote += shown;
    if (i < column) caret += c == '\t' ? '\t' : ' ';
    i += n;
  }
  if (end < line.size()) quote += "...";
  return out + quote + "\n" + caret + "^\n";
}

std::string format_diagnostics(std::string_view file_name, std::string_view text,
                               const std::vector<ir::Diagnostic>& diagnostics) {
  std::string out;
  for (const ir::Diagnostic& d : diagnostics) out += format_diagnostic(file_name, text, d);
  return out;
}

}  // namespace kiln::lang
