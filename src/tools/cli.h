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

}  // namespace kiln::tools
