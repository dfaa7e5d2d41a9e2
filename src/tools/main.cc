#include <cstdio>
#include <exception>

#include "tools/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return kiln::tools::run_cli(args);
  } catch (const std::exception& e) {  // nothing should throw; never die with an abort
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return kiln::tools::kExitRuntime;
  }
}
