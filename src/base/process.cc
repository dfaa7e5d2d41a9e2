#include "base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "kiln/base/time.h"

extern char** environ;

namespace kiln {

namespace {
constexpr size_t kMaxOutput = 64 * 1024;

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}
}  // namespace

Result<std::string> find_program(const std::string& name) {
  if (name.empty()) return invalid_argument_error("program name is empty");
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) return errno_error(errno, "program '" + name + "'");
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return not_found_error("program '" + name + "' was not found on PATH");
}

Result<ProcessResult> run_process(const std::vector<std::string>& argv, int64_t timeout_ms) {
  if (argv.empty()) return invalid_argument_error("run_process: empty argument list");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return errno_error(errno, "pipe");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (err != 0) {
    ::close(pipe_fds[0]);
    return errno_error(err, "cannot start '" + argv[0] + "'");
  }

  // Read output without blocking so that the time limit holds even if the program hangs.
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  ProcessResult result;
  const int64_t deadline = now_ns() + timeout_ms * 1000000;
  int64_t nap_us = 50;
  bool pipe_open = true;
  int wstatus = 0;
  for (;;) {
    char buf[4096];
    bool progressed = false;
    while (pipe_open) {
      ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
      if (n > 0) {
        if (result.output.size() < kMaxOutput) {
          result.output.append(buf, std::min(static_cast<size_t>(n), kMaxOutput - result.output.size()));
        }
        progressed = true;
      } else if (n == 0) {
        pipe_open = false;
      } else if (errno != EINTR) {
        break;  // EAGAIN: nothing to read now
      }
    }
    struct rusage usage {};
    pid_t done = ::wait4(pid, &wstatus, WNOHANG, &usage);
    if (done == pid) {
      result.peak_memory_bytes = int64_t{usage.ru_maxrss} * 1024;
      break;
    }
    if (now_ns() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      ::close(pipe_fds[0]);
      return deadline_exceeded_error("'" + argv[0] + "' did not finish within " +
                                     std::to_string(timeout_ms) + " ms and was killed");
    }
    if (!progressed) {
      std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
      nap_us = std::min<int64_t>(nap_us * 2, 5000);
    }
  }
  // Drain what is left after exit.
  for (;;) {
    char buf[4096];
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0 && result.output.size() < kMaxOutput) {
      result.output.append(buf, std::min(static_cast<size_t>(n), kMaxOutput - result.output.size()));
    }
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
  ::close(pipe_fds[0]);
  if (WIFSIGNALED(wstatus)) {
    result.signalled = true;
    result.term_signal = WTERMSIG(wstatus);
  } else {
    result.exit_code = WEXITSTATUS(wstatus);
  }
  return result;
}

}  // namespace kiln
