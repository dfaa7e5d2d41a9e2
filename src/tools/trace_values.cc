#include "tools/trace_values.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "base/suggest.h"
#include "tools/value_trace.h"

namespace kiln::tools {

namespace {

// The most line numbers an error about --statement lists.
constexpr size_t kListedLines = 20;

Failure failure(const Status& status) {
  // INVALID_ARGUMENT: something wrong in the file's contents; the rest (missing, a directory,
  // no permission, an I/O error): the file cannot be read.
  if (status.code() == StatusCode::kInvalidArgument) return invalid_input(status.message());
  return {kExitRuntime, "kiln: cannot read the value trace: " + status.to_string(), std::nullopt};
}

// "moons.kiln:14".
std::string location(const TraceEntry& e) {
  return (e.file.empty() ? "<program>" : printable(e.file)) + ":" + std::to_string(e.line);
}

// "1st", "2nd", "3rd", "4th", ..., "11th", "21st".
std::string ordinal(uint64_t n) {
  const uint64_t tens = n % 100, ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// run 7: routine train (4th run) on stream "stream 0" (cpu), 0.412 ms
void print_run(std::FILE* out, const TraceRun& r) {
  std::fprintf(out, "run %llu: routine %s (%s run) on stream \"%s\" (%s), %.3f ms\n",
               static_cast<unsigned long long>(r.run), printable(r.routine).c_str(), ordinal(r.run_number + 1).c_str(),
               printable(r.stream).c_str(), printable(r.device).c_str(), double(r.end_ns - r.begin_ns) / 1e6);
}

// "b=0 j=1 k=0".
std::string indices(const TracePoint& p) {
  std::string out;
  for (const auto& [name, value] : p.indices) out += (out.empty() ? "" : " ") + printable(name) + "=" + std::to_string(value);
  return out;
}

// "b=0 j=1 k=0  x[b, k]=0.5  w1[k, j]=-0.25  -> 1.25".
std::string point_line(const TracePoint& p) {
  std::string out = indices(p);
  for (const TraceRead& r : p.reads) out += (out.empty() ? "" : "  ") + printable(r.ref) + "=" + r.value.text;
  return out + (out.empty() ? "-> " : "  -> ") + p.value.text;
}

// "a f32[4, 8]  min -1.5 max 2 mean 0.125  nans 3".
std::string summary_line(const TraceSummary& s) {
  std::string out = printable(s.name) + " " + printable(s.dtype);
  if (!s.shape.empty()) {
    out += "[";
    for (size_t i = 0; i < s.shape.size(); ++i) out += (i ? ", " : "") + std::to_string(s.shape[i]);
    out += "]";
  }
  std::string stats;
  for (const auto& [name, value] : {std::pair{"min", &s.min}, std::pair{"max", &s.max}, std::pair{"mean", &s.mean}}) {
    if (*value) stats += std::string(stats.empty() ? "" : " ") + name + " " + (*value)->text;
  }
  out += "  " + (stats.empty() ? std::string("no finite values") : stats);
  if (s.nans) out += "  nans " + std::to_string(s.nans);
  if (s.infs) out += "  infs " + std::to_string(s.infs);
  return out;
}

void print_call_values(std::FILE* out, const TraceEntry& e, const char* indent) {
  for (const TraceSummary& s : e.inputs) std::fprintf(out, "%sin  %s\n", indent, summary_line(s).c_str());
  for (const TraceSummary& s : e.outputs) std::fprintf(out, "%sout %s\n", indent, summary_line(s).c_str());
}

void print_entry(std::FILE* out, const TraceEntry& e) {
  std::fprintf(out, "  %s  %s\n", location(e).c_str(), printable(e.text).c_str());
  if (e.kind == TraceEntry::Kind::kCall) return print_call_values(out, e, "    ");
  for (const TracePoint& p : e.points) std::fprintf(out, "    %s\n", point_line(p).c_str());
  if (e.truncated) {
    std::fprintf(out, "    ... (%zu shown, more points ran than were logged)\n", e.points.size());
  } else if (e.points.empty()) {
    std::fprintf(out, "    (no point ran)\n");
  }
}

bool produced_nan_or_infinity(const TraceEntry& e, size_t* point) {
  if (e.kind == TraceEntry::Kind::kCall) {
    return std::any_of(e.outputs.begin(), e.outputs.end(), [](const TraceSummary& s) { return s.nans || s.infs; });
  }
  for (size_t i = 0; i < e.points.size(); ++i) {
    if (!e.points[i].value.finite()) {
      *point = i;
      return true;
    }
  }
  return false;
}

// FILE:LINE: first NaN or infinity, the statement, where it happened and what it read.
void print_first_nan(std::FILE* out, const std::string& path, const TraceRun& r, size_t entry, size_t point) {
  const TraceEntry& e = r.entries[entry];
  print_run(out, r);
  std::fprintf(out, "%s: first NaN or infinity\n  %s\n", location(e).c_str(), printable(e.text).c_str());
  std::string json_path = "entries[" + std::to_string(entry) + "]";
  if (e.kind == TraceEntry::Kind::kCall) {
    print_call_values(out, e, "    ");
  } else {
    const TracePoint& p = e.points[point];
    json_path += ".lines[" + std::to_string(point) + "]";
    if (!p.indices.empty()) std::fprintf(out, "  at %s\n", indices(p).c_str());
    for (const TraceRead& read : p.reads) {
      std::fprintf(out, "    %s = %s\n", printable(read.ref).c_str(), read.value.text.c_str());
    }
    std::fprintf(out, "    -> %s\n", p.value.text.c_str());
  }
  std::fprintf(out, "  (%s:%zu, %s)\n", printable(path).c_str(), r.file_line, json_path.c_str());
}

// The statements --first-nan searched that ran more points than were logged (the trace's
// lines_per_statement, KILN_TRACE_LINES when it was written): a NaN or infinity among the points
// not logged would have come before the one found, and would not show. Kept by location, each
// with the first run it was cut off in and how many runs cut it off.
class CutOffStatements {
 public:
  void add(const TraceRun& r, const TraceEntry& e) {
    if (e.kind != TraceEntry::Kind::kStatement || !e.truncated) return;
    const std::string where = location(e);
    for (Statement& s : statements_) {
      if (s.location == where) {
        ++s.runs;
        return;
      }
    }
    statements_.push_back({where, r.run, 1});
  }

  // "warning: ..." naming the statements and KILN_TRACE_LINES; nothing when none was cut off.
  // `found`: after a hit (it may not be the first), else after "no NaN or infinity".
  void print(std::FILE* out, uint64_t lines_per_statement, bool found) const {
    if (statements_.empty()) return;
    const std::string logged = "the " + std::to_string(lines_per_statement) + " each logged";
    if (found) {
      std::fprintf(out,
                   "warning: this may not be the first NaN or infinity: statements before it ran more points than\n"
                   "  %s (KILN_TRACE_LINES), and one not logged may have come first:\n",
                   logged.c_str());
    } else {
      std::fprintf(out,
                   "warning: statements ran more points than %s (KILN_TRACE_LINES), and a NaN\n"
                   "  or infinity may be among those not logged:\n",
                   logged.c_str());
    }
    for (size_t i = 0; i < statements_.size() && i < kListedCutOff; ++i) {
      const Statement& s = statements_[i];
      std::fprintf(out, "    %s (run %llu%s)\n", s.location.c_str(), static_cast<unsigned long long>(s.first_run),
                   s.runs == 1 ? "" : (" and " + std::to_string(s.runs - 1) + " later run" + (s.runs == 2 ? "" : "s")).c_str());
    }
    if (statements_.size() > kListedCutOff) {
      std::fprintf(out, "    ... and %zu more statements\n", statements_.size() - kListedCutOff);
    }
    std::fprintf(out, "  Run again with KILN_TRACE_LINES=0 to log every point.\n");
  }

 private:
  // The most statements the warning lists.
  static constexpr size_t kListedCutOff = 10;
  struct Statement {
    std::string location;
    uint64_t first_run;
    uint64_t runs;
  };
  std::vector<Statement> statements_;
};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + printable(n);
  return out;
}

}  // namespace

std::optional<Failure> print_value_trace(const Options& o, std::FILE* out) {
  Result<ValueTraceReader> reader = ValueTraceReader::open(o.values_file);
  if (!reader.ok()) return failure(reader.status());
  std::vector<std::string> routines;  // every routine with a run, in the order first seen
  std::set<int64_t> lines;            // the lines of the entries of the runs kept
  uint64_t runs = 0;                  // runs kept (of the --routine routines)
  bool printed = false;
  CutOffStatements cut_off;  // of the entries --first-nan searched
  while (true) {
    Result<std::optional<TraceRun>> next = reader->next();
    if (!next.ok()) return failure(next.status());
    if (!*next) break;
    const TraceRun& r = **next;
    if (std::find(routines.begin(), routines.end(), r.routine) == routines.end()) routines.push_back(r.routine);
    if (!o.routines.empty() && std::find(o.routines.begin(), o.routines.end(), r.routine) == o.routines.end()) {
      continue;
    }
    ++runs;
    bool any = false;
    for (const TraceEntry& e : r.entries) {
      lines.insert(e.line);
      any = any || o.statement == 0 || uint64_t(e.line) == o.statement;
    }
    if (o.statement != 0 && !any) continue;
    if (o.first_nan) {
      for (size_t i = 0; i < r.entries.size(); ++i) {
        size_t point = 0;
        if (o.statement != 0 && uint64_t(r.entries[i].line) != o.statement) continue;
        if (produced_nan_or_infinity(r.entries[i], &point)) {
          print_first_nan(out, o.values_file, r, i, point);
          cut_off.print(out, reader->lines_per_statement(), /*found=*/true);
          return std::nullopt;
        }
        cut_off.add(r, r.entries[i]);
      }
      continue;
    }
    if (printed) std::fputc('\n', out);
    printed = true;
    print_run(out, r);
    for (const TraceEntry& e : r.entries) {
      if (o.statement == 0 || uint64_t(e.line) == o.statement) print_entry(out, e);
    }
    if (std::ferror(out)) return std::nullopt;  // the caller reports the failed write
  }

  const std::string file = printable(o.values_file);
  for (const std::string& name : o.routines) {
    if (std::find(routines.begin(), routines.end(), name) != routines.end()) continue;
    const std::string has = routines.empty() ? "it has no runs" : "it has runs of " + join(routines);
    return Failure{kExitUsage,
                   "kiln: --routine " + printable(name) + ": " + file + " has no run of such a routine (" + has + ")" +
                       did_you_mean(name, routines),
                   std::nullopt};
  }
  if (o.statement != 0 && !lines.count(int64_t(o.statement))) {
    std::string has;
    size_t listed = 0;
    for (int64_t line : lines) {
      if (listed++ == kListedLines) {
        has += ", ...";
        break;
      }
      has += (has.empty() ? "" : ", ") + std::to_string(line);
    }
    const std::string where = o.routines.empty() ? "" : " in the runs of " + join(o.routines);
    return Failure{kExitUsage,
                   "kiln: --statement " + std::to_string(o.statement) + ": " + file +
                       " has no statement or call at that line" + where +
                       (lines.empty() ? " (it has none)" : " (it has lines " + has + ")"),
                   std::nullopt};
  }
  if (o.first_nan) {
    std::fprintf(out, "no NaN or infinity in %llu run%s\n", static_cast<unsigned long long>(runs), runs == 1 ? "" : "s");
    cut_off.print(out, reader->lines_per_statement(), /*found=*/false);
  } else if (runs == 0) {
    std::fprintf(out, "no routine runs in %s\n", file.c_str());
  }
  return std::nullopt;
}

}  // namespace kiln::tools
