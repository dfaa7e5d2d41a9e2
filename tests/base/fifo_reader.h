// A test helper: reads everything written to a FIFO on a thread, without ever blocking for good.
// The FIFO is opened (non-blocking) at construction, before any writer, so that a writer that
// opens it does not wait, and a writer that never comes (or replaced the FIFO with a file)
// leaves the reader with nothing instead of hanging the test.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>

namespace kiln::test {

class FifoReader {
 public:
  explicit FifoReader(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
    if (fd_ >= 0) thread_ = std::thread([this] { loop(); });
  }
  ~FifoReader() { finish(); }
  bool opened() const { return fd_ >= 0; }

  // Call once every writer is done: reads what is left and returns everything read.
  const std::string& finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return data_;
  }

 private:
  void loop() {
    char buf[1 << 16];
    for (;;) {
      const bool last = done_;  // read before draining, so that nothing written before is missed
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 20);
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n > 0) {
        data_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (last) return;  // n == 0 (no writer) or EAGAIN, after every writer finished
    }
  }

  int fd_;
  std::atomic<bool> done_{false};
  std::string data_;
  std::thread thread_;
};

}  // namespace kiln::test
