#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace {

// The front end, the loop passes and the interp device recurse once per expression level (up to
// the language's 256, about 1 KiB of stack a level), so they must not depend on `ulimit -s`: a
// 64 KiB limit would otherwise crash a valid program. kiln runs the command on a thread with this
// stack and makes it the default of every thread it starts (queues, the CPU pool). Stacks are
// reserved, not touched, so the cost is address space only.
constexpr size_t kThreadStackBytes = size_t{16} << 20;

int run_guarded(const std::vector<std::string>& args) {
  try {
    return kiln::tools::run_cli(args);
  } catch (const std::bad_alloc&) {
    // The standard library's containers throw where the host has no memory left: not a bug of
    // kiln's, but the limit the user set or the machine's.
    std::fprintf(stderr, "kiln: out of memory: the host could not allocate what kiln needs (an address-space "
                         "limit such as ulimit -v, or the machine's memory used up)\n");
    return kiln::tools::kExitRuntime;
  } catch (const std::exception& e) {  // every failure is a Status; this is a last resort
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return kiln::tools::kExitRuntime;
  } catch (...) {
    std::fprintf(stderr, "kiln: internal error: an unknown exception\n");
    return kiln::tools::kExitRuntime;
  }
}

struct Job {
  std::vector<std::string> args;
  int exit_code = 0;
};

void* run_job(void* job) {
  auto* j = static_cast<Job*>(job);
  j->exit_code = run_guarded(j->args);
  // The OpenCL platform's LLVM installs an alternate signal stack of its own (heap memory) on
  // the thread that first loads it: this one. Disable it before the thread ends, so that nothing
  // that cleans up a thread's signal stack at exit (AddressSanitizer unmaps it) touches memory
  // it does not own.
  stack_t disable{};
  disable.ss_flags = SS_DISABLE;
  sigaltstack(&disable, nullptr);
  return nullptr;
}

// Runs the command on a thread with kThreadStackBytes of stack; on the calling thread when the
// system refuses such a thread (an address-space limit), which is no worse than before.
int run_with_stack(Job& job) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return run_guarded(job.args);
  size_t current = 0;
  pthread_attr_getstacksize(&attr, &current);
  if (current < kThreadStackBytes && pthread_attr_setstacksize(&attr, kThreadStackBytes) == 0) {
    pthread_setattr_default_np(&attr);
  }
  pthread_t thread;
  const bool started = pthread_create(&thread, &attr, run_job, &job) == 0;
  pthread_attr_destroy(&attr);
  if (!started) return run_guarded(job.args);
  pthread_join(thread, nullptr);
  return job.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that goes away (`kiln compile | head`, a FIFO closed early) is a failed write, not
  // a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Job job{std::vector<std::string>(argv + 1, argv + argc)};
  return run_with_stack(job);
}
