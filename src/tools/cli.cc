#include "tools/cli.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "kiln/base/disk_cache.h"
#include "kiln/base/random.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"
#include "tools/npy.h"

namespace kiln::tools {

namespace {

constexpr const char* kUsage =
    "usage: kiln run PROGRAM.kiln [--device NAME] [--routine NAME]... [--input NAME=FILE.npy]...\n"
    "                [--output NAME=FILE.npy]... [--seed N] [--repeat N] [--streams N] [--print]\n"
    "                [--trace FILE.json]\n"
    "       kiln compile PROGRAM.kiln [--device NAME] [--emit ir|lowered|source] [-o FILE]\n"
    "       kiln devices\n";

// A failure with its exit code.
struct Failure {
  int code;
  std::string message;
};

int report(const Failure& f) {
  std::fprintf(stderr, "%s", f.message.c_str());
  if (!f.message.empty() && f.message.back() != '\n') std::fputc('\n', stderr);
  if (f.code == kExitUsage && f.message.rfind("usage", 0) != 0 && f.message.find(": error:") == std::string::npos) {
    std::fputs(kUsage, stderr);
  }
  return f.code;
}

Failure usage(std::string message) { return {kExitUsage, "kiln: " + message}; }
Failure runtime(const Status& status, const std::string& what) {
  return {kExitRuntime, "kiln: " + what + ": " + status.to_string()};
}

// Options of `run` and `compile`.
struct Options {
  std::string command;
  std::string program;
  std::string device = "cpu";
  std::vector<std::string> routines;
  std::vector<std::pair<std::string, std::string>> inputs, outputs;
  uint64_t seed = 0;
  uint64_t repeat = 1;
  uint64_t streams = 1;
  bool print = false;
  std::string trace;
  std::string emit = "ir";
  std::string out_file;
};

bool parse_count(std::string_view text, uint64_t max, uint64_t* out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size() && *out <= max;
}

// Parses argv after the command into `o`; returns a usage failure on any problem.
std::optional<Failure> parse_options(const std::vector<std::string>& args, Options* o) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i], value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    auto take = [&](std::string* out) -> bool {
      if (has_inline) {
        *out = value;
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    auto pair = [&](std::vector<std::pair<std::string, std::string>>* list) -> std::optional<Failure> {
      std::string v;
      if (!take(&v)) return usage(arg + " needs NAME=FILE.npy");
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
        return usage(arg + " " + v + ": expected NAME=FILE.npy");
      }
      list->push_back({v.substr(0, eq), v.substr(eq + 1)});
      return std::nullopt;
    };
    std::string v;
    const bool run = o->command == "run";
    if (arg == "--device") {
      if (!take(&o->device)) return usage("--device needs a device name, e.g. cpu or interp");
    } else if (run && arg == "--routine") {
      if (!take(&v)) return usage("--routine needs a routine name");
      o->routines.push_back(v);
    } else if (run && arg == "--input") {
      if (auto f = pair(&o->inputs)) return f;
    } else if (run && arg == "--output") {
      if (auto f = pair(&o->outputs)) return f;
    } else if (run && (arg == "--seed" || arg == "--repeat" || arg == "--streams")) {
      uint64_t* target = arg == "--seed" ? &o->seed : arg == "--repeat" ? &o->repeat : &o->streams;
      uint64_t max = arg == "--seed" ? UINT64_MAX : 1000000;
      if (!take(&v) || !parse_count(v, max, target) || (arg != "--seed" && *target == 0)) {
        return usage(arg + " needs a " + (arg == "--seed" ? "non-negative" : "positive") +
                     " integer" + (v.empty() ? "" : ", got '" + v + "'"));
      }
    } else if (run && arg == "--print") {
      if (has_inline) return usage("--print takes no value");
      o->print = true;
    } else if (run && arg == "--trace") {
      if (!take(&o->trace)) return usage("--trace needs a file name");
    } else if (!run && arg == "--emit") {
      if (!take(&o->emit) || (o->emit != "ir" && o->emit != "lowered" && o->emit != "source")) {
        return usage("--emit takes ir, lowered or source");
      }
    } else if (!run && arg == "-o") {
      if (!take(&o->out_file)) return usage("-o needs a file name");
    } else if (arg.rfind("-", 0) == 0 && arg.size() > 1) {
      return usage("unknown option '" + arg + "' for 'kiln " + o->command + "'");
    } else if (o->program.empty()) {
      o->program = arg;
    } else {
      return usage("unexpected argument '" + arg + "' (the program is '" + o->program + "')");
    }
  }
  if (o->program.empty()) return usage("'kiln " + o->command + "' needs a PROGRAM.kiln");
  return std::nullopt;
}

std::variant<ir::Program, Failure> load_program(const std::string& path) {
  Result<std::string> text = read_file(path);
  if (!text.ok()) return runtime(text.status(), "cannot read the program");
  Result<ir::Program> program = lang::parse_program(*text, path);
  if (!program.ok()) return Failure{kExitUsage, program.status().message()};
  return std::move(*program);
}

std::variant<hal::DeviceRef, Failure> open_device(const std::string& name) {
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device(name);
  if (device.ok()) return *device;
  const StatusCode code = device.status().code();
  if (code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument ||
      code == StatusCode::kOutOfRange) {
    return usage("--device " + name + ": " + device.status().message());
  }
  return runtime(device.status(), "device " + name);
}

// Values of a tensor as doubles, for printing.
std::vector<double> as_doubles(ir::DType dtype, const std::string& bytes) {
  const size_t n = bytes.size() / ir::dtype_size(dtype);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == ir::DType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      out[i] = f;
    } else if (dtype == ir::DType::kF64) {
      std::memcpy(&out[i], bytes.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

std::string format_value(ir::DType dtype, double v) {
  char buf[64];
  if (dtype == ir::DType::kI32) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void print_tensor(const ir::TensorNode& node, const std::string& bytes) {
  std::vector<double> v = as_doubles(node.dtype, bytes);
  std::printf("%s : %s\n", node.name.c_str(), describe(node.dtype, node.dims).c_str());
  const size_t row = node.dims.empty() ? 1 : static_cast<size_t>(node.dims.back());
  if (v.size() <= 64) {
    for (size_t i = 0; i < v.size(); i += row) {
      std::string line = "  ";
      for (size_t j = i; j < std::min(v.size(), i + row); ++j) line += format_value(node.dtype, v[j]) + " ";
      std::printf("%s\n", line.c_str());
    }
    return;
  }
  double lo = v[0], hi = v[0], sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  std::string head = "  ";
  for (size_t i = 0; i < 8; ++i) head += format_value(node.dtype, v[i]) + " ";
  std::printf("%s... (%zu values) min %s max %s mean %s\n", head.c_str(), v.size(),
              format_value(ir::DType::kF64, lo).c_str(), format_value(ir::DType::kF64, hi).c_str(),
              format_value(ir::DType::kF64, sum / double(v.size())).c_str());
}

std::string random_bytes(const ir::TensorNode& node, uint64_t seed) {
  Random random = Random::for_name(seed, "input:" + node.name);
  const int64_t n = node.element_count();
  std::string bytes(static_cast<size_t>(n) * ir::dtype_size(node.dtype), '\0');
  for (int64_t i = 0; i < n; ++i) {
    if (node.dtype == ir::DType::kF32) {
      float f = static_cast<float>(random.uniform(-1, 1));
      std::memcpy(&bytes[4 * i], &f, 4);
    } else if (node.dtype == ir::DType::kF64) {
      double d = random.uniform(-1, 1);
      std::memcpy(&bytes[8 * i], &d, 8);
    } else {
      int32_t k = static_cast<int32_t>(random.next_u64() % 17) - 8;
      std::memcpy(&bytes[4 * i], &k, 4);
    }
  }
  return bytes;
}

int command_run(const Options& o) {
  auto loaded = load_program(o.program);
  if (auto* f = std::get_if<Failure>(&loaded)) return report(*f);
  const ir::Program& program = std::get<ir::Program>(loaded);

  // Routines to run.
  std::vector<std::string> routines = o.routines;
  if (routines.empty()) {
    if (program.find_routine("main")) routines = {"main"};
    else for (const ir::Routine& r : program.routines) routines.push_back(r.name);
  }
  for (const std::string& r : routines) {
    if (!program.find_routine(r)) return report(usage("--routine " + r + ": the program has no such routine"));
  }
  // Input files, checked against the declarations before anything is compiled.
  std::vector<std::pair<const ir::TensorNode*, std::string>> values;
  for (const auto& [name, file] : o.inputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (!node || (node->role != ir::Role::kInput && node->role != ir::Role::kParam)) {
      return report(usage("--input " + name + "=" + file + ": the program has no input or param named '" + name + "'"));
    }
    Result<NpyArray> array = read_npy(file);
    if (!array.ok()) {
      return report({array.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime,
                     "kiln: " + array.status().message()});
    }
    if (array->dtype != node->dtype || array->shape != node->dims) {
      return report(usage(file + " holds " + describe(array->dtype, array->shape) + ", but " +
                          std::string(ir::role_name(node->role)) + " '" + name + "' is " +
                          describe(node->dtype, node->dims)));
    }
    values.push_back({node, std::move(array->data)});
  }
  for (const auto& [name, file] : o.outputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (!node || (node->role != ir::Role::kOutput && node->role != ir::Role::kParam)) {
      return report(usage("--output " + name + "=" + file + ": the program has no output or param named '" + name + "'"));
    }
  }

  auto opened = open_device(o.device);
  if (auto* f = std::get_if<Failure>(&opened)) return report(*f);
  // Lowered here, so that an error in the program is told apart from a device's (exit 2, not 1).
  Result<ir::LoweredProgram> lowered = ir::lower_program(program);
  if (!lowered.ok()) return report({kExitUsage, "kiln: " + o.program + ": " + lowered.status().message()});

  // The host copies: initializers from --seed, then the given and random inputs.
  Result<std::shared_ptr<runtime::NodeTable>> nodes = runtime::NodeTable::create(program, o.seed);
  if (!nodes.ok()) return report(runtime(nodes.status(), "loading " + o.program));
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role != ir::Role::kInput) continue;
    bool given = std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.first == &node; });
    if (!given) values.push_back({&node, random_bytes(node, o.seed)});
  }
  for (const auto& [node, bytes] : values) {
    Status st = (*nodes)->tensor(node->name)->write(std::as_bytes(std::span(bytes.data(), bytes.size())));
    if (!st.ok()) return report(runtime(st, "setting " + node->name));
  }

  // N copies of the routine sequence, each in its own context on its own stream.
  auto trace = o.trace.empty() ? nullptr : std::make_shared<runtime::Trace>();
  auto backend = runtime::Backend::create(std::get<hal::DeviceRef>(opened), {0, trace});
  if (!backend.ok()) return report(runtime(backend.status(), "opening " + o.device));
  auto code = (*backend)->compile_lowered(std::move(*lowered), routines);
  if (!code.ok()) return report(runtime(code.status(), "compiling " + o.program + " for " + o.device));
  // Each copy links every routine once; the schedule runs them in the order named, repeats
  // included (`--routine step --routine step`).
  struct Copy {
    runtime::ContextRef context;
    std::vector<runtime::RoutineRef> schedule;
  };
  std::vector<Copy> copies;
  for (uint64_t s = 0; s < o.streams; ++s) {
    auto stream = (*backend)->new_stream();
    if (!stream.ok()) return report(runtime(stream.status(), "creating stream " + std::to_string(s)));
    auto root = (*backend)->make_context(*stream, *nodes);
    if (!root.ok()) return report(runtime(root.status(), "creating a context"));
    auto linked = (*backend)->link_batch(*root, *code);
    if (!linked.ok()) return report(runtime(linked.status(), "linking " + o.program));
    Copy copy{linked->context, {}};
    for (const std::string& name : routines) {
      auto it = std::find_if(linked->routines.begin(), linked->routines.end(),
                             [&](const runtime::RoutineRef& r) { return r->name() == name; });
      if (it == linked->routines.end()) {
        return report(runtime(internal_error("routine '" + name + "' was not linked"), "linking " + o.program));
      }
      copy.schedule.push_back(*it);
    }
    copies.push_back(std::move(copy));
  }
  // Outputs are read explicitly from the first stream's copy.
  (*nodes)->set_automatic_transfers(false);

  std::vector<double> times;
  for (uint64_t rep = 0; rep < o.repeat; ++rep) {
    int64_t t0 = now_ns();
    for (size_t c = 0; c < copies.size(); ++c) {
      for (const runtime::RoutineRef& r : copies[c].schedule) {
        // `x.merge` reads the next copy's x (in a ring; with one stream, its own x).
        if (!r->merge_node().empty()) {
          const runtime::ContextRef& next = copies[(c + 1) % copies.size()].context;
          Status st = runtime::device_to_device(r->merge_node(), runtime::MergeMode::kCopy,
                                                copies[c].context, next).status();
          if (!st.ok()) return report(runtime(st, "filling the merge buffer of " + r->name()));
        }
        Status st = r->run();
        if (!st.ok()) return report(runtime(st, "running routine " + r->name()));
      }
    }
    Status st = (*backend)->await();
    if (!st.ok()) return report(runtime(st, "running " + o.program));
    times.push_back(double(now_ns() - t0) / 1e6);
  }
  if (o.repeat > 1) {
    std::sort(times.begin(), times.end());
    std::printf("%llu runs: min %.3f ms, median %.3f ms, max %.3f ms\n",
                static_cast<unsigned long long>(o.repeat), times.front(), times[times.size() / 2],
                times.back());
  }
  auto fetch = [&](const ir::TensorNode& node, std::string* bytes) -> Status {
    bytes->resize(static_cast<size_t>(node.element_count()) * ir::dtype_size(node.dtype));
    if (copies.front().context->has_array(node.name)) {
      KILN_RETURN_IF_ERROR(runtime::to_host(copies.front().context, node.name).status());
    }
    KILN_ASSIGN_OR_RETURN(runtime::Tensor tensor, (*nodes)->tensor(node.name));
    return tensor.read(std::as_writable_bytes(std::span(bytes->data(), bytes->size())));
  };
  for (const auto& [name, file] : o.outputs) {
    const ir::TensorNode* node = program.find_node(name);
    NpyArray array{node->dtype, node->dims, {}};
    Status st = fetch(*node, &array.data);
    if (st.ok()) st = write_npy(file, array);
    if (!st.ok()) return report(runtime(st, "writing " + name + " to " + file));
  }
  if (trace) {
    Status st = trace->write_json(o.trace);
    if (!st.ok()) return report(runtime(st, "writing the trace"));
  }
  if (o.print) {
    for (const ir::TensorNode& node : program.nodes) {
      if (node.role != ir::Role::kOutput) continue;
      std::string bytes;
      Status st = fetch(node, &bytes);
      if (!st.ok()) return report(runtime(st, "reading " + node.name));
      print_tensor(node, bytes);
    }
  }
  return kExitOk;
}

int command_compile(const Options& o) {
  auto loaded = load_program(o.program);
  if (auto* f = std::get_if<Failure>(&loaded)) return report(*f);
  const ir::Program& program = std::get<ir::Program>(loaded);
  std::string text;
  if (o.emit == "ir") {
    text = ir::print_program(program);
  } else {
    Result<ir::LoweredProgram> lowered = ir::lower_program(program);
    if (!lowered.ok()) return report({kExitUsage, "kiln: " + o.program + ": " + lowered.status().message()});
    if (o.emit == "lowered") {
      text = ir::print_lowered(*lowered);
    } else {
      // Only the device's description is needed, not a running device.
      auto opened = open_device(o.device);
      if (auto* f = std::get_if<Failure>(&opened)) return report(*f);
      std::string format;
      Result<std::string> source = runtime::generate_source(
          *lowered, std::get<hal::DeviceRef>(opened)->info().capabilities, &format);
      if (!source.ok()) return report(runtime(source.status(), "generating source"));
      text = *source;
    }
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (o.out_file.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  Status st = write_file_atomic(o.out_file, text);
  return st.ok() ? kExitOk : report(runtime(st, "writing " + o.out_file));
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
    }
  }
  return kExitOk;
}

}  // namespace

int run_cli(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "devices") {
    if (args.size() > 1) return report(usage("'kiln devices' takes no arguments"));
    return command_devices();
  }
  if (args[0] != "run" && args[0] != "compile") {
    return report(usage("unknown command '" + args[0] + "'"));
  }
  Options o;
  o.command = args[0];
  if (auto failure = parse_options(args, &o)) return report(*failure);
  return o.command == "run" ? command_run(o) : command_compile(o);
}

}  // namespace kiln::tools
