#include "kiln/base/settings.h"
#include "kiln/runtime/value_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "base/json_text.h"
#include "base/stdout_capture.h"
#include "kiln/base/env.h"
#include "kiln/base/file.h"
#include "kiln/base/time.h"
#include "kiln/ir/printer.h"

namespace kiln::runtime {

// One line a kernel printed: its site and its values as printed (text, so that an i64 or u64
// beyond 2^53 keeps every digit).
struct ValueTrace::Point {
  int site = -1;
  std::vector<std::string> values;
};

struct ValueTrace::Run {
  uint32_t id = 0;
  std::shared_ptr<const void> keep_alive;
  const ir::LoweredProgram* program = nullptr;
  std::string routine, stream, device;
  uint64_t run_number = 0;
  int64_t begin_ns = 0, end_ns = 0;
  bool done = false;
  std::vector<Point> points;  // in the order they arrived (the order the device ran them)
  std::set<int> truncated;    // sites that ran more points than they logged
  std::vector<CallEntry> calls;
};

ValueTrace::ValueTrace() = default;

ValueTrace::~ValueTrace() { (void)stop(); }

Result<std::shared_ptr<ValueTrace>> ValueTrace::start() {
  std::shared_ptr<ValueTrace> trace(new ValueTrace());
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> lines, setting_uint("KILN_TRACE_LINES"));
  if (lines) trace->lines_per_statement_ = static_cast<int64_t>(*lines);
  ValueTrace* raw = trace.get();
  // Line-buffered, stdio writes each line whole: a kernel's line (which a device may write to fd 1
  // directly) then never lands inside another line that stdio holds half-written.
  std::fflush(stdout);
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  // The capture stops (and its thread ends) before the trace it feeds is destroyed.
  Result<std::unique_ptr<StdoutCapture>> capture =
      StdoutCapture::start(ir::kTraceLinePrefix, [raw](std::string_view line) { raw->add_line(line); });
  if (!capture.ok()) return capture.status().annotate("starting a value trace");
  trace->capture_ = std::move(*capture);
  return trace;
}

Status ValueTrace::sync() {
  std::shared_ptr<StdoutCapture> capture;
  {
    std::lock_guard<std::mutex> lock(mu_);
    capture = capture_;
  }
  // Outside the lock: the capture's thread takes it to add the lines sync() waits for.
  return capture ? capture->sync() : Status();
}

Status ValueTrace::stop() {
  std::shared_ptr<StdoutCapture> capture;
  {
    std::lock_guard<std::mutex> lock(mu_);
    capture = std::move(capture_);
  }
  return capture ? capture->stop() : Status();
}

bool ValueTrace::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capture_ != nullptr;
}

size_t ValueTrace::run_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_.size();
}

uint32_t ValueTrace::begin_run(std::shared_ptr<const void> keep_alive, const ir::LoweredProgram* program,
                               const std::string& routine, const std::string& stream,
                               const std::string& device, uint64_t run_number) {
  auto run = std::make_unique<Run>();
  run->keep_alive = std::move(keep_alive);
  run->program = program;
  run->routine = routine;
  run->stream = stream;
  run->device = device;
  run->run_number = run_number;
  run->begin_ns = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  run->id = static_cast<uint32_t>(runs_.size() + 1);
  runs_.push_back(std::move(run));
  return runs_.back()->id;
}

void ValueTrace::end_run(uint32_t run) {
  std::lock_guard<std::mutex> lock(mu_);
  if (run == 0 || run > runs_.size()) return;
  runs_[run - 1]->end_ns = now_ns();
  runs_[run - 1]->done = true;
}

void ValueTrace::add_call(uint32_t run, CallEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (run == 0 || run > runs_.size()) return;
  runs_[run - 1]->calls.push_back(std::move(entry));
}

namespace {

// Reads the decimal integer at the start of `text` and drops it and one following space.
bool take_integer(std::string_view& text, int64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return false;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return true;
}

// A value as printf printed it: a decimal number, or nan / inf with a sign (glibc writes "-nan").
bool take_value(std::string_view& text, std::string& token) {
  size_t end = text.find(' ');
  token = std::string(text.substr(0, end));
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  if (token.empty()) return false;
  char* stop = nullptr;
  (void)std::strtod(token.c_str(), &stop);
  return stop == token.c_str() + token.size();
}

// `token` as an integer of any width a kernel prints (i64, u64), if it is one.
template <typename T>
bool integer_text(const std::string& token, T& value) {
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  return ec == std::errc() && end == token.data() + token.size();
}

// A printed value as JSON: an integer with all its digits, else a number (nan and inf as strings).
void append_printed_value(std::string& out, const std::string& token) {
  int64_t i = 0;
  uint64_t u = 0;
  if (integer_text(token, i)) {
    out += std::to_string(i);
  } else if (integer_text(token, u)) {
    out += std::to_string(u);
  } else {
    append_json_number(out, std::strtod(token.c_str(), nullptr));
  }
}

// An index as printed (an integer; anything else, which a kernel never prints, as its double).
int64_t printed_index(const std::string& token) {
  int64_t i = 0;
  return integer_text(token, i) ? i : static_cast<int64_t>(std::strtod(token.c_str(), nullptr));
}

}  // namespace

void ValueTrace::add_line(std::string_view line) {
  std::string_view prefix = ir::kTraceLinePrefix;
  if (line.substr(0, prefix.size()) != prefix) return;
  line.remove_prefix(prefix.size());
  int64_t run = 0, site = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!take_integer(line, run) || !take_integer(line, site) || run < 1 ||
      run > static_cast<int64_t>(runs_.size())) {
    ++stray_lines_;
    return;
  }
  Run& r = *runs_[static_cast<size_t>(run - 1)];
  if (site < 0 || site >= static_cast<int64_t>(r.program->trace_sites.size())) {
    ++stray_lines_;
    return;
  }
  if (line == "more") {
    r.truncated.insert(static_cast<int>(site));
    return;
  }
  const ir::TraceSite& s = r.program->trace_sites[static_cast<size_t>(site)];
  Point point{static_cast<int>(site), {}};
  std::string value;
  while (!line.empty()) {
    if (!take_value(line, value)) {
      ++stray_lines_;
      return;
    }
    point.values.push_back(value);
  }
  if (point.values.size() != s.indices.size() + s.reads.size() + 1) {
    ++stray_lines_;
    return;
  }
  r.points.push_back(std::move(point));
}

namespace {

void append_location(std::string& out, const ir::LoweredProgram& program, ir::SourceLoc loc,
                     const std::string& text) {
  out += "\"file\": ";
  append_json_string(out, program.program.file);
  out += ", \"line\": " + std::to_string(loc.line) + ", \"text\": ";
  append_json_string(out, text);
}

void append_summaries(std::string& out, const std::vector<ValueTrace::TensorSummary>& tensors) {
  out += '[';
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ValueTrace::TensorSummary& t = tensors[i];
    if (i) out += ", ";
    out += "{\"name\": ";
    append_json_string(out, t.name);
    out += ", \"dtype\": \"" + std::string(ir::dtype_name(t.dtype)) + "\", \"shape\": [";
    for (size_t d = 0; d < t.shape.size(); ++d) out += (d ? ", " : "") + std::to_string(t.shape[d]);
    out += "]";
    for (auto [key, v] : {std::pair{"min", t.min}, std::pair{"max", t.max}, std::pair{"mean", t.mean}}) {
      out += ", \"" + std::string(key) + "\": ";
      if (t.finite > 0) {
        append_json_number(out, v);
      } else {
        out += "null";
      }
    }
    out += ", \"nans\": " + std::to_string(t.nans) + ", \"infs\": " + std::to_string(t.infs) + "}";
  }
  out += ']';
}

}  // namespace

Result<std::string> ValueTrace::json_lines() {
  KILN_RETURN_IF_ERROR(sync().annotate("collecting the value trace"));
  std::lock_guard<std::mutex> lock(mu_);
  return json_lines_locked();
}

Result<std::string> ValueTrace::json_lines_locked() {
  // The most lines an entry may hold: the largest limit, or where there is none, the most logged.
  int64_t most = 0;
  for (const std::unique_ptr<Run>& run : runs_) {
    std::map<int, int64_t> per_site;
    for (const Point& p : run->points) most = std::max(most, ++per_site[p.site]);
    for (const ir::TraceSite& site : run->program->trace_sites) most = std::max(most, site.lines);
  }
  std::string out = "{\"kiln_value_trace\": 1, \"lines_per_statement\": " + std::to_string(most) +
                    ", \"runs\": " + std::to_string(runs_.size()) + ", \"stray_lines\": " +
                    std::to_string(stray_lines_) + "}\n";
  for (const std::unique_ptr<Run>& run : runs_) {
    if (!run->done) continue;
    const ir::LoweredProgram& program = *run->program;
    out += "{\"run\": " + std::to_string(run->id) + ", \"routine\": ";
    append_json_string(out, run->routine);
    out += ", \"stream\": ";
    append_json_string(out, run->stream);
    out += ", \"device\": ";
    append_json_string(out, run->device);
    out += ", \"run_number\": " + std::to_string(run->run_number) +
           ", \"begin_ns\": " + std::to_string(run->begin_ns) + ", \"end_ns\": " + std::to_string(run->end_ns) +
           ", \"entries\": [";
    // Entries in the order written: a call at position p runs before statement p.
    std::vector<std::tuple<int, int, int>> order;  // (2 * statement + 1 or 2 * position, site or -1, call)
    std::set<int> sites(run->truncated);
    for (const Point& p : run->points) sites.insert(p.site);
    for (int site : sites) order.emplace_back(2 * program.trace_sites[static_cast<size_t>(site)].statement + 1, site, -1);
    for (size_t c = 0; c < run->calls.size(); ++c) {
      order.emplace_back(2 * run->calls[c].call->position, -1, static_cast<int>(c));
    }
    std::stable_sort(order.begin(), order.end());
    bool first = true;
    for (const auto& [key, site, call] : order) {
      out += first ? "" : ", ";
      first = false;
      if (call >= 0) {
        const CallEntry& c = run->calls[static_cast<size_t>(call)];
        out += "{\"kind\": \"call\", ";
        append_location(out, program, c.call->loc, ir::print_call(program.program, *c.call));
        out += ", \"function\": ";
        append_json_string(out, c.call->function);
        out += ", \"inputs\": ";
        append_summaries(out, c.inputs);
        out += ", \"outputs\": ";
        append_summaries(out, c.outputs);
        out += "}";
        continue;
      }
      const ir::TraceSite& s = program.trace_sites[static_cast<size_t>(site)];
      out += "{\"kind\": \"statement\", ";
      append_location(out, program, s.loc, s.text);
      out += ", \"target\": ";
      append_json_string(out, s.target);
      out += ", \"lines\": [";
      bool first_line = true;
      for (const Point& p : run->points) {
        if (p.site != site) continue;
        out += first_line ? "" : ", ";
        first_line = false;
        out += "{\"indices\": {";
        size_t v = 0;
        for (size_t i = 0; i < s.indices.size(); ++i, ++v) {
          if (i) out += ", ";
          append_json_string(out, s.indices[i]);
          out += ": " + std::to_string(printed_index(p.values[v]));
        }
        out += "}, \"reads\": [";
        for (size_t i = 0; i < s.reads.size(); ++i, ++v) {
          out += i ? ", {\"ref\": " : "{\"ref\": ";
          append_json_string(out, s.reads[i]);
          out += ", \"value\": ";
          append_printed_value(out, p.values[v]);
          out += "}";
        }
        out += "], \"value\": ";
        append_printed_value(out, p.values[v]);
        out += "}";
      }
      out += "]";
      if (run->truncated.count(site)) out += ", \"truncated\": true";
      out += "}";
    }
    out += "]}\n";  // one line per run
  }
  return out;
}

Status ValueTrace::write_json_lines(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, json_lines());
  Status status = write_output_file(path, text);
  if (!status.ok()) return status.annotate("writing the value trace to '" + path + "'");
  return status;
}

}  // namespace kiln::runtime
