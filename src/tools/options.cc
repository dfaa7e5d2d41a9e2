#include "tools/options.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

#include "kiln/base/settings.h"
#include "tools/cli.h"
#include "base/suggest.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined (CMakeLists.txt passes the project's VERSION)"
#endif

namespace kiln::tools {

namespace {

// Every KILN_* variable (base/settings.h) with what it sets and the values it takes.
std::string settings_help() {
  std::string out;
  for (const Setting& setting : settings()) {
    std::string values;
    // As check_settings reads them: an integer from min to max, or seconds in (0, max] (a decimal
    // number, 0 refused whatever min says).
    if (setting.seconds) {
      values = " (more than 0, at most " + std::to_string(setting.max) + "; decimals such as 0.5 too)";
    } else if (setting.max > 0) {
      values = " (" + std::to_string(setting.min) + " to " + std::to_string(setting.max) + ")";
    }
    for (const std::string& choice : setting.choices) values += (values.empty() ? " (" : ", ") + choice;
    if (!setting.choices.empty()) values += ")";
    char line[512];
    std::snprintf(line, sizeof line, "  %-25s %s%s\n", setting.name, setting.help, values.c_str());
    out += line;
  }
  return out;
}


// The largest --repeat.
constexpr uint64_t kMaxCount = 1000000;
// Each stream is an OS thread with its own queue: beyond a few hundred they only cost memory and
// thread starts (10,000 took 9 s and 765 MB), so --streams is bounded.
constexpr uint64_t kMaxStreams = 256;

struct OptionSpec {
  std::string_view name;   // "--device"; "-o"
  std::string_view alias;  // a short form ("-h"), or empty
  std::string_view value;  // what follows it ("NAME"), empty for a flag
  std::string_view help;   // lines after the first are continuation lines
};

struct CommandSpec {
  std::string_view name;
  std::string_view synopsis;  // after "usage: "
  std::string_view summary;
  std::string_view operand;       // "PROGRAM.kiln", "FILE"; empty: the command takes none
  std::string_view operand_noun;  // what messages call it: "program", "value trace"
  std::vector<OptionSpec> options;
  std::string_view notes;  // after the options; may be empty
};

constexpr OptionSpec kHelpOption = {"--help", "-h", "", "print this help and exit"};
constexpr OptionSpec kNoAutoCallsOption = {
    "--no-auto-calls", "", "", "do not replace statements with library calls (e.g. a product by gemm)"};
constexpr OptionSpec kNoSharedBuffersOption = {
    "--no-shared-buffers", "", "",
    "give every stored intermediate a buffer of its own (by default those\n"
    "whose lifetimes in a routine do not overlap share one)"};
constexpr OptionSpec kStrictFpOption = {
    "--strict-fp", "", "",
    "keep float reductions in program order (not split into vector\n"
    "accumulators, which changes the rounding of sums and products)"};

constexpr OptionSpec kCheckBoundsOption = {
    "--check-bounds", "", "",
    "fail the run where a gathered subscript (e[t[i], j]) falls outside\n"
    "its dimension, naming the statement (PROGRAM:LINE), the tensor and\n"
    "the index, instead of reading 0 there"};

constexpr OptionSpec kSizeOption = {
    "--size", "", "NAME=VALUE",
    "the value of a size (language version 2) that no --input binds;\n"
    "repeatable. A size an --input file binds takes the file's dimension;\n"
    "giving both with different values is an error"};

constexpr std::string_view kExitStatus =
    "Exit status: 0 success; 1 a runtime failure (device, compiler, I/O); 2 a usage error or\n"
    "an error in the program or in a file or setting given to it.\n";

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> specs = {
      {"run",
       "kiln run PROGRAM.kiln [options]",
       "Compiles PROGRAM.kiln for a device and runs its routines.",
       "PROGRAM.kiln",
       "program",
       {
           {"--device", "", "NAME",
            "cpu (the default), interp (the reference interpreter), opencl or\n"
            "cuda; NAME:N picks device N of a driver, e.g. opencl:0 ('kiln\n"
            "devices' lists the devices present)"},
           {"--routine", "", "NAME",
            "a routine to run; repeatable, run in the order given (a routine named\n"
            "twice runs twice). Default: main if the program has one, else every\n"
            "routine in file order"},
           {"--input", "", "NAME=FILE.npy",
            "the value of an input or param; repeatable. Inputs not given get\n"
            "deterministic pseudo-random values from --seed. {rank} in FILE is\n"
            "the process's rank (see Under mpirun)"},
           {"--output", "", "NAME=FILE.npy",
            "write the value of an output or param after the last run; repeatable.\n"
            "{rank} in FILE is the process's rank (see Under mpirun)"},
           {"--params", "", "DIR",
            "start each param that has a file DIR/NAME.npy from it, as --input\n"
            "NAME=DIR/NAME.npy would (an --input of the same name wins); every .npy\n"
            "in DIR must name a param"},
           kSizeOption,
           {"--seed", "", "N", "seed for random inputs and random initializers (default 0)"},
           {"--repeat", "", "N",
            "run the routine sequence N times (at most 1000000); prints the\n"
            "min/median/max time per run"},
           {"--warmup", "", "N",
            "first run the routine sequence N more times, untimed (default 0; at\n"
            "most 1000000): the first run of a program pays for its one-time setup"},
           {"--streams", "", "N",
            "run N copies of the routine sequence on N streams of the device\n"
            "(at most 256)"},
           {"--print", "", "", "print every output: small tensors in full, large ones summarized"},
           {"--trace", "", "FILE.json", "write a Chrome/Perfetto trace of what ran on which stream"},
           {"--trace-values", "", "FILE",
            "log the values computed inside routines (JSON lines; 'kiln\n"
            "trace-values FILE' prints them)"},
           kNoAutoCallsOption,
           kNoSharedBuffersOption,
           kStrictFpOption,
           kCheckBoundsOption,
           kHelpOption,
       },
       "Files:\n"
       "  An .npy file holds the dtype of the declared element type (|b1 bool, |i1, |u1, <i2, <u2,\n"
       "  <i4, <u4, <i8, <u8, <f2 f16, <V2 bf16, <f4, <f8) in C order, of any rank, and must hold\n"
       "  exactly the declared type and shape. kiln reads a program of at most 64 MiB, an .npy\n"
       "  header of at most 64 KiB, and exactly as many .npy data bytes as the header says.\n"
       "  Outputs (--output, --trace, --trace-values): a regular file, or a name where nothing\n"
       "  exists, is replaced whole (written to a temporary file, then renamed); a symbolic link's\n"
       "  target is replaced, not the link; a character device (/dev/null) or a FIFO is written in\n"
       "  place. An output may not be the program, an --input file or another output. A run\n"
       "  that fails writes none of its outputs.\n"
       "\n"
       "Under mpirun:\n"
       "  'mpirun -np R kiln run PROGRAM.kiln [options]' runs the routines on R processes, one\n"
       "  rank each; the program's collectives (allreduce, allgather, ...) combine across them.\n"
       "  Every rank reads the same --input files, except where a path holds {rank}, which each\n"
       "  rank replaces with its rank (--input x=shard{rank}.npy). --output, --trace and\n"
       "  --trace-values are written by rank 0 only, or by every rank where the path holds {rank}\n"
       "  (--output y=y{rank}.npy). --print and the timing line of --repeat come from rank 0\n"
       "  only. No rank writes an output unless every rank finished its run; a failed run (a\n"
       "  collective that fails or times out, on any rank) exits with status 1. --streams above 1\n"
       "  is refused (exit 2) for routines that run a collective: the streams' collectives would\n"
       "  have no order between them.\n"
       "  Without mpirun, kiln run is rank 0 of 1 (every collective is a copy, {rank} is 0)\n"
       "  and does not touch MPI.\n"},
      {"compile",
       "kiln compile PROGRAM.kiln [options]",
       "Prints PROGRAM.kiln after parsing (ir), after lowering and optimization (lowered), the\n"
       "source generated for a device (source), or for a CUDA target its PTX (ptx).",
       "PROGRAM.kiln",
       "program",
       {
           {"--device", "", "NAME",
            "the device whose source --emit source prints: cpu (the default, C),\n"
            "opencl (OpenCL C), cuda (CUDA C) or interp (loop IR); NAME:N as for\n"
            "'kiln run'. The device must be present ('kiln devices')"},
           {"--target", "", "TARGET",
            "compile ahead of time for a device that need not be present: cpu,\n"
            "interp, opencl, cuda, cuda:sm_80, cuda:sm_90, ... (not with --device).\n"
            "--emit source needs nothing; --emit ptx needs only NVRTC"},
           {"--emit", "", "ir|lowered|source|ptx",
            "what to print (default ir; ir shows the library calls the compiler\n"
            "puts in, such as gemm for a large matrix product); ptx: the PTX of a\n"
            "cuda:sm_NN target, built by NVRTC"},
           kNoAutoCallsOption,
           kNoSharedBuffersOption,
           kStrictFpOption,
           kCheckBoundsOption,
           {"--size", "", "NAME=VALUE",
            "the value of a size (language version 2) for --emit lowered, source\n"
            "and ptx, which compile the program at those sizes; repeatable"},
           {"--timings", "", "",
            "build the program for the device (through the kernel cache, as 'kiln\n"
            "run' would) and print where the time went instead of the program:\n"
            "parsing, lowering, passes, emitting, the device compiler's steps (each\n"
            "part compiled side by side, the link), and per kernel its passes,\n"
            "emitting and lines of source. Not with --emit or --target"},
           {"-o", "", "FILE",
            "write to FILE instead of standard output (written like the outputs\n"
            "of 'kiln run'; it may not be the program)"},
           kHelpOption,
       },
       ""},
      {"devices",
       "kiln devices [options]",
       "Lists every built-in driver: its devices with their capabilities, or why it is not\n"
       "available (no OpenCL platform, ...).",
       "",
       "",
       {kHelpOption},
       ""},
      {"trace-values",
       "kiln trace-values FILE [--routine NAME] [--statement LINE] [--first-nan]",
       "Prints a value trace written by 'kiln run --trace-values' as a tree: each routine run,\n"
       "its statements and calls in program order, and the values they computed.",
       "FILE",
       "value trace",
       {
           {"--routine", "", "NAME", "only the runs of routine NAME; repeatable"},
           {"--statement", "", "LINE", "only the statements and calls at line LINE of the program"},
           {"--first-nan", "", "",
            "only the first statement that produced a NaN or an infinity (or\n"
            "the first call whose outputs hold one): its PROGRAM:LINE, its text,\n"
            "and the values that fed it; a warning names the statements before it\n"
            "that ran more points than they logged (KILN_TRACE_LINES)"},
           kHelpOption,
       },
       "Files:\n"
       "  FILE holds one JSON object per line (docs/cli.md describes the format): a header, then\n"
       "  one line per routine run, of at most 64 MiB each. Runs are printed as they are read; a\n"
       "  malformed line stops the listing with an error naming FILE:LINE.\n"},
  };
  return specs;
}

const CommandSpec* find_command(std::string_view name) {
  for (const CommandSpec& c : commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const OptionSpec* find_option(const CommandSpec& command, std::string_view name) {
  for (const OptionSpec& o : command.options) {
    if (o.name == name || (!o.alias.empty() && o.alias == name)) return &o;
  }
  return nullptr;
}

// "  --device NAME          cpu ..." with continuation lines aligned under the description.
std::string describe_options(const std::vector<OptionSpec>& options) {
  constexpr size_t kColumn = 25;
  std::string out;
  for (const OptionSpec& o : options) {
    std::string head = "  ";
    if (!o.alias.empty()) head += std::string(o.alias) + ", ";
    head += o.name;
    if (!o.value.empty()) head += " " + std::string(o.value);
    if (head.size() + 1 > kColumn) {
      out += head + "\n" + std::string(kColumn, ' ');
    } else {
      out += head + std::string(kColumn - head.size(), ' ');
    }
    for (char c : o.help) {
      out += c;
      if (c == '\n') out += std::string(kColumn, ' ');
    }
    out += '\n';
  }
  return out;
}

bool parse_count(std::string_view text, uint64_t max, uint64_t* out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size() && *out <= max;
}

// --target: cpu, interp, opencl, cuda, or cuda:sm_NN with NN from 10 to 999.
bool parse_target(std::string_view text, Options* o) {
  if (text == "cpu" || text == "interp" || text == "opencl" || text == "cuda") {
    o->target = std::string(text);
    return true;
  }
  constexpr std::string_view kCuda = "cuda:sm_";
  uint64_t arch = 0;
  if (!text.starts_with(kCuda) || !parse_count(text.substr(kCuda.size()), 999, &arch) || arch < 10 ||
      text[kCuda.size()] == '0') {
    return false;
  }
  o->target = "cuda";
  o->cuda_arch = static_cast<int>(arch);
  return true;
}

// An option this command does not take: a likely typo of one it does, or one of another command.
Failure unknown_option(const CommandSpec& command, const std::string& arg) {
  std::vector<std::string> names;
  for (const OptionSpec& o : command.options) names.push_back(std::string(o.name));
  std::string message = "unknown option '" + arg + "' for 'kiln " + std::string(command.name) + "'";
  std::string hint = did_you_mean(arg, names, "");
  if (hint.empty()) {
    for (const CommandSpec& other : commands()) {
      if (&other != &command && find_option(other, arg)) {
        hint = " (it is an option of 'kiln " + std::string(other.name) + "')";
        break;
      }
    }
  }
  return usage_error(std::string(command.name), message + hint);
}

}  // namespace

Failure usage_error(const std::string& command, const std::string& message) {
  return {kExitUsage, "kiln: " + message, command};
}

Failure runtime_failure(const Status& status, const std::string& what) {
  return {kExitRuntime, "kiln: " + what + ": " + status.to_string(), std::nullopt};
}

Failure invalid_input(const std::string& message) { return {kExitUsage, "kiln: " + message, std::nullopt}; }

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const CommandSpec& c : commands()) names.push_back(std::string(c.name));
  names.push_back("help");
  return names;
}

std::variant<Options, Failure> parse_options(const std::vector<std::string>& args) {
  Options o;
  if (args.empty()) return usage_error("", "no command given");
  o.command = args[0];
  const CommandSpec* command = find_command(o.command);
  if (!command) return usage_error("", "unknown command '" + o.command + "'");
  const std::string& cmd = o.command;
  bool only_positional = false;
  std::vector<std::string> positional;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i], value;
    if (only_positional || arg == "-" || arg.empty() || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    const OptionSpec* spec = find_option(*command, arg);
    if (!spec) return unknown_option(*command, arg);
    if (spec->value.empty()) {
      if (has_inline) return usage_error(cmd, std::string(spec->name) + " takes no value");
    } else if (!has_inline) {
      if (i + 1 >= args.size()) {
        return usage_error(cmd, std::string(spec->name) + " needs a value: " + std::string(spec->value));
      }
      value = args[++i];
    }
    const std::string_view name = spec->name;
    if (!spec->value.empty() && value.empty()) {
      return usage_error(cmd, std::string(name) + " needs a value: " + std::string(spec->value));
    }
    if (name == "--help") {
      o.help = true;
      return o;
    } else if (name == "--device") {
      o.device = value;
      o.device_given = true;
    } else if (name == "--target") {
      if (!parse_target(value, &o)) {
        return usage_error(cmd, "--target takes cpu, interp, opencl or cuda:sm_NN (e.g. cuda:sm_90), got '" +
                                    value + "'");
      }
    } else if (name == "--routine") {
      o.routines.push_back(value);
    } else if (name == "--input" || name == "--output") {
      size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
        return usage_error(cmd, std::string(name) + " " + value + ": expected NAME=FILE.npy");
      }
      (name == "--input" ? o.inputs : o.outputs).push_back({value.substr(0, eq), value.substr(eq + 1)});
    } else if (name == "--size") {
      const size_t eq = value.find('=');
      uint64_t size = 0;
      if (eq == std::string::npos || eq == 0 || !parse_count(value.substr(eq + 1), uint64_t{1} << 40, &size)) {
        return usage_error(cmd, "--size " + value + ": expected NAME=VALUE with VALUE an integer from 0 to 2^40");
      }
      if (!o.sizes.emplace(value.substr(0, eq), static_cast<int64_t>(size)).second) {
        return usage_error(cmd, "--size " + value.substr(0, eq) + " is given twice");
      }
    } else if (name == "--seed" || name == "--repeat" || name == "--streams" || name == "--warmup") {
      const bool seed = name == "--seed", streams = name == "--streams", warmup = name == "--warmup";
      uint64_t* target = seed ? &o.seed : streams ? &o.streams : warmup ? &o.warmup : &o.repeat;
      const uint64_t most = seed ? UINT64_MAX : streams ? kMaxStreams : kMaxCount;
      const bool zero_allowed = seed || warmup;
      if (!parse_count(value, most, target) || (!zero_allowed && *target == 0)) {
        const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
        const std::string range = seed ? "an integer from 0 to 18446744073709551615 (2^64 - 1)"
                                       : "an integer from " + std::string(zero_allowed ? "0" : "1") + " to " +
                                             std::to_string(most);
        return usage_error(cmd, std::string(name) + " needs " + range + ", got '" + value + "'" +
                                    (digits && value.find_first_not_of('0') != std::string::npos ? " (too large)" : ""));
      }
    } else if (name == "--print") {
      o.print = true;
    } else if (name == "--no-auto-calls") {
      o.auto_calls = false;
    } else if (name == "--no-shared-buffers") {
      o.shared_buffers = false;
    } else if (name == "--strict-fp") {
      o.strict_fp = true;
    } else if (name == "--check-bounds") {
      o.check_bounds = true;
    } else if (name == "--params") {
      if (!o.params.empty()) return usage_error(cmd, "--params is given twice");
      o.params = value;
    } else if (name == "--trace") {
      o.trace = value;
    } else if (name == "--trace-values") {
      o.trace_values = value;
    } else if (name == "--statement") {
      if (!parse_count(value, INT64_MAX, &o.statement) || o.statement == 0) {
        return usage_error(cmd, "--statement needs a line of the program (a positive integer), got '" + value + "'");
      }
    } else if (name == "--first-nan") {
      o.first_nan = true;
    } else if (name == "--emit") {
      if (value != "ir" && value != "lowered" && value != "source" && value != "ptx") {
        return usage_error(cmd, "--emit takes ir, lowered, source or ptx, got '" + value + "'");
      }
      o.emit = value;
      o.emit_given = true;
    } else if (name == "--timings") {
      o.timings = true;
    } else if (name == "-o") {
      o.out_file = value;
    }
  }
  if (o.device_given && !o.target.empty()) {
    return usage_error(cmd, "--device and --target are exclusive: --device needs the device present, --target does not");
  }
  if (o.timings && (o.emit_given || !o.target.empty())) {
    return usage_error(cmd, std::string("--timings builds the program for a present device and prints the times, not ") +
                                (o.emit_given ? "what --emit asks for" : "for a --target (use --device)"));
  }
  if (o.emit == "ptx" && (o.target != "cuda" || o.cuda_arch == 0)) {
    return usage_error(cmd, "--emit ptx needs a CUDA architecture: --target cuda:sm_NN (e.g. cuda:sm_90)");
  }
  if (!command->operand.empty()) {
    if (positional.empty()) return usage_error(cmd, "'kiln " + cmd + "' needs a " + std::string(command->operand));
    std::string& operand = cmd == "trace-values" ? o.values_file : o.program;
    operand = positional[0];
    if (positional.size() > 1) {
      return usage_error(cmd, "unexpected argument '" + positional[1] + "' (the " + std::string(command->operand_noun) +
                                  " is '" + operand + "')");
    }
  } else if (!positional.empty()) {
    return usage_error(cmd, "'kiln " + cmd + "' takes no arguments, got '" + positional[0] + "'");
  }
  return o;
}

std::string help_text(const std::string& command) {
  if (const CommandSpec* c = find_command(command)) {
    std::string out = "usage: " + std::string(c->synopsis) + "\n\n" + std::string(c->summary) + "\n\nOptions:\n" +
                      describe_options(c->options);
    if (!c->notes.empty()) out += "\n" + std::string(c->notes);
    return out + "\n" + std::string(kExitStatus);
  }
  std::string out =
      "usage: kiln COMMAND [options]\n"
      "       kiln --version\n"
      "\n"
      "Runs and compiles .kiln array programs.\n"
      "\n"
      "Commands:\n"
      "  run PROGRAM.kiln       compile the program for a device and run its routines\n"
      "  compile PROGRAM.kiln   print the program after parsing or lowering, or its device source\n"
      "  devices                list the drivers and devices that are present\n"
      "  trace-values FILE      print a value trace (kiln run --trace-values) as a tree\n"
      "  help [COMMAND]         print this help, or a command's\n"
      "\n"
      "Options:\n" +
      describe_options({kHelpOption, {"--version", "", "", "print kiln's version and exit"}}) +
      "\n"
      "'kiln COMMAND --help' describes a command's options.\n"
      "\n"
      "Environment:\n" +
      settings_help() + "\n" +
      std::string(kExitStatus);
  return out;
}

std::string usage_text(const std::string& command) {
  const CommandSpec* c = find_command(command);
  if (!c) return "usage: kiln COMMAND [options]   ('kiln --help' lists the commands)\n";
  return "usage: " + std::string(c->synopsis) + "   ('kiln " + std::string(c->name) +
         " --help' describes the options)\n";
}

std::string version_text() { return std::string("kiln ") + KILN_VERSION + "\n"; }

}  // namespace kiln::tools
