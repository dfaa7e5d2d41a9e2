#include "base/stdout_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include "kiln/base/file.h"

namespace kiln {

namespace {

// Markers are whole lines that sync() and stop() write into the pipe; the reader takes them out
// of the stream wherever they land (also inside a line another writer has not finished). They
// begin with ASCII's record separator, which ordinary output does not hold; a \x1e that does not
// start a whole marker is passed on as data.
constexpr char kMarkerStart = '\x1e';
constexpr std::string_view kSyncMarker = "\x1e" "kiln-capture-sync ";  // then the number, '\n'
constexpr std::string_view kStopMarker = "\x1e" "kiln-capture-stop\n";
constexpr size_t kMaxSyncDigits = 19;  // fits a uint64_t

constexpr size_t kReadBytes = 64 * 1024;

// One capture per process: fd 1 is one per process.
std::atomic<bool> g_capture_active{false};
// The capture whose reader runs on this thread, so that sync() and stop() from the sink refuse
// instead of waiting for themselves.
thread_local const StdoutCapture* t_reader_of = nullptr;

struct Marker {
  enum Kind { kNone, kPartial, kSync, kStop } kind = kNone;
  size_t size = 0;
  uint64_t sync = 0;
};

// What `s` (which begins with kMarkerStart) begins with: a whole marker, the start of one that
// has not wholly arrived yet, or none (then its first byte is data).
Marker match_marker(std::string_view s) {
  if (s.starts_with(kStopMarker)) return {Marker::kStop, kStopMarker.size()};
  const bool partial = (s.size() < kStopMarker.size() && kStopMarker.starts_with(s)) ||
                       (s.size() < kSyncMarker.size() && kSyncMarker.starts_with(s));
  if (partial) return {Marker::kPartial};
  if (!s.starts_with(kSyncMarker)) return {};
  uint64_t sync = 0;
  for (size_t i = kSyncMarker.size(); i < s.size(); ++i) {
    const size_t digits = i - kSyncMarker.size();
    if (s[i] == '\n') return digits > 0 ? Marker{Marker::kSync, i + 1, sync} : Marker{};
    if (s[i] < '0' || s[i] > '9' || digits == kMaxSyncDigits) return {};
    sync = sync * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  return {Marker::kPartial};
}

// Writes all of `bytes` to the real stdout: retries EINTR and short writes, waits for room where
// the stdout is non-blocking (EAGAIN). False once it fails for good (EPIPE: SIGPIPE is blocked on
// the reader thread, so a closed pipe is an error here, not the end of the process).
bool write_out(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

// The reader thread's side: takes the markers out of the pipe's bytes, splits the rest into
// lines, gives prefix lines to the sink and writes every other byte to the real stdout.
class LineSplitter {
 public:
  LineSplitter(int out_fd, std::string_view prefix, const StdoutCapture::LineSink& sink)
      : out_fd_(out_fd), prefix_(prefix), sink_(sink), mode_(line_start_mode()) {}

  // Takes bytes read from the pipe. Calls on_sync(n) at sync marker n, once everything before it
  // was delivered. Returns true if it met the stop marker (what follows it is still taken).
  template <typename OnSync>
  bool take(std::string_view bytes, OnSync&& on_sync) {
    std::string joined;  // a marker cut by the previous read, completed
    if (!carry_.empty()) {
      joined = std::move(carry_);
      carry_.clear();
      joined.append(bytes);
      bytes = joined;
    }
    bool stop = false;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t mark = bytes.find(kMarkerStart, pos);
      split(bytes.substr(pos, mark == std::string_view::npos ? std::string_view::npos : mark - pos));
      if (mark == std::string_view::npos) break;
      const Marker marker = match_marker(bytes.substr(mark));
      if (marker.kind == Marker::kPartial) {
        carry_ = bytes.substr(mark);  // at most a marker's length
        break;
      }
      if (marker.kind == Marker::kNone) {
        split(bytes.substr(mark, 1));
        pos = mark + 1;
        continue;
      }
      pos = mark + marker.size;
      if (marker.kind == Marker::kStop) {
        stop = true;
      } else {
        flush();
        on_sync(marker.sync);
      }
    }
    flush();
    return stop;
  }

  // The end of the stream: a cut marker is data after all, and an unfinished line is delivered.
  void finish() {
    split(carry_);
    carry_.clear();
    if (mode_ == Mode::kSink && !line_.empty()) sink_(line_);
    if (mode_ == Mode::kUndecided) out_ += line_;
    line_.clear();
    flush();
  }

 private:
  enum class Mode {
    kUndecided,  // the line so far (line_) is a proper beginning of the prefix
    kSink,       // the line has the prefix: line_ collects it, up to kMaxLineBytes
    kPass,       // the line does not: its bytes go straight to out_
  };

  Mode line_start_mode() const { return prefix_.empty() ? Mode::kSink : Mode::kUndecided; }

  // The line machine, over bytes without markers.
  void split(std::string_view bytes) {
    size_t i = 0;
    while (i < bytes.size()) {
      if (mode_ == Mode::kUndecided) {
        const char c = bytes[i];
        if (c == '\n' || c != prefix_[line_.size()]) {
          // Not a prefix line: what was held back goes first, then the line passes.
          out_ += line_;
          line_.clear();
          mode_ = Mode::kPass;
          continue;
        }
        line_ += c;
        ++i;
        if (line_.size() == prefix_.size()) mode_ = Mode::kSink;
        continue;
      }
      const size_t newline = bytes.find('\n', i);
      const size_t end = newline == std::string_view::npos ? bytes.size() : newline;
      if (mode_ == Mode::kPass) {
        out_.append(bytes.substr(i, end - i));
        if (newline != std::string_view::npos) out_ += '\n';
      } else {
        const size_t room = StdoutCapture::kMaxLineBytes - line_.size();
        line_.append(bytes.substr(i, std::min(room, end - i)));  // the rest of a long line drops
        if (newline != std::string_view::npos) sink_(line_);
      }
      if (newline == std::string_view::npos) break;
      line_.clear();
      mode_ = line_start_mode();
      i = newline + 1;
    }
  }

  void flush() {
    if (!out_.empty() && !out_failed_) out_failed_ = !write_out(out_fd_, out_);
    out_.clear();
  }

  const int out_fd_;
  const std::string_view prefix_;
  const StdoutCapture::LineSink& sink_;
  Mode mode_;
  std::string line_;   // see Mode
  std::string out_;    // bytes for the real stdout, written once per take()
  std::string carry_;  // the beginning of a marker that the next read completes (or not)
  bool out_failed_ = false;  // the real stdout failed: its bytes are dropped from then on
};

int retry_dup2(int from, int to) {
  int rc;
  do {
    rc = ::dup2(from, to);
  } while (rc < 0 && errno == EINTR);
  return rc;
}

}  // namespace

StdoutCapture::StdoutCapture(int saved_fd, int read_fd, int write_fd, std::string prefix,
                             LineSink sink)
    : saved_fd_(saved_fd), read_fd_(read_fd), prefix_(std::move(prefix)), sink_(std::move(sink)),
      write_fd_(write_fd) {}

Result<std::unique_ptr<StdoutCapture>> StdoutCapture::start(std::string prefix, LineSink sink) {
  if (g_capture_active.exchange(true)) {
    return failed_precondition_error("a stdout capture is already active in this process");
  }
  std::fflush(stdout);  // what stdio holds was written before the capture
  // Above the standard fds, so that a closed fd 0 or 2 is not filled with the saved fd 1.
  const int saved = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (saved < 0) {
    const int err = errno;
    g_capture_active = false;
    return errno_error(err, "capturing stdout: fcntl(1, F_DUPFD_CLOEXEC)");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(saved);
    g_capture_active = false;
    return errno_error(err, "capturing stdout: pipe2");
  }
  // From here on the capture owns the fds and the process's one capture; a failure returns it,
  // and its destructor (stop) undoes what was done.
  std::unique_ptr<StdoutCapture> capture(
      new StdoutCapture(saved, fds[0], fds[1], std::move(prefix), std::move(sink)));
  try {
    capture->thread_ = std::thread([c = capture.get()] { c->run_reader(); });
  } catch (const std::system_error& e) {
    return resource_exhausted_error(std::string("capturing stdout: no reader thread: ") + e.what());
  }
  if (retry_dup2(fds[1], STDOUT_FILENO) < 0) return errno_error(errno, "capturing stdout: dup2");
  capture->replaced_fd1_ = true;
  return capture;
}

void StdoutCapture::run_reader() {
  t_reader_of = this;
  // A real stdout that is a closed pipe must fail the write (EPIPE), not kill the process.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

  LineSplitter splitter(saved_fd_, prefix_, sink_);
  auto on_sync = [this](uint64_t sync) {
    {
      std::lock_guard<std::mutex> lock(seen_mutex_);
      synced_ = sync;
    }
    seen_cv_.notify_all();
  };
  Status status;
  std::string buffer(kReadBytes, '\0');
  bool stopped = false;
  while (!stopped) {
    const ssize_t n = ::read(read_fd_, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = errno_error(errno, "capturing stdout: read");
    if (n <= 0) break;  // an error, or every write end closed: nothing more can come
    stopped = splitter.take(std::string_view(buffer.data(), static_cast<size_t>(n)), on_sync);
  }
  if (stopped) {
    // What was already in the pipe behind the stop marker (a write that stop() overtook) still
    // goes out; a writer that keeps the pipe open (a child process) is not waited for.
    ::fcntl(read_fd_, F_SETFL, O_NONBLOCK);
    for (;;) {
      const ssize_t n = ::read(read_fd_, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      splitter.take(std::string_view(buffer.data(), static_cast<size_t>(n)), on_sync);
    }
  }
  splitter.finish();
  {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    reader_done_ = true;
    reader_status_ = status;
  }
  seen_cv_.notify_all();
}

Status StdoutCapture::sync() {
  if (t_reader_of == this) {
    return failed_precondition_error("StdoutCapture::sync called from the capture's own sink");
  }
  std::fflush(stdout);
  uint64_t sync;
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (write_fd_ < 0) return failed_precondition_error("StdoutCapture::sync after stop");
    sync = next_sync_++;
    const std::string marker = std::string(kSyncMarker) + std::to_string(sync) + "\n";
    if (int err = write_all(write_fd_, marker); err != 0) {
      return errno_error(err, "capturing stdout: write of a sync marker");
    }
  }
  std::unique_lock<std::mutex> lock(seen_mutex_);
  seen_cv_.wait(lock, [&] { return synced_ >= sync || reader_done_; });
  if (synced_ >= sync) return Status();
  if (!reader_status_.ok()) return reader_status_;
  return internal_error("capturing stdout: the reader ended before a sync marker");
}

Status StdoutCapture::stop() {
  if (t_reader_of == this) {
    return failed_precondition_error("StdoutCapture::stop called from the capture's own sink");
  }
  std::lock_guard<std::mutex> stop_lock(stop_mutex_);
  if (stopped_) return stop_status_;
  stopped_ = true;
  Status status;
  std::fflush(stdout);
  if (replaced_fd1_ && retry_dup2(saved_fd_, STDOUT_FILENO) < 0) {
    status = errno_error(errno, "stopping the stdout capture: dup2");
  }
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    // Behind everything written to the pipe so far. Should the write fail, closing the last
    // write end (fd 1 restored) ends the reader as well.
    if (int err = write_all(write_fd_, kStopMarker); err != 0 && status.ok()) {
      status = errno_error(err, "stopping the stdout capture: write of the stop marker");
    }
    ::close(write_fd_);
    write_fd_ = -1;
  }
  if (thread_.joinable()) thread_.join();
  ::close(read_fd_);
  ::close(saved_fd_);
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    status = reader_status_;
  }
  g_capture_active = false;
  stop_status_ = status;
  return status;
}

StdoutCapture::~StdoutCapture() { stop().ignore(); }

}  // namespace kiln
