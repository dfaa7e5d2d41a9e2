// Reading a value trace: the JSON-lines file that `kiln run --trace-values FILE` writes (format
// version 1, docs/cli.md#value-trace-files). A reader checks every line against the format as it
// reads it and hands out one routine run at a time, so that memory grows with the longest line,
// not with the file.
//
// What callers may rely on: every failure is a Status, never an exception or a crash. A file
// that cannot be opened or read keeps the system's code (NOT_FOUND, PERMISSION_DENIED, ...);
// anything wrong in what it holds (not JSON, a missing or mistyped field, a truncated last line,
// a line longer than kMaxValueTraceLineBytes, ...) is INVALID_ARGUMENT with a message that starts
// "FILE:LINE: " (LINE counted from 1, the header being line 1), names the field
// ("entries[2].lines[0].value: ...") and says what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/file.h"
#include "kiln/base/status.h"

namespace kiln::tools {

// `text` with control bytes (a terminal's escape sequences, newlines) written as \xHH, cut to
// `max` bytes and "..." when longer: safe to print whatever a file held.
std::string printable(std::string_view text, size_t max = SIZE_MAX);

// The longest line a reader accepts (a routine run is one line, with all of its entries).
inline constexpr size_t kMaxValueTraceLineBytes = size_t{64} << 20;

// A number of the trace: finite, or NaN and the infinities (the strings "nan", "inf", "-inf").
struct TraceNumber {
  double value = 0;
  std::string text;  // how it prints: an integer's digits, a float's shortest form, nan, inf, -inf
  bool finite() const;
};

// One tensor reference of a statement's right side, with the value it read.
struct TraceRead {
  std::string ref;  // "x[b, k]", "inlined h2[b, j]"
  TraceNumber value;
};

// One point of a statement: its indices, what it read and what it stored.
struct TracePoint {
  std::vector<std::pair<std::string, int64_t>> indices;  // in the file's order
  std::vector<TraceRead> reads;
  TraceNumber value;
};

// A tensor argument or output of a call: its type and a summary of its elements.
struct TraceSummary {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::optional<TraceNumber> min, max, mean;  // nullopt: no finite element
  uint64_t nans = 0, infs = 0;
};

// A statement that wrote device memory, or a call of a library function.
struct TraceEntry {
  enum class Kind { kStatement, kCall };
  Kind kind = Kind::kStatement;
  std::string file;  // the program
  int64_t line = 0;  // 0 for programs built in C++
  std::string text;
  // A statement: what it wrote and the points logged.
  std::string target;
  std::vector<TracePoint> points;
  bool truncated = false;  // more points ran than were logged
  // A call.
  std::string function;
  std::vector<TraceSummary> inputs, outputs;
};

// One routine run: one line of the file after the header.
struct TraceRun {
  size_t file_line = 0;  // the line of the trace file that holds it
  uint64_t run = 0;
  std::string routine, stream, device;
  uint64_t run_number = 0;  // how many times the routine ran in its context before
  int64_t begin_ns = 0, end_ns = 0;
  std::vector<TraceEntry> entries;
};

class ValueTraceReader {
 public:
  // Opens `path` and reads its header (line 1).
  static Result<ValueTraceReader> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t lines_per_statement() const { return lines_per_statement_; }
  // The next run in file order; nullopt after the last one.
  Result<std::optional<TraceRun>> next();

 private:
  explicit ValueTraceReader(InputFile file) : file_(std::move(file)) {}
  // The next line without its '\n'; nullopt at the end of the file.
  Result<std::optional<std::string>> next_line();

  InputFile file_;
  std::string buffer_;  // read; from start_ on, not yet handed out
  size_t start_ = 0;
  bool end_of_file_ = false;
  size_t line_ = 0;     // the number of the last line handed out
  uint64_t lines_per_statement_ = 0;
  std::optional<std::pair<uint64_t, size_t>> previous_run_;  // its id and line
};

}  // namespace kiln::tools
