// The `kiln` command line (docs/cli.md): argument parsing and the commands.
// Exit codes: 0 success, 1 runtime failure (device, compiler, I/O), 2 usage or program error.
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

int run_cli(const std::vector<std::string>& args);

// A time in milliseconds as `kiln run --repeat` prints it: at least three significant digits,
// never an exponent (0.000812, not 0.001 or 8.12e-04).
std::string milliseconds_text(double ms);

}  // namespace kiln::tools
