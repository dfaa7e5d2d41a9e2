// A test helper: feeds a FIFO from a thread, for a process under test that reads it. The writer
// waits for a reader to open the FIFO; finish() releases a writer still waiting (should the
// reader never have opened it) and joins, so that a test never hangs. SIGPIPE is ignored while
// the writer lives: a reader that goes away early is EPIPE for the writer, which then stops.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

namespace kiln::test {

class FifoWriter {
 public:
  // Writes `head`, then `body` `repeat` times, in writes of at most `piece` bytes.
  FifoWriter(std::string path, std::string head, std::string body = "", size_t repeat = 0,
             size_t piece = SIZE_MAX)
      : path_(std::move(path)) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    restore_ = ::sigaction(SIGPIPE, &ignore, &old_) == 0;
    thread_ = std::thread([this, head = std::move(head), body = std::move(body), repeat, piece] {
      int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return;
      bool ok = write_all(fd, head, piece);
      for (size_t i = 0; ok && i < repeat; ++i) ok = write_all(fd, body, piece);
      ::close(fd);
    });
  }
  ~FifoWriter() { finish(); }
  FifoWriter(const FifoWriter&) = delete;
  FifoWriter& operator=(const FifoWriter&) = delete;

  // Call once the reader is done.
  void finish() {
    if (!thread_.joinable()) return;
    int release = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (release >= 0) ::close(release);
    thread_.join();
    if (restore_) ::sigaction(SIGPIPE, &old_, nullptr);
  }

 private:
  static bool write_all(int fd, const std::string& bytes, size_t piece) {
    for (size_t at = 0; at < bytes.size();) {
      ssize_t n = ::write(fd, bytes.data() + at, std::min(piece, bytes.size() - at));
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }

  std::string path_;
  struct sigaction old_ {};
  bool restore_ = false;
  std::thread thread_;
};

}  // namespace kiln::test
