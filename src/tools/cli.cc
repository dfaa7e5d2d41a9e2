#include "tools/cli.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "kiln/base/file.h"
#include "kiln/base/log.h"
#include "kiln/base/random.h"
#include "kiln/base/settings.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/library_versions.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"
#include "tools/compile_timings.h"
#include "tools/npy.h"
#include "tools/options.h"
#include "tools/output_files.h"
#include "tools/print.h"
#include "tools/ranks.h"
#include "tools/run_values.h"
#include "base/suggest.h"
#include "tools/trace_values.h"

namespace kiln::tools {

namespace {

// The most bytes kiln reads as a program: far beyond any real one, small enough that reading
// a device that never ends (/dev/zero) stops early.
constexpr size_t kMaxProgramBytes = size_t{64} << 20;

int report(const Failure& f) {
  std::fprintf(stderr, "%s", f.message.c_str());
  if (!f.message.empty() && f.message.back() != '\n') std::fputc('\n', stderr);
  if (f.usage_of) std::fputs(usage_text(*f.usage_of).c_str(), stderr);
  return f.code;
}

// An --input file that does not hold what its node declares is a usage error; one that cannot be
// read is a runtime failure.
Failure input_failure(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument ? invalid_input(status.message())
                                                       : Failure{kExitRuntime, "kiln: " + status.message(), std::nullopt};
}

ir::LowerOptions lower_options(const Options& o) {
  ir::LowerOptions lower;
  lower.auto_calls = o.auto_calls;
  lower.shared_buffers = o.shared_buffers;
  lower.reassociate = !o.strict_fp;
  lower.check_bounds = o.check_bounds;
  lower.trace_values = !o.trace_values.empty();
  return lower;
}

std::variant<ir::Program, Failure> load_program(const std::string& path) {
  Result<std::string> text = read_bounded_file(path, kMaxProgramBytes, "the program");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kInvalidArgument) return invalid_input(text.status().message());
    return runtime_failure(text.status(), "cannot read the program");
  }
  Result<ir::Program> program = lang::parse_program(*text, path);
  if (!program.ok()) return Failure{kExitUsage, program.status().message(), std::nullopt};
  return std::move(*program);
}

// A program that parsed but cannot be lowered (a memory mode the compiler cannot honour): at the
// declaration's FILE:LINE:COL with the line quoted, as parse errors are, where lowering says where.
Failure lowering_failure(const std::string& path, const Status& status) {
  if (std::optional<ir::Diagnostic> located = ir::located_diagnostic(status.message())) {
    Result<std::string> text = read_bounded_file(path, kMaxProgramBytes, "the program");
    return Failure{kExitUsage, lang::format_diagnostic(path, text.ok() ? *text : "", *located), std::nullopt};
  }
  return invalid_input(path + ": " + status.message());
}

// The program at the sizes of this command (language version 2): bound from the shapes of the
// --input files of inputs and from --size, then specialized; `values` (when given) receives the
// sizes' values. A program without sizes comes back as it is (a --size for it is an error).
// The input files it opens to read their shapes stay open in `readers` (by input name), for the
// run to read their data: a FIFO cannot be opened twice.
std::variant<ir::Program, Failure> at_bound_sizes(ir::Program program, const Options& o,
                                                  std::map<std::string, NpyReader, std::less<>>* readers,
                                                  std::vector<int64_t>* bound = nullptr) {
  if (!program.has_sizes() && o.sizes.empty()) return program;
  std::map<std::string, std::vector<int64_t>, std::less<>> shapes;
  for (const auto& [name, file] : o.inputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (!readers || !node || node->role != ir::Role::kInput || readers->count(name)) continue;  // reported later
    Result<NpyReader> reader = NpyReader::open(file);
    if (!reader.ok()) return input_failure(reader.status());
    shapes[name] = reader->header().shape;
    readers->emplace(name, std::move(*reader));
  }
  Result<std::vector<int64_t>> values =
      ir::bind_sizes(program, shapes, o.sizes, "; give it with --size NAME=VALUE");
  if (!values.ok()) return invalid_input(o.program + ": " + values.status().message());
  Result<ir::Program> specialized = ir::specialize_sizes(program, *values);
  if (!specialized.ok()) return invalid_input(o.program + ": " + specialized.status().message());
  if (bound) *bound = std::move(*values);
  return std::move(*specialized);
}

std::variant<hal::DeviceRef, Failure> open_device(const std::string& name) {
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device(name);
  if (device.ok()) return *device;
  // An unknown driver, a malformed NAME:N, an ordinal past the driver's devices or a bad KILN_*
  // setting is an error in what was given; a driver that is not there (no platform, no GPU) is a
  // runtime failure.
  const StatusCode code = device.status().code();
  if (code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument || code == StatusCode::kOutOfRange) {
    return invalid_input("--device " + name + ": " + device.status().message());
  }
  return runtime_failure(device.status(), "device " + name);
}

// The names of a program's routines, or of its nodes with one of `roles`, for "did you mean".
std::vector<std::string> routine_names(const ir::Program& program) {
  std::vector<std::string> names;
  for (const ir::Routine& r : program.routines) names.push_back(r.name);
  return names;
}
std::vector<std::string> node_names(const ir::Program& program, ir::Role a, ir::Role b) {
  std::vector<std::string> names;
  for (const ir::TensorNode& n : program.nodes) {
    if (n.role == a || n.role == b) names.push_back(n.name);
  }
  return names;
}

int command_run(const Options& given) {
  // Under mpirun, this rank's paths ({rank}) and outputs; outside it, rank 0 of 1.
  Result<RunRank> rank = run_rank();
  if (!rank.ok()) return report(runtime_failure(rank.status(), "joining the job that mpirun started"));
  Options o = options_at_rank(given, rank->rank);
  auto loaded = load_program(o.program);
  if (auto* f = std::get_if<Failure>(&loaded)) return report(*f);
  if (!o.params.empty()) {
    // An --input of the param's own wins over its file in the folder.
    Result<ParamFiles> files = param_files(std::get<ir::Program>(loaded), o.program, o.params);
    if (!files.ok()) return report(input_failure(files.status()));
    for (auto& file : *files) {
      auto given_too = [&](const auto& in) { return in.first == file.first; };
      if (std::none_of(o.inputs.begin(), o.inputs.end(), given_too)) o.inputs.push_back(std::move(file));
    }
  }
  // Sizes are bound before anything else is checked: the checks see the shapes of this run.
  std::map<std::string, NpyReader, std::less<>> readers;
  // A program with sizes is compiled as it is, once for every size, and run at these.
  const ir::Program general = std::get<ir::Program>(loaded);
  std::vector<int64_t> size_values;
  auto sized = at_bound_sizes(std::move(std::get<ir::Program>(loaded)), o, &readers, &size_values);
  if (auto* f = std::get_if<Failure>(&sized)) return report(*f);
  const ir::Program& program = std::get<ir::Program>(sized);
  if (auto f = check_outputs(o, &program)) return report(*f);

  // Routines to run.
  std::vector<std::string> routines = o.routines;
  if (routines.empty()) {
    if (program.find_routine("main")) routines = {"main"};
    else for (const ir::Routine& r : program.routines) routines.push_back(r.name);
  }
  if (routines.empty()) {
    return report(invalid_input(o.program + ": the program has no statements, so there is nothing to run"));
  }
  for (const std::string& r : routines) {
    if (!program.find_routine(r)) {
      std::string list;
      for (const std::string& name : routine_names(program)) list += (list.empty() ? "" : ", ") + name;
      return report(invalid_input("--routine " + r + ": the program has no such routine" +
                                  did_you_mean(r, routine_names(program)) + " (its routines: " + list + ")"));
    }
  }
  if (auto f = check_streams_across_ranks(*rank, o, program, routines)) return report(*f);
  // Input files, their headers checked against the declarations before anything is compiled;
  // their data is read into the arrays once they are linked.
  std::vector<RunInput> inputs;
  for (const auto& [name, file] : o.inputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (!node || (node->role != ir::Role::kInput && node->role != ir::Role::kParam)) {
      return report(invalid_input("--input " + name + "=" + file + ": the program has no input or param named '" +
                                  name + "'" + did_you_mean(name, node_names(program, ir::Role::kInput, ir::Role::kParam))));
    }
    auto opened_already = readers.find(name);
    Result<RunInput> input = opened_already != readers.end() ? run_input(*node, std::move(opened_already->second))
                                                             : open_run_input(*node, file);
    if (opened_already != readers.end()) readers.erase(opened_already);
    if (!input.ok()) return report(input_failure(input.status()));
    inputs.push_back(std::move(*input));
  }
  for (const auto& [name, file] : o.outputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (node && (node->role == ir::Role::kTensor || node->role == ir::Role::kInput) && !node->temporary) {
      // An intermediate may be inlined away or kept in registers: it has no value to write.
      return report(invalid_input("--output " + name + "=" + file + ": '" + name + "' is " +
                                  (node->role == ir::Role::kInput ? "an input (the host gives it; --input sets it)"
                                                                  : "an intermediate (`tensor`): the compiler may never "
                                                                    "store it; declare it `output` (or `param`) to see its value")));
    }
    if (!node || (node->role != ir::Role::kOutput && node->role != ir::Role::kParam)) {
      return report(invalid_input("--output " + name + "=" + file + ": the program has no output or param named '" +
                                  name + "'" + did_you_mean(name, node_names(program, ir::Role::kOutput, ir::Role::kParam))));
    }
  }

  auto opened = open_device(o.device);
  if (auto* f = std::get_if<Failure>(&opened)) return report(*f);
  // From here on standard output is captured while value tracing (docs/tracing.md).
  std::shared_ptr<runtime::ValueTrace> value_trace;
  ir::LowerOptions lower = lower_options(o);
  if (!o.trace_values.empty()) {
    Result<std::shared_ptr<runtime::ValueTrace>> started = runtime::ValueTrace::start();
    if (!started.ok()) {
      const std::string what = "--trace-values: " + started.status().message();
      return report(started.status().code() == StatusCode::kInvalidArgument ? invalid_input(what)
                                                                             : runtime_failure(started.status(), "--trace-values"));
    }
    value_trace = std::move(*started);
    lower.trace_lines = value_trace->lines_per_statement();
  }
  // Lowered here, so that an error in the program is told apart from a device's (exit 2, not 1).
  auto trace = o.trace.empty() ? nullptr : std::make_shared<runtime::Trace>();
  Result<ir::LoweredProgram> lowered =
      runtime::lower_traced(general.has_sizes() ? general : program, lower, trace.get());
  if (!lowered.ok()) return report(lowering_failure(o.program, lowered.status()));

  // The host copies: initializers from --seed; inputs no file gives get the seed's values.
  Result<std::shared_ptr<runtime::NodeTable>> nodes = runtime::NodeTable::create(program, o.seed);
  if (!nodes.ok()) return report(runtime_failure(nodes.status(), "loading " + o.program));
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role != ir::Role::kInput) continue;
    bool given = std::any_of(inputs.begin(), inputs.end(), [&](const RunInput& in) { return in.node == &node; });
    if (!given) inputs.push_back({&node, std::nullopt});
  }

  // N copies of the routine sequence, each in its own context on its own stream.
  runtime::BackendOptions backend_options;
  backend_options.trace = trace;
  backend_options.value_trace = value_trace;
  auto backend = runtime::Backend::create(std::get<hal::DeviceRef>(opened), backend_options);
  if (!backend.ok()) return report(runtime_failure(backend.status(), "opening " + o.device));
  auto code = (*backend)->compile_lowered(std::move(*lowered), routines);
  if (!code.ok()) return report(runtime_failure(code.status(), "compiling " + o.program + " for " + o.device));
  if (general.has_sizes()) {
    code = runtime::Code::at_sizes(*code, size_values);
    if (!code.ok()) return report(invalid_input(o.program + ": " + code.status().message()));
  }
  // Each copy links every routine once; the schedule runs them in the order named, repeats
  // included (`--routine step --routine step`).
  struct Copy {
    runtime::ContextRef context;
    std::vector<runtime::RoutineRef> schedule;
  };
  std::vector<Copy> copies;
  for (uint64_t s = 0; s < o.streams; ++s) {
    auto stream = (*backend)->new_stream();
    if (!stream.ok()) return report(runtime_failure(stream.status(), "creating stream " + std::to_string(s)));
    auto root = (*backend)->make_context(*stream, *nodes);
    if (!root.ok()) return report(runtime_failure(root.status(), "creating a context"));
    auto linked = (*backend)->link_batch(*root, *code);
    if (!linked.ok()) return report(runtime_failure(linked.status(), "linking " + o.program));
    Copy copy{linked->context, {}};
    for (const std::string& name : routines) {
      auto it = std::find_if(linked->routines.begin(), linked->routines.end(),
                             [&](const runtime::RoutineRef& r) { return r->name() == name; });
      if (it == linked->routines.end()) {
        return report(runtime_failure(internal_error("routine '" + name + "' was not linked"), "linking " + o.program));
      }
      copy.schedule.push_back(*it);
    }
    copies.push_back(std::move(copy));
  }
  // Outputs are read explicitly from the first stream's copy.
  (*nodes)->set_automatic_transfers(false);
  std::vector<runtime::ContextRef> contexts;
  for (const Copy& copy : copies) contexts.push_back(copy.context);
  if (Status st = set_run_inputs(inputs, o.seed, **nodes, contexts); !st.ok()) return report(input_failure(st));

  std::vector<double> times;
  for (uint64_t rep = 0; rep < o.warmup + o.repeat; ++rep) {
    int64_t t0 = now_ns();
    for (size_t c = 0; c < copies.size(); ++c) {
      for (const runtime::RoutineRef& r : copies[c].schedule) {
        // `x.merge` reads the next copy's x (in a ring; with one stream, its own x).
        if (!r->merge_node().empty()) {
          const runtime::ContextRef& next = copies[(c + 1) % copies.size()].context;
          Status st = runtime::device_to_device(r->merge_node(), runtime::MergeMode::kCopy,
                                                copies[c].context, next).status();
          if (!st.ok()) return report(runtime_failure(st, "filling the merge buffer of " + r->name()));
        }
        Status st = r->run();
        if (!st.ok()) return report(runtime_failure(st, "running routine " + r->name()));
      }
    }
    Status st = (*backend)->await();
    if (!st.ok()) return report(runtime_failure(st, "running " + o.program));
    if (rep >= o.warmup) times.push_back(double(now_ns() - t0) / 1e6);
  }
  if (o.repeat > 1 && rank->rank == 0) {
    std::sort(times.begin(), times.end());
    std::printf("%llu runs: min %s ms, median %s ms, max %s ms\n", static_cast<unsigned long long>(o.repeat),
                milliseconds_text(times.front()).c_str(), milliseconds_text(times[times.size() / 2]).c_str(),
                milliseconds_text(times.back()).c_str());
  }
  // Every output is staged, and written only once every rank has staged its own: a failed run
  // writes no file.
  StagedFiles files;
  Status staged;
  std::string staging;  // what failed to stage
  for (const auto& [name, file] : o.outputs) {
    const ir::TensorNode* node = program.find_node(name);
    // An init-capture of the path: Clang 14 cannot capture a structured binding itself.
    staged = with_run_output(copies.front().context, **nodes, *node, [&, &path = file](std::span<const std::byte> bytes) {
      return stage_npy(files, path, node->dtype, node->dims, bytes);
    });
    staging = "writing " + name + " to " + file;
    if (!staged.ok()) break;
  }
  if (trace && staged.ok()) {
    staged = files.stage(o.trace, trace->json());
    staging = "writing the trace";
  }
  if (value_trace && staged.ok()) {
    Result<std::string> lines = value_trace->json_lines();
    staged = lines.ok() ? files.stage(o.trace_values, *lines) : lines.status();
    if (staged.ok()) staged = value_trace->stop();
    staging = "writing the value trace";
  }
  Result<bool> everyone = every_rank_staged(*rank, staged.ok());
  if (!staged.ok()) return report(runtime_failure(staged, staging));
  if (!everyone.ok()) return report(runtime_failure(everyone.status(), "agreeing with the other ranks on the outputs"));
  if (!*everyone) {
    return report(Failure{kExitRuntime, "kiln: another rank of the job failed to stage its outputs: no rank writes any",
                          std::nullopt});
  }
  if (Status st = files.commit(); !st.ok()) return report(runtime_failure(st, "writing the outputs"));
  if (o.print) {
    for (const ir::TensorNode& node : program.nodes) {
      if (node.role != ir::Role::kOutput) continue;
      Status st = with_run_output(copies.front().context, **nodes, node, [&](std::span<const std::byte> bytes) {
        print_tensor(node, bytes);
        return Status();
      });
      if (!st.ok()) return report(runtime_failure(st, "reading " + node.name));
    }
  }
  return kExitOk;
}

// What code generation needs of a --target: its driver and the format it builds.
hal::DeviceInfo target_device_info(const std::string& target) {
  hal::DeviceInfo info;
  info.driver = target;
  info.name = target + ":0";
  info.capabilities.executable_formats = {target == "cpu" ? "c" : target == "opencl" ? "opencl-c"
                                          : target == "cuda" ? "cuda-c" : "kiln-loop"};
  return info;
}

int command_compile(const Options& o) {
  if (auto f = check_outputs(o)) return report(*f);
  const int64_t parse_start = now_ns();
  auto loaded = load_program(o.program);
  const double parse_seconds = seconds_since(parse_start);
  if (auto* f = std::get_if<Failure>(&loaded)) return report(*f);
  // A program with sizes compiles as it is, for every size (its kernels read the sizes); with
  // --size, it is specialized to those values first.
  if (!o.sizes.empty()) {
    auto sized = at_bound_sizes(std::move(std::get<ir::Program>(loaded)), o, nullptr);
    if (auto* f = std::get_if<Failure>(&sized)) return report(*f);
    loaded = std::move(std::get<ir::Program>(sized));
  }
  const ir::Program& program = std::get<ir::Program>(loaded);
  std::string text;
  if (o.timings) {
    auto opened = open_device(o.device);
    if (auto* f = std::get_if<Failure>(&opened)) return report(*f);
    Result<std::string> timings =
        compile_timings(program, lower_options(o), std::get<hal::DeviceRef>(opened), parse_seconds);
    if (!timings.ok()) {
      if (timings.status().code() == StatusCode::kInvalidArgument) return report(lowering_failure(o.program, timings.status()));
      return report(runtime_failure(timings.status(), "compiling " + o.program));
    }
    text = *timings;
  } else if (o.emit == "ir") {
    text = ir::print_program(o.auto_calls ? ir::with_library_calls(program) : program);
  } else {
    Result<ir::LoweredProgram> lowered = ir::lower_program(program, lower_options(o));
    if (!lowered.ok()) return report(lowering_failure(o.program, lowered.status()));
    if (o.emit == "lowered") {
      text = ir::print_lowered(*lowered);
    } else {
      // Only the device's description is needed, not a running device; a --target describes
      // one that need not be present.
      hal::DeviceInfo info;
      if (!o.target.empty()) {
        info = target_device_info(o.target);
      } else {
        auto opened = open_device(o.device);
        if (auto* f = std::get_if<Failure>(&opened)) return report(*f);
        info = std::get<hal::DeviceRef>(opened)->info();
      }
      if (o.cuda_arch) {
        // An architecture NVRTC lacks is the user's to change (exit 2); no NVRTC is this
        // machine's (exit 1) where PTX is asked for. Source needs no NVRTC: without one, any
        // architecture from sm_50 (the oldest current CUDA builds for) is taken.
        Status arch = drivers::check_cuda_arch(o.cuda_arch);
        if (arch.code() == StatusCode::kInvalidArgument) return report(invalid_input("--target: " + arch.message()));
        if (!arch.ok() && o.emit == "ptx") return report(runtime_failure(arch, "--emit ptx"));
        if (!arch.ok() && o.cuda_arch < 50) {
          return report(invalid_input("--target: sm_" + std::to_string(o.cuda_arch) +
                                      " is older than every architecture CUDA builds for (sm_50 and later)"));
        }
      }
      std::string format;
      Result<std::string> source = runtime::generate_source(*lowered, info, &format);
      if (!source.ok()) return report(runtime_failure(source.status(), "generating source"));
      text = *source;
      if (o.emit == "ptx") {
        Result<std::string> ptx = drivers::compile_cuda_ptx(text, o.cuda_arch, o.program);
        if (!ptx.ok()) return report(runtime_failure(ptx.status(), "building the PTX of " + o.program));
        text = *ptx;
      }
    }
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (o.out_file.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  Status st = write_output_file(o.out_file, text);
  return st.ok() ? kExitOk : report(runtime_failure(st, "writing " + o.out_file));
}

int command_devices() {
  for (const hal::DriverRef& driver : drivers::builtin_registry().drivers()) {
    Status available = driver->availability();
    if (!available.ok()) {
      std::printf("%s: unavailable: %s\n", driver->name().c_str(), available.message().c_str());
      continue;
    }
    Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate_devices();
    if (!devices.ok()) {
      std::printf("%s: unavailable: %s\n", driver->name().c_str(), devices.status().message().c_str());
      continue;
    }
    for (const hal::DeviceInfo& d : *devices) {
      const hal::DeviceCapabilities& c = d.capabilities;
      std::string formats;
      for (const std::string& f : c.executable_formats) formats += (formats.empty() ? "" : ", ") + f;
      std::printf("%s: %s\n  compute units %u, memory %.1f GiB, max allocation %.1f GiB, "
                  "max workgroup size %u, fp64 %s, fp16 %s, local memory %llu bytes, "
                  "unified memory %s, formats: %s\n",
                  d.name.c_str(), d.description.c_str(), c.compute_units,
                  double(c.total_memory) / double(1ull << 30),
                  double(c.max_allocation_size) / double(1ull << 30), c.max_workgroup_size,
                  c.fp64 ? "yes" : "no", c.fp16 ? "yes" : "no",
                  static_cast<unsigned long long>(c.local_memory_size),
                  c.unified_memory ? "yes" : "no", formats.c_str());
      std::string libraries;
      for (const std::string& l : ral::library_versions(d.driver)) libraries += (libraries.empty() ? "" : ", ") + l;
      if (!libraries.empty()) std::printf("  libraries: %s\n", libraries.c_str());
    }
  }
  return kExitOk;
}

int run_command_line(const std::vector<std::string>& args) {
  if (args.empty()) {
    // `kiln` alone: the usage, on standard error, as for any other usage error.
    std::fputs(help_text("").c_str(), stderr);
    return kExitUsage;
  }
  const std::string& first = args[0];
  const std::vector<std::string> commands = command_names();
  auto is_command = [&](const std::string& name) {
    return std::find(commands.begin(), commands.end(), name) != commands.end();
  };
  if (first == "--help" || first == "-h" || first == "help") {
    if (args.size() > 2) return report(usage_error("", "'kiln " + first + "' takes at most a command name"));
    const std::string command = args.size() > 1 ? args[1] : "";
    if (!command.empty() && !is_command(command)) {
      return report(usage_error("", "unknown command '" + command + "'" + did_you_mean(command, commands)));
    }
    std::fputs(help_text(command == "help" ? "" : command).c_str(), stdout);
    return kExitOk;
  }
  if (first == "--version") {
    if (args.size() > 1) return report(usage_error("", "'kiln --version' takes no arguments"));
    std::fputs(version_text().c_str(), stdout);
    return kExitOk;
  }
  if (!first.empty() && first[0] == '-') {
    return report(usage_error("", "unknown option '" + first + "'" + did_you_mean(first, {"--help", "--version"}, "")));
  }
  if (!is_command(first)) {
    return report(usage_error("", "unknown command '" + first + "'" + did_you_mean(first, commands)));
  }
  std::variant<Options, Failure> parsed = parse_options(args);
  if (auto* f = std::get_if<Failure>(&parsed)) return report(*f);
  const Options& o = std::get<Options>(parsed);
  if (o.help) {
    std::fputs(help_text(o.command).c_str(), stdout);
    return kExitOk;
  }
  // Every KILN_* setting is checked before anything runs, so that a malformed one is a usage
  // error whichever command or device would have read it (`kiln devices` included).
  if (Status checked = check_settings(); !checked.ok()) return report(invalid_input(checked.message()));
  if (o.command == "devices") return command_devices();
  if (o.command == "trace-values") {
    std::optional<Failure> f = print_value_trace(o, stdout);
    return f ? report(*f) : kExitOk;
  }
  return o.command == "run" ? command_run(o) : command_compile(o);
}

}  // namespace

int run_cli(const std::vector<std::string>& args) {
  int code = run_command_line(args);
  // What was printed must have arrived: `kiln compile > /dev/full` is an I/O failure.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "kiln: writing to standard output failed\n");
    if (code == kExitOk) code = kExitRuntime;
  }
  leave_job_if_failed(code);
  return code;
}

}  // namespace kiln::tools
