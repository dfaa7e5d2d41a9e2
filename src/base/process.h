// Running an external program (the C compiler) with a time limit, capturing what it prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

struct ProcessResult {
  int exit_code = -1;     // valid when !signalled
  bool signalled = false; // killed by a signal (term_signal)
  int term_signal = 0;
  std::string output;     // stdout and stderr together, truncated to 64 KiB
  int64_t peak_memory_bytes = 0;  // its largest resident set (getrusage's ru_maxrss)
};

// Runs argv[0] (a path, not searched on PATH) with stdin from /dev/null. NOT_FOUND or
// PERMISSION_DENIED when it cannot be started; DEADLINE_EXCEEDED (after killing it) when it runs
// past `timeout_ms`. A program that runs and fails is not an error here: see exit_code.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, int64_t timeout_ms);

// Finds `name` on $PATH (or takes it as a path if it contains '/'). NOT_FOUND if absent.
Result<std::string> find_program(const std::string& name);

}  // namespace kiln
