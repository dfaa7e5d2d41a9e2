// ValueTrace: the values computed inside routines, statement by statement (OCANNL's tracing
// debugger; docs/tracing.md).
//
// Code compiled with `CompileOptions::lower.trace_values` logs, for each statement that writes
// device memory, the indices, the values read and the value stored at its first points (on every
// device through the kernel's printf, since that is all some devices' kernels can do), and for
// each library call a summary of its tensors. A backend created with a ValueTrace
// (BackendOptions::value_trace) gives every run of a traced routine a run id and collects what
// it logged into one entry: routine, stream, device, run number, timestamps, entries.
//
// While a ValueTrace is started it captures the process's standard output: lines of traced
// kernels go into the trace; every other line reaches the real standard output unchanged and
// in order. One ValueTrace at a time per process. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/loop/loop.h"

namespace kiln {
class StdoutCapture;
}

namespace kiln::runtime {

class ValueTrace {
 public:
  // A summary of one tensor of a call (min / max / mean over its finite elements).
  struct TensorSummary {
    std::string name;
    ir::DType dtype = ir::DType::kF32;
    std::vector<int64_t> shape;
    int64_t finite = 0, nans = 0, infs = 0;
    double min = 0, max = 0, mean = 0;  // meaningful when finite > 0
  };
  struct CallEntry {
    const ir::Call* call = nullptr;  // in the run's program
    std::vector<TensorSummary> inputs, outputs;
  };

  // Starts capturing standard output. FAILED_PRECONDITION while another ValueTrace (or capture)
  // is active; INVALID_ARGUMENT for a malformed KILN_TRACE_LINES.
  static Result<std::shared_ptr<ValueTrace>> start();
  // The lines each statement logs per run that the front ends (kiln run, train_moons, the C and
  // Python APIs) compile with (ir::LowerOptions::trace_lines): KILN_TRACE_LINES when start()
  // ran, an integer in [0, 1048576], 0 meaning no limit; 16 when unset.
  int64_t lines_per_statement() const { return lines_per_statement_; }
  ~ValueTrace();
  ValueTrace(const ValueTrace&) = delete;
  ValueTrace& operator=(const ValueTrace&) = delete;

  // Waits until every line printed so far is in the trace. Call it after awaiting the streams.
  Status sync();
  // Stops capturing (after a sync); later runs of traced routines are not recorded. Idempotent.
  Status stop();

  // The trace as JSON lines (docs/tracing.md): a header line, then one line per run that has
  // completed, in run id order.
  Result<std::string> json_lines();
  // Writes json_lines() to `path` like every kiln output file (kiln/base/file.h).
  Status write_json_lines(const std::string& path);
  // Runs recorded so far, completed or not.
  size_t run_count() const;
  // Capturing (between start() and stop()): only then may traced routines run.
  bool active() const;

  // For the runtime (Routine::run_in): a run of routine `routine` of `program` starts on
  // `stream` of `device`; returns its run id. `program` must outlive the trace's use of it
  // (the routine's Code holds it; the run keeps `keep_alive`).
  uint32_t begin_run(std::shared_ptr<const void> keep_alive, const ir::LoweredProgram* program,
                     const std::string& routine, const std::string& stream,
                     const std::string& device, uint64_t run_number);
  void end_run(uint32_t run);
  void add_call(uint32_t run, CallEntry entry);
  // A line a kernel printed (with ir::kTraceLinePrefix), as the capture delivers it.
  void add_line(std::string_view line);

 private:
  struct Point;
  struct Run;
  ValueTrace();
  Result<std::string> json_lines_locked();

  mutable std::mutex mu_;
  std::shared_ptr<StdoutCapture> capture_;  // null once stopped
  std::vector<std::unique_ptr<Run>> runs_;  // index: run id - 1
  uint64_t stray_lines_ = 0;                // lines naming no known run or site
  int64_t lines_per_statement_ = 16;
};

}  // namespace kiln::runtime
