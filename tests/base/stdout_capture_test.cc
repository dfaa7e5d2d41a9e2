// StdoutCapture: prefix lines reach the sink whole and once, everything else reaches the real
// stdout unchanged and in order, sync() delivers, fd 1 comes back. Each test first points fd 1 at
// a file of its own (and puts the runner's stdout back afterwards), so what passes through can be
// read back; nothing here waits on time.
#include "base/stdout_capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/disk_cache.h"
#include "common/temp_dir.h"
#include "kiln/base/file.h"

namespace kiln {
namespace {

constexpr const char* kPrefix = "@@kiln: ";

class StdoutCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    std::fflush(stdout);  // the runner's own output stays the runner's
    saved_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    ASSERT_GE(saved_, 0);
    const int fd = ::open(path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
    ::close(fd);
  }
  void TearDown() override { restore_stdout(); }

  // Puts the runner's stdout back on fd 1; once.
  void restore_stdout() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
    saved_ = -1;
  }

  std::string path() const { return dir_.file("stdout.txt"); }
  // What reached the file so far.
  std::string file_text() const { return read_file(path()).value(); }

  Result<std::unique_ptr<StdoutCapture>> start(std::string prefix = kPrefix) {
    return StdoutCapture::start(std::move(prefix), [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  // The sink's lines so far (it runs on the capture's thread).
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

  // write(2) to fd 1, after what stdio holds.
  static void write_fd1(std::string_view bytes) {
    std::fflush(stdout);
    ASSERT_EQ(write_all(STDOUT_FILENO, bytes), 0);
  }

  test::TempDir dir_{"kiln-capture-test"};
  int saved_ = -1;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

TEST_F(StdoutCaptureTest, PrefixLinesGoToTheSinkAndTheRestPassesInOrder) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  std::printf("first plain line\n");
  std::printf("@@kiln: value 1\n");
  std::printf("@@kil\n");  // a beginning of the prefix, then the end of the line
  std::printf("@@kilo not quite\n");
  std::printf("x@@kiln: not at the start\n");
  std::printf("\n");
  write_fd1("written with write(2)\n");
  std::printf("@@kiln: value 2\n");
  std::printf("@@kiln: \n");  // the prefix alone
  write_fd1("@@kiln: value 3, written with write(2)\n");
  std::printf("a\x1e" "b \x1e" "kiln-capture-syncX \x1e" "kiln-capture-sync \x1e\n");  // no markers
  std::printf("last plain line\n");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(lines(), (std::vector<std::string>{"@@kiln: value 1", "@@kiln: value 2", "@@kiln: ",
                                               "@@kiln: value 3, written with write(2)"}));
  EXPECT_EQ(file_text(),
            "first plain line\n@@kil\n@@kilo not quite\nx@@kiln: not at the start\n\n"
            "written with write(2)\n"
            "a\x1e" "b \x1e" "kiln-capture-syncX \x1e" "kiln-capture-sync \x1e\n"
            "last plain line\n");
}

TEST_F(StdoutCaptureTest, UnfinishedLastLineIsDeliveredAtStop) {
  {
    auto capture = start();
    ASSERT_TRUE(capture.ok()) << capture.status();
    std::printf("plain\nno newline at the end");
    ASSERT_TRUE((*capture)->stop().ok());
  }
  {
    auto capture = start();
    ASSERT_TRUE(capture.ok()) << capture.status();
    std::printf("@@kiln: unfinished");
    ASSERT_TRUE((*capture)->stop().ok());
  }
  {
    auto capture = start();
    ASSERT_TRUE(capture.ok()) << capture.status();
    std::printf("@@kil");  // the last line is only a beginning of the prefix
    ASSERT_TRUE((*capture)->stop().ok());
  }
  EXPECT_EQ(lines(), std::vector<std::string>{"@@kiln: unfinished"});
  EXPECT_EQ(file_text(), "plain\nno newline at the end@@kil");
}

TEST_F(StdoutCaptureTest, LinesArrivingInPiecesAreWhole) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  // A sync marker lands in the middle of these lines; it is taken out again.
  std::printf("plain ");
  ASSERT_TRUE((*capture)->sync().ok());
  // A non-prefix line passes as soon as that is clear, not at its end.
  EXPECT_EQ(file_text(), "plain ");
  std::printf("continued\n@@kiln: a");
  ASSERT_TRUE((*capture)->sync().ok());
  EXPECT_TRUE(lines().empty());
  std::printf("b\n");
  write_fd1("@@k");
  write_fd1("iln: in ");
  write_fd1("pieces\n@");
  ASSERT_TRUE((*capture)->sync().ok());
  write_fd1("@kiln: last\n");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(lines(), (std::vector<std::string>{"@@kiln: ab", "@@kiln: in pieces", "@@kiln: last"}));
  EXPECT_EQ(file_text(), "plain continued\n");
}

TEST_F(StdoutCaptureTest, SyncDeliversEverythingPrintedBefore) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  std::string expected_file;
  for (int round = 0; round < 50; ++round) {
    std::printf("@@kiln: round %d\n", round);
    std::printf("plain round %d\n", round);  // left in stdio's buffer: sync() flushes it
    expected_file += "plain round " + std::to_string(round) + "\n";
    ASSERT_TRUE((*capture)->sync().ok());
    std::vector<std::string> seen = lines();
    ASSERT_EQ(seen.size(), static_cast<size_t>(round) + 1);
    EXPECT_EQ(seen.back(), "@@kiln: round " + std::to_string(round));
    EXPECT_EQ(file_text(), expected_file);
  }
  ASSERT_TRUE((*capture)->stop().ok());
}

TEST_F(StdoutCaptureTest, ConcurrentPrintfAndSyncKeepLinesWhole) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  StdoutCapture* c = capture->get();
  constexpr int kThreads = 4;
  constexpr int kLinesPerThread = 400;
  // Every 37th line is longer than stdio's buffer, so it reaches the pipe in pieces.
  auto payload = [](int t, int i) {
    return std::string(i % 37 == 0 ? 9000 : 20 + (i * 7 + t) % 50, static_cast<char>('a' + t));
  };
  std::atomic<int> sync_failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLinesPerThread; ++i) {
        const std::string body = payload(t, i);
        if (i % 2 == 0) {
          std::printf("@@kiln: t%d i%d %s\n", t, i, body.c_str());
        } else {
          std::printf("plain t%d i%d %s\n", t, i, body.c_str());
        }
        if (i % 50 == 0 && !c->sync().ok()) ++sync_failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(c->stop().ok());
  EXPECT_EQ(sync_failures.load(), 0);

  std::multiset<std::string> expected_sink, expected_file;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kLinesPerThread; ++i) {
      const std::string tail = "t" + std::to_string(t) + " i" + std::to_string(i) + " " + payload(t, i);
      (i % 2 == 0 ? expected_sink : expected_file).insert((i % 2 == 0 ? "@@kiln: " : "plain ") + tail);
    }
  }
  const std::vector<std::string> sink = lines();
  EXPECT_EQ(sink.size(), expected_sink.size());
  EXPECT_TRUE(std::multiset<std::string>(sink.begin(), sink.end()) == expected_sink);
  const std::vector<std::string> file = split_lines(file_text());
  EXPECT_EQ(file.size(), expected_file.size());
  EXPECT_TRUE(std::multiset<std::string>(file.begin(), file.end()) == expected_file);
  // Each thread's plain lines are in the order it printed them.
  std::map<int, int> last;
  for (const std::string& line : file) {
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "plain t%d i%d", &t, &i), 2) << line.substr(0, 40);
    EXPECT_GT(i, last.count(t) ? last[t] : -1);
    last[t] = i;
  }
}

TEST_F(StdoutCaptureTest, MoreThanAPipeFullDoesNotBlock) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  const std::string body(1000, 'x');
  constexpr int kLines = 3000;  // about 3 MiB each way
  for (int i = 0; i < kLines; ++i) {
    std::printf("@@kiln: %s\n", body.c_str());
    std::printf("plain %s\n", body.c_str());
  }
  const std::string one_write(2 << 20, 'y');  // one write(2) of 2 MiB
  write_fd1(one_write + "\n");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(lines().size(), static_cast<size_t>(kLines));
  const std::string text = file_text();
  EXPECT_EQ(text.size(), kLines * (body.size() + 7) + one_write.size() + 1);
  EXPECT_EQ(text.substr(text.size() - 11), std::string(10, 'y') + "\n");
}

TEST_F(StdoutCaptureTest, OneCaptureAtATime) {
  auto first = start();
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = start();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << second.status();
  // The first one goes on capturing.
  std::printf("@@kiln: still captured\n");
  ASSERT_TRUE((*first)->stop().ok());
  EXPECT_EQ(lines(), std::vector<std::string>{"@@kiln: still captured"});
  // Once stopped, another may start.
  auto third = start();
  ASSERT_TRUE(third.ok()) << third.status();
}

TEST_F(StdoutCaptureTest, StopTwiceThenSyncIsRefused) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  std::printf("plain\n");
  ASSERT_TRUE((*capture)->stop().ok());
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ((*capture)->sync().code(), StatusCode::kFailedPrecondition);
  capture->reset();  // the destructor stops once more
  EXPECT_EQ(file_text(), "plain\n");
}

TEST_F(StdoutCaptureTest, LongPrefixLineIsCut) {
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  const std::string long_line = kPrefix + std::string(3 << 20, 'v');
  const std::string long_plain = "plain " + std::string(3 << 20, 'p');
  std::fwrite(long_line.data(), 1, long_line.size(), stdout);
  std::printf("\n@@kiln: next\n");
  std::fwrite(long_plain.data(), 1, long_plain.size(), stdout);
  std::printf("\n");
  ASSERT_TRUE((*capture)->stop().ok());
  const std::vector<std::string> seen = lines();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].size(), StdoutCapture::kMaxLineBytes);
  EXPECT_TRUE(seen[0] == long_line.substr(0, StdoutCapture::kMaxLineBytes));
  EXPECT_EQ(seen[1], "@@kiln: next");
  EXPECT_TRUE(file_text() == long_plain + "\n");  // a plain line is not cut
}

TEST_F(StdoutCaptureTest, EmptyPrefixTakesEveryLine) {
  auto capture = start("");
  ASSERT_TRUE(capture.ok()) << capture.status();
  std::printf("one\n\nthree");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(lines(), (std::vector<std::string>{"one", "", "three"}));
  EXPECT_EQ(file_text(), "");
}

bool is_cloexec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

// The open fds of this process.
std::set<int> open_fds() {
  std::set<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(std::stoi(entry.path().filename().string()));
  }
  std::erase_if(fds, [](int fd) { return ::fcntl(fd, F_GETFD) < 0; });  // the listing's own
  return fds;
}

TEST_F(StdoutCaptureTest, Fd1ComesBackAndNoFdLeaks) {
  struct stat before, during, after;
  ASSERT_EQ(::fstat(STDOUT_FILENO, &before), 0);
  const std::set<int> fds_before = open_fds();
  write_fd1("before\n");
  {
    auto capture = start();
    ASSERT_TRUE(capture.ok()) << capture.status();
    ASSERT_EQ(::fstat(STDOUT_FILENO, &during), 0);
    EXPECT_TRUE(S_ISFIFO(during.st_mode));
    for (int fd : open_fds()) {
      if (!fds_before.count(fd) && fd != STDOUT_FILENO) {
        EXPECT_TRUE(is_cloexec(fd)) << fd;
      }
    }
    write_fd1("during\n");
    ASSERT_TRUE((*capture)->stop().ok());
    ASSERT_EQ(::fstat(STDOUT_FILENO, &after), 0);
    EXPECT_EQ(after.st_dev, before.st_dev);
    EXPECT_EQ(after.st_ino, before.st_ino);
    write_fd1("after stop\n");
  }
  EXPECT_EQ(open_fds(), fds_before);
  EXPECT_FALSE(is_cloexec(STDOUT_FILENO));  // restored as it was
  EXPECT_EQ(file_text(), "before\nduring\nafter stop\n");
}

TEST_F(StdoutCaptureTest, ClosedFd1IsAnErrorNamingTheCall) {
  ASSERT_EQ(::close(STDOUT_FILENO), 0);
  auto capture = start();
  ASSERT_FALSE(capture.ok());
  EXPECT_NE(capture.status().message().find("fcntl"), std::string::npos) << capture.status();
  // The failure leaves no capture active behind it.
  ASSERT_EQ(::open(path().c_str(), O_WRONLY | O_APPEND), STDOUT_FILENO);  // the lowest free fd
  auto again = start();
  ASSERT_TRUE(again.ok()) << again.status();
  std::printf("plain\n");
  ASSERT_TRUE((*again)->stop().ok());
  EXPECT_EQ(file_text(), "plain\n");
}

TEST_F(StdoutCaptureTest, BrokenRealStdoutIsDrainedWithoutSigpipe) {
  // The real stdout is a pipe nobody reads: writing to it fails with EPIPE (and would raise
  // SIGPIPE, which kills the process unless the capture's thread blocks it).
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  ASSERT_EQ(::dup2(fds[1], STDOUT_FILENO), STDOUT_FILENO);
  ::close(fds[1]);
  auto capture = start();
  ASSERT_TRUE(capture.ok()) << capture.status();
  const std::string body(1000, 'x');
  for (int i = 0; i < 1000; ++i) {  // more than a pipe holds: had the capture stopped reading, this blocks
    std::printf("plain %d %s\n", i, body.c_str());
    std::printf("@@kiln: %d\n", i);
  }
  ASSERT_TRUE((*capture)->sync().ok());
  EXPECT_EQ(lines().size(), 1000u);
  std::printf("@@kiln: after the failure\n");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(lines().back(), "@@kiln: after the failure");
}

TEST_F(StdoutCaptureTest, SinkCallingBackIsRefused) {
  std::atomic<StdoutCapture*> self{nullptr};
  std::atomic<int> sync_code{-1}, stop_code{-1};
  auto capture = StdoutCapture::start(kPrefix, [&](std::string_view) {
    sync_code = static_cast<int>(self.load()->sync().code());
    stop_code = static_cast<int>(self.load()->stop().code());
  });
  ASSERT_TRUE(capture.ok()) << capture.status();
  self = capture->get();
  std::printf("@@kiln: call back\n");
  ASSERT_TRUE((*capture)->stop().ok());
  EXPECT_EQ(sync_code.load(), static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(stop_code.load(), static_cast<int>(StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace kiln
