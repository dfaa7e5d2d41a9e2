#include "kiln/runtime/trace.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/json_text.h"
#include "kiln/base/file.h"

namespace kiln::runtime {


void Trace::record(Event event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(event));
}

std::vector<Trace::Event> Trace::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::string Trace::json() const {
  std::vector<Event> events = this->events();
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.begin_ns < b.begin_ns; });
  const int64_t origin = events.empty() ? 0 : events.front().begin_ns;
  std::map<int, std::string> threads;
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  char buf[128];
  for (const Event& e : events) {
    threads.emplace(e.thread, e.stream);
    separator();
    out += "{\"name\": ";
    append_json_string(out, e.name);
    out += ", \"cat\": ";
    append_json_string(out, e.category);
    // Chrome's trace format counts in microseconds; keep sub-microsecond precision.
    std::snprintf(buf, sizeof buf, ", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f",
                  e.thread, (e.begin_ns - origin) / 1e3, (e.end_ns - e.begin_ns) / 1e3);
    out += buf;
    if (!e.args.empty()) {
      out += ", \"args\": {";
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) out += ", ";
        append_json_string(out, e.args[i].first);
        out += ": ";
        append_json_string(out, e.args[i].second);
      }
      out += "}";
    }
    out += "}";
  }
  for (const auto& [tid, name] : threads) {
    separator();
    std::snprintf(buf, sizeof buf, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": ", tid);
    out += buf;
    append_json_string(out, name);
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

Status Trace::write_json(const std::string& path) const {
  Status status = write_output_file(path, json());
  if (!status.ok()) return status.annotate("writing the trace to '" + path + "'");
  return status;
}

}  // namespace kiln::runtime
