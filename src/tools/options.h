// The command line's words: which commands and options exist (one table, from which both the
// parser and `--help` work, so that every option parsed is described and nothing else is), and
// parsing `kiln COMMAND ARGS...` into Options.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::tools {

// A failure with its exit code. `usage_of` names the command whose usage line follows the
// message ("" for the top level): only usage errors set it; errors in a program, a file, the
// environment or a device print their message alone.
struct Failure {
  int code;
  std::string message;
  std::optional<std::string> usage_of;
};

// A usage error of `command` ("" for the top level): exit 2, message then the usage line.
Failure usage_error(const std::string& command, const std::string& message);
// A runtime failure of `what` (a device, the compiler, I/O): exit 1, "kiln: WHAT: STATUS".
Failure runtime_failure(const Status& status, const std::string& what);
// An error in what the user gave (a program, a file, a setting), not in how kiln was called: exit 2.
Failure invalid_input(const std::string& message);

// Options of `run`, `compile`, `devices` and `trace-values`.
struct Options {
  std::string command;
  bool help = false;  // --help was given: print the command's help, do nothing else
  std::string program;
  std::string device = "cpu";
  bool device_given = false;  // --device was given (compile: exclusive with --target)
  // compile --target: the driver whose code is generated ahead of time, with no device present
  // ("cpu", "interp", "opencl", "cuda"), and for cuda the architecture (90 for cuda:sm_90; 0 for
  // plain "cuda", which --emit ptx refuses). Empty: --target was not given.
  std::string target;
  int cuda_arch = 0;
  std::vector<std::string> routines;
  std::vector<std::pair<std::string, std::string>> inputs, outputs;
  std::map<std::string, int64_t, std::less<>> sizes;  // --size NAME=VALUE
  uint64_t seed = 0;
  uint64_t repeat = 1;
  uint64_t warmup = 0;  // --warmup N: untimed runs before the timed ones
  uint64_t streams = 1;
  bool print = false;
  bool auto_calls = true;  // --no-auto-calls turns it off
  bool shared_buffers = true;  // --no-shared-buffers turns it off
  bool strict_fp = false;  // --strict-fp: float reductions in program order
  bool check_bounds = false;  // --check-bounds: an out-of-range gather fails the run
  std::string params;  // --params DIR: a NAME.npy in DIR for each param it starts
  std::string trace;
  std::string trace_values;  // run --trace-values FILE: where the values computed inside routines go
  std::string emit = "ir";
  bool emit_given = false;  // --emit was given (compile: exclusive with --timings)
  bool timings = false;     // compile --timings: build for the device and report the times
  std::string out_file;
  // `trace-values FILE`: the value trace to print (o.routines filters its runs).
  std::string values_file;
  uint64_t statement = 0;  // --statement LINE: only that line's entries; 0: every line
  bool first_nan = false;
};

// The commands, in the order help lists them.
std::vector<std::string> command_names();

// Parses `args` = {COMMAND, ARGS...} for COMMAND in command_names() other than "help". The
// operand (PROGRAM.kiln, or the FILE of trace-values) goes to o.program or o.values_file.
std::variant<Options, Failure> parse_options(const std::vector<std::string>& args);

// `kiln --help` (empty command) or `kiln COMMAND --help`: usage, every option described, notes.
std::string help_text(const std::string& command);
// The first line(s) of help_text, which follow a usage error, and where to read more.
std::string usage_text(const std::string& command);
// "kiln VERSION".
std::string version_text();

}  // namespace kiln::tools
