#include <csignal>
#include <cstdio>
#include <exception>

#include "tools/cli.h"

int main(int argc, char** argv) {
  // A reader that goes away (`kiln compile | head`, a FIFO closed early) is a failed write, not
  // a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return kiln::tools::run_cli(args);
  } catch (const std::exception& e) {  // every failure is a Status; this is a last resort
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return kiln::tools::kExitRuntime;
  } catch (...) {
    std::fprintf(stderr, "kiln: internal error: an unknown exception\n");
    return kiln::tools::kExitRuntime;
  }
}
