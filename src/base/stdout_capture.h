// Capturing the process's standard output (fd 1) to pick out marked lines: value tracing has
// device kernels (OpenCL printf, the C kernels' printf, from any thread) print lines that begin
// with a marker prefix, and everything else must still reach the real standard output.
//
// What callers may rely on:
// - While a capture is active, fd 1 is a pipe read by the capture's thread. Each line that
//   begins with the prefix is given to the sink, whole (prefix included, without its '\n'), once;
//   a prefix line longer than kMaxLineBytes is cut to its first kMaxLineBytes. Every other byte
//   reaches the original fd 1 unchanged and in the order it was written to fd 1. Lines are
//   reassembled from pieces (stdio's full buffering splits them), and a line that does not begin
//   with the prefix is passed on as soon as that is clear, so memory stays bounded.
// - One capture at a time in a process (fd 1 is one per process).
// - sync() and stop() may be called from any thread but the capture's own (the sink's): the
//   sink must not call them (they would wait for the thread that runs the sink; they refuse with
//   FAILED_PRECONDITION instead of hanging), and it must not write to fd 1 either (that goes
//   back into the pipe the sink's thread is draining).
// - If the real standard output fails (a closed pipe: EPIPE; SIGPIPE is blocked on the capture's
//   thread), the capture keeps draining fd 1 and drops the bytes, so writers never block on it.
// - Bytes written while stop() runs, or by a child process that kept the pipe, may be dropped.
// - sync() and stop() mark their place in the stream with markers, "\x1e" "kiln-capture-...\n"
//   (\x1e: ASCII's record separator), written into the pipe with one write(2) each; the reader
//   takes them out wherever they land (inside another writer's unfinished line too), so output
//   must not forge them. Any other \x1e is ordinary data.
//
// The capture's fds (the pipe's ends, the saved fd 1) are close-on-exec. stop() puts the saved
// fd 1 back with dup2, so later output goes exactly where it went before start().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "kiln/base/status.h"

namespace kiln {

class StdoutCapture {
 public:
  // Called on the capture's reader thread with each captured line (the whole line, prefix
  // included, without its '\n'). Must not call sync() or stop(), nor write to fd 1.
  using LineSink = std::function<void(std::string_view line)>;

  // A prefix line is cut to this many bytes (the prefix counts); the rest of it is dropped.
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;

  // Starts capturing fd 1: fflush(stdout), a pipe replaces fd 1, a reader thread splits what
  // arrives into lines. FAILED_PRECONDITION if a capture is already active in this process; an
  // error naming the failed system call otherwise (e.g. fd 1 closed).
  static Result<std::unique_ptr<StdoutCapture>> start(std::string prefix, LineSink sink);

  // Returns once everything written to fd 1 before the call (including what stdio had buffered
  // in `stdout`, which it flushes) has been delivered to the sink or to the real stdout; a line
  // not yet ended by '\n' goes on waiting for its end (a non-prefix line's bytes are passed on
  // already). Safe from several threads at once. FAILED_PRECONDITION after stop() or from the
  // sink; the reader thread's error if it failed before it met this call's marker.
  Status sync();

  // Flushes stdout, restores the original fd 1, delivers the rest (a last line without '\n' is
  // passed through as is, or given to the sink if it has the prefix), joins the thread.
  // Idempotent (a second call returns the first one's status); the destructor calls it.
  Status stop();

  ~StdoutCapture();
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;

 private:
  StdoutCapture(int saved_fd, int read_fd, int write_fd, std::string prefix, LineSink sink);
  void run_reader();

  const int saved_fd_;  // the original fd 1, put back by stop()
  const int read_fd_;   // the pipe's read end: the reader thread's
  const std::string prefix_;
  const LineSink sink_;
  std::thread thread_;
  bool replaced_fd1_ = false;  // start() got as far as putting the pipe on fd 1

  // Markers (sync, stop) go into the pipe through write_fd_, not through fd 1 (which stop() may
  // restore meanwhile, and then a marker would reach the real stdout), under write_mutex_, so
  // that they arrive in the order of their numbers. write_fd_ is -1 once stop() wrote its marker.
  std::mutex write_mutex_;
  int write_fd_;
  uint64_t next_sync_ = 1;

  // What the reader has seen, for sync(): the number of the last sync marker, and whether it
  // ended (with its error, if any). Never held while the sink runs.
  std::mutex seen_mutex_;
  std::condition_variable seen_cv_;
  uint64_t synced_ = 0;
  bool reader_done_ = false;
  Status reader_status_;

  std::mutex stop_mutex_;
  bool stopped_ = false;
  Status stop_status_;
};

}  // namespace kiln
