// Trace: what ran on which stream and when, written as a Chrome / Perfetto trace
// (the JSON "traceEvents" format; open it in ui.perfetto.dev or chrome://tracing).
//
// A backend with a trace records every routine and transfer when it runs on its stream (times
// taken on the device's queue, not when it was scheduled), and each build of a program for its
// device (a "compile" event on the thread "compiler", with the driver's build steps as its
// arguments). Recording is thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::runtime {

class Trace {
 public:
  struct Event {
    std::string name;      // the routine or transfer
    std::string category;  // "routine", "transfer", "collective", "compile"
    std::string stream;    // the stream's name (a thread of the trace)
    int thread = 0;        // the stream's ordinal; kCompilerThread for builds
    int64_t begin_ns = 0;  // monotonic clock
    int64_t end_ns = 0;
    // Shown with the event ("args"): a build's steps and their seconds.
    std::vector<std::pair<std::string, std::string>> args;
  };
  static constexpr int kCompilerThread = -1;

  void record(Event event);
  std::vector<Event> events() const;
  // {"traceEvents": [...]} with one complete ("X") event per record and the streams' names.
  std::string json() const;
  // Writes json() to `path` with write_output_file (kiln/base/file.h): a regular file is replaced
  // atomically, a link's target replaced, a device or FIFO written in place. The error names it.
  Status write_json(const std::string& path) const;

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace kiln::runtime
