#include "tools/value_trace.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <new>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

namespace kiln::tools {

namespace {

// In the file's key order, so that a point's indices print as they were written.
using Json = nlohmann::ordered_json;

// What kiln reads one step at a time.
constexpr size_t kReadStep = size_t{1} << 20;
// Deeper nesting than the format's (a run's entries' lines' reads: 5 levels) is refused before
// parsing, so that "[[[[..." costs neither time nor stack.
constexpr size_t kMaxDepth = 64;
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// A JSON error's text, which quotes what it read (perhaps not UTF-8): every byte outside
// printable ASCII as \xHH.
std::string ascii(std::string_view text) {
  std::string out;
  for (char c : printable(text, 200)) {
    if (static_cast<unsigned char>(c) < 0x80) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      out += hex;
    }
  }
  return out;
}

// What a value is, for "expected X, got Y".
std::string describe(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case Json::value_t::string: return "\"" + printable(j.get_ref<const std::string&>(), 40) + "\"";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_float: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, j.get<double>());
      return std::string(buf, r.ptr);
    }
    default: return "a binary value";
  }
}

// The largest nesting of arrays and objects in `text`, counting only brackets outside strings;
// stops counting once past `limit`.
size_t nesting(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// One line of the file, being checked: errors name FILE:LINE and the field.
class Line {
 public:
  Line(const std::string& path, size_t number) : where_(path + ":" + std::to_string(number)) {}

  Status error(const std::string& field, const std::string& message) const {
    return invalid_argument_error(where_ + ": " + (field.empty() ? "" : field + ": ") + message);
  }

  // `text` parsed, or an error that says where and why it is not JSON.
  Result<Json> parse(const std::string& text) const {
    if (text.find_first_not_of(" \t\r") == std::string::npos) {
      return error("", "an empty line (every line of a value trace holds one JSON object)");
    }
    if (nesting(text, kMaxDepth) > kMaxDepth) {
      return error("", "invalid JSON: nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    try {
      return Json::parse(text);
    } catch (const Json::parse_error& e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ..."
      std::string what = e.what();
      const size_t colon = what.find(": ", what.find("column "));
      if (colon != std::string::npos) what = what.substr(colon + 2);
      return invalid_argument_error(where_ + ":" + std::to_string(e.byte) + ": invalid JSON: " + ascii(what));
    } catch (const Json::exception& e) {  // a number too large for a double
      std::string what = e.what();
      const size_t bracket = what.find("] ");
      if (bracket != std::string::npos) what = what.substr(bracket + 2);
      return error("", "invalid JSON: " + ascii(what));
    } catch (const std::bad_alloc&) {
      return resource_exhausted_error(where_ + ": no memory to parse a line of " + std::to_string(text.size()) +
                                      " bytes");
    }
  }

  Result<const Json*> member(const Json& object, const std::string& field, const char* key) const {
    auto it = object.find(key);
    if (it == object.end()) return error(field, std::string("no \"") + key + "\"");
    return &*it;
  }

  Result<std::string> string(const Json& object, const std::string& field, const char* key) const {
    KILN_ASSIGN_OR_RETURN(const Json* j, member(object, field, key));
    if (!j->is_string()) return error(join(field, key), "expected a string, got " + describe(*j));
    return j->get<std::string>();
  }

  // An integer from `min` to kMaxInt.
  Result<int64_t> integer(const Json& j, const std::string& field, int64_t min) const {
    if (j.is_number_unsigned() && j.get<uint64_t>() <= uint64_t(kMaxInt)) return int64_t(j.get<uint64_t>());
    if (j.is_number_integer() && !j.is_number_unsigned() && j.get<int64_t>() >= min) return j.get<int64_t>();
    return error(field, std::string("expected ") + (min == 0 ? "a non-negative integer" : "an integer") +
                            (min == 0 ? " up to " : " from -2^63 to ") + std::to_string(kMaxInt) +
                            ", got " + describe(j));
  }
  Result<int64_t> integer(const Json& object, const std::string& field, const char* key, int64_t min) const {
    KILN_ASSIGN_OR_RETURN(const Json* j, member(object, field, key));
    return integer(*j, join(field, key), min);
  }
  Result<uint64_t> count(const Json& object, const std::string& field, const char* key) const {
    KILN_ASSIGN_OR_RETURN(const Json* j, member(object, field, key));
    if (j->is_number_unsigned()) return j->get<uint64_t>();
    return error(join(field, key), "expected a non-negative integer, got " + describe(*j));
  }

  // A number, or one of "nan", "inf", "-inf".
  Result<TraceNumber> number(const Json& j, const std::string& field) const {
    char buf[32];
    if (j.is_number_float()) {
      const double d = j.get<double>();
      auto r = std::to_chars(buf, buf + sizeof buf, d);
      return TraceNumber{d, std::string(buf, r.ptr)};
    }
    if (j.is_number_unsigned()) return TraceNumber{double(j.get<uint64_t>()), std::to_string(j.get<uint64_t>())};
    if (j.is_number_integer()) return TraceNumber{double(j.get<int64_t>()), std::to_string(j.get<int64_t>())};
    if (j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      if (s == "nan") return TraceNumber{std::numeric_limits<double>::quiet_NaN(), s};
      if (s == "inf") return TraceNumber{std::numeric_limits<double>::infinity(), s};
      if (s == "-inf") return TraceNumber{-std::numeric_limits<double>::infinity(), s};
    }
    return error(field, "expected a number or \"nan\", \"inf\", \"-inf\", got " + describe(j));
  }
  Result<TraceNumber> number(const Json& object, const std::string& field, const char* key) const {
    KILN_ASSIGN_OR_RETURN(const Json* j, member(object, field, key));
    return number(*j, join(field, key));
  }

  Result<const Json::array_t*> array(const Json& object, const std::string& field, const char* key) const {
    KILN_ASSIGN_OR_RETURN(const Json* j, member(object, field, key));
    if (!j->is_array()) return error(join(field, key), "expected an array, got " + describe(*j));
    return &j->get_ref<const Json::array_t&>();
  }
  Status expect_object(const Json& j, const std::string& field, const char* what) const {
    if (j.is_object()) return Status();
    return error(field, std::string("expected an object (") + what + "), got " + describe(j));
  }

  static std::string join(const std::string& field, const char* key) {
    return field.empty() ? key : field + "." + key;
  }
  static std::string at(const std::string& field, const char* key, size_t i) {
    return join(field, key) + "[" + std::to_string(i) + "]";
  }

 private:
  std::string where_;
};

Result<TraceSummary> parse_summary(const Line& l, const Json& j, const std::string& f) {
  KILN_RETURN_IF_ERROR(l.expect_object(j, f, "a tensor summary"));
  TraceSummary s;
  KILN_ASSIGN_OR_RETURN(s.name, l.string(j, f, "name"));
  KILN_ASSIGN_OR_RETURN(s.dtype, l.string(j, f, "dtype"));
  KILN_ASSIGN_OR_RETURN(const Json::array_t* shape, l.array(j, f, "shape"));
  for (size_t i = 0; i < shape->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t d, l.integer((*shape)[i], Line::at(f, "shape", i), 0));
    s.shape.push_back(d);
  }
  for (auto [key, target] : {std::pair{"min", &s.min}, std::pair{"max", &s.max}, std::pair{"mean", &s.mean}}) {
    KILN_ASSIGN_OR_RETURN(const Json* v, l.member(j, f, key));
    if (v->is_null()) continue;
    KILN_ASSIGN_OR_RETURN(*target, l.number(*v, Line::join(f, key)));
  }
  KILN_ASSIGN_OR_RETURN(s.nans, l.count(j, f, "nans"));
  KILN_ASSIGN_OR_RETURN(s.infs, l.count(j, f, "infs"));
  return s;
}

Result<TracePoint> parse_point(const Line& l, const Json& j, const std::string& f) {
  KILN_RETURN_IF_ERROR(l.expect_object(j, f, "a point of the statement"));
  TracePoint p;
  KILN_ASSIGN_OR_RETURN(const Json* indices, l.member(j, f, "indices"));
  KILN_RETURN_IF_ERROR(l.expect_object(*indices, Line::join(f, "indices"), "index names and values"));
  for (const auto& [name, value] : indices->items()) {
    KILN_ASSIGN_OR_RETURN(int64_t v, l.integer(value, Line::join(f, "indices") + "." + printable(name, 40), -kMaxInt - 1));
    p.indices.push_back({name, v});
  }
  KILN_ASSIGN_OR_RETURN(const Json::array_t* reads, l.array(j, f, "reads"));
  for (size_t i = 0; i < reads->size(); ++i) {
    const std::string rf = Line::at(f, "reads", i);
    KILN_RETURN_IF_ERROR(l.expect_object((*reads)[i], rf, "a reference and its value"));
    TraceRead r;
    KILN_ASSIGN_OR_RETURN(r.ref, l.string((*reads)[i], rf, "ref"));
    KILN_ASSIGN_OR_RETURN(r.value, l.number((*reads)[i], rf, "value"));
    p.reads.push_back(std::move(r));
  }
  KILN_ASSIGN_OR_RETURN(p.value, l.number(j, f, "value"));
  return p;
}

Result<TraceEntry> parse_entry(const Line& l, const Json& j, const std::string& f, uint64_t lines_per_statement) {
  KILN_RETURN_IF_ERROR(l.expect_object(j, f, "a statement or a call"));
  TraceEntry e;
  KILN_ASSIGN_OR_RETURN(std::string kind, l.string(j, f, "kind"));
  if (kind != "statement" && kind != "call") {
    return l.error(Line::join(f, "kind"), "expected \"statement\" or \"call\", got \"" + printable(kind, 40) + "\"");
  }
  KILN_ASSIGN_OR_RETURN(e.file, l.string(j, f, "file"));
  KILN_ASSIGN_OR_RETURN(e.line, l.integer(j, f, "line", 0));
  KILN_ASSIGN_OR_RETURN(e.text, l.string(j, f, "text"));
  if (kind == "call") {
    e.kind = TraceEntry::Kind::kCall;
    KILN_ASSIGN_OR_RETURN(e.function, l.string(j, f, "function"));
    for (auto [key, target] : {std::pair{"inputs", &e.inputs}, std::pair{"outputs", &e.outputs}}) {
      KILN_ASSIGN_OR_RETURN(const Json::array_t* list, l.array(j, f, key));
      for (size_t i = 0; i < list->size(); ++i) {
        KILN_ASSIGN_OR_RETURN(TraceSummary s, parse_summary(l, (*list)[i], Line::at(f, key, i)));
        target->push_back(std::move(s));
      }
    }
    return e;
  }
  KILN_ASSIGN_OR_RETURN(e.target, l.string(j, f, "target"));
  KILN_ASSIGN_OR_RETURN(const Json::array_t* lines, l.array(j, f, "lines"));
  if (lines->size() > lines_per_statement) {
    return l.error(Line::join(f, "lines"), std::to_string(lines->size()) + " lines, more than the header's " +
                                               "lines_per_statement (" + std::to_string(lines_per_statement) + ")");
  }
  for (size_t i = 0; i < lines->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(TracePoint p, parse_point(l, (*lines)[i], Line::at(f, "lines", i)));
    e.points.push_back(std::move(p));
  }
  if (auto it = j.find("truncated"); it != j.end()) {
    if (!it->is_boolean()) return l.error(Line::join(f, "truncated"), "expected true or false, got " + describe(*it));
    e.truncated = it->get<bool>();
  }
  return e;
}

}  // namespace

std::string printable(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max) return out + "...";
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool TraceNumber::finite() const { return std::isfinite(value); }

Result<ValueTraceReader> ValueTraceReader::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  ValueTraceReader reader(std::move(file));
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, reader.next_line());
  const Line l(path, 1);
  const std::string expected = "a value trace starts with the header {\"kiln_value_trace\": 1, \"lines_per_statement\": N}";
  if (!text) return l.error("", "the file is empty; " + expected);
  KILN_ASSIGN_OR_RETURN(Json header, l.parse(*text));
  if (!header.is_object() || !header.contains("kiln_value_trace")) {
    return l.error("", "not a value trace: " + expected);
  }
  KILN_ASSIGN_OR_RETURN(uint64_t version, l.count(header, "", "kiln_value_trace"));
  if (version != 1) {
    return l.error("kiln_value_trace", "version " + std::to_string(version) + "; this kiln reads version 1");
  }
  KILN_ASSIGN_OR_RETURN(reader.lines_per_statement_, l.count(header, "", "lines_per_statement"));
  return reader;
}

Result<std::optional<std::string>> ValueTraceReader::next_line() {
  size_t scanned = start_;  // bytes of buffer_ from start_ on known to hold no '\n'
  while (true) {
    if (size_t nl = buffer_.find('\n', scanned); nl != std::string::npos) {
      std::string line = buffer_.substr(start_, nl - start_);
      start_ = nl + 1;
      ++line_;
      return std::optional<std::string>(std::move(line));
    }
    if (buffer_.size() - start_ > kMaxValueTraceLineBytes) {
      return Line(path(), line_ + 1).error("", "a line longer than " + std::to_string(kMaxValueTraceLineBytes >> 20) +
                                                   " MiB (it does not end there)");
    }
    if (end_of_file_) {
      if (start_ == buffer_.size()) return std::optional<std::string>();
      return Line(path(), line_ + 1).error("", "the last line does not end with a newline: the file is truncated");
    }
    buffer_.erase(0, start_);  // what was handed out, once per read
    start_ = 0;
    scanned = buffer_.size();
    KILN_ASSIGN_OR_RETURN(std::string more, file_.read(kReadStep));
    end_of_file_ = more.size() < kReadStep;
    buffer_ += more;
  }
}

Result<std::optional<TraceRun>> ValueTraceReader::next() {
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, next_line());
  if (!text) return std::optional<TraceRun>();
  const Line l(path(), line_);
  KILN_ASSIGN_OR_RETURN(Json j, l.parse(*text));
  text->clear();
  text->shrink_to_fit();
  KILN_RETURN_IF_ERROR(l.expect_object(j, "", "a routine run"));
  TraceRun r;
  r.file_line = line_;
  KILN_ASSIGN_OR_RETURN(r.run, l.count(j, "", "run"));
  if (previous_run_ && r.run <= previous_run_->first) {
    return l.error("run", std::to_string(r.run) + " after run " + std::to_string(previous_run_->first) +
                              " (line " + std::to_string(previous_run_->second) +
                              "): run ids increase through the file");
  }
  KILN_ASSIGN_OR_RETURN(r.routine, l.string(j, "", "routine"));
  KILN_ASSIGN_OR_RETURN(r.stream, l.string(j, "", "stream"));
  KILN_ASSIGN_OR_RETURN(r.device, l.string(j, "", "device"));
  KILN_ASSIGN_OR_RETURN(r.run_number, l.count(j, "", "run_number"));
  KILN_ASSIGN_OR_RETURN(r.begin_ns, l.integer(j, "", "begin_ns", 0));
  KILN_ASSIGN_OR_RETURN(r.end_ns, l.integer(j, "", "end_ns", 0));
  if (r.end_ns < r.begin_ns) {
    return l.error("end_ns", std::to_string(r.end_ns) + " is before begin_ns " + std::to_string(r.begin_ns));
  }
  KILN_ASSIGN_OR_RETURN(const Json::array_t* entries, l.array(j, "", "entries"));
  for (size_t i = 0; i < entries->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(TraceEntry e, parse_entry(l, (*entries)[i], Line::at("", "entries", i), lines_per_statement_));
    r.entries.push_back(std::move(e));
  }
  previous_run_ = {r.run, line_};
  return std::optional<TraceRun>(std::move(r));
}

}  // namespace kiln::tools
