#include "tools/compile_timings.h"

#include <algorithm>
#include <cstdio>
#include <span>
#include <vector>

#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/loop/optimize.h"
#include "kiln/runtime/code.h"

namespace kiln::tools {

namespace {

std::string row(const std::string& what, double seconds) {
  char line[64];
  std::snprintf(line, sizeof line, "%10.3f s  ", seconds);
  return line + what + "\n";
}

// One kernel's source alone in the device's format, as generate_source writes it for all.
Result<std::string> kernel_source(const ir::Kernel& kernel, const ir::Program& program, const std::string& format) {
  if (format == "kiln-loop") return ir::print_kernel(kernel, &program);
  codegen::EmitOptions options;
  if (format == "opencl-c") options.dialect = codegen::Dialect::kOpenCL;
  if (format == "cuda-c") options.dialect = codegen::Dialect::kCuda;
  return codegen::emit_kernels(std::span<const ir::Kernel>(&kernel, 1), &program, options);
}

}  // namespace

Result<std::string> compile_timings(const ir::Program& program, const ir::LowerOptions& options,
                                    const hal::DeviceRef& device, double parse_seconds) {
  const int64_t start = now_ns();
  // Lowering and the passes apart: lower_program runs the passes on every kernel when
  // `optimize` is set (and no values are traced); here they run one kernel at a time, timed.
  ir::LowerOptions unoptimized = options;
  unoptimized.optimize = false;
  int64_t begin = now_ns();
  KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, ir::lower_program(program, unoptimized));
  const double lowering = seconds_since(begin);

  struct KernelTimes {
    std::string name;
    double passes = 0, emitting = 0;
    size_t lines = 0;
  };
  std::vector<KernelTimes> kernels;
  double passes = 0;
  for (ir::LoweredRoutine& routine : lowered.routines) {
    for (ir::Kernel& kernel : routine.kernels) {
      begin = now_ns();
      if (options.optimize && !options.trace_values) {
        ir::optimize_kernel(kernel, ir::OptimizeOptions{.reassociate = options.reassociate});
      }
      kernels.push_back({kernel.name, seconds_since(begin)});
      passes += kernels.back().passes;
    }
  }

  std::string format;
  begin = now_ns();
  KILN_ASSIGN_OR_RETURN(std::string source, runtime::generate_source(lowered, device->info(), &format));
  const double emitting = seconds_since(begin);
  size_t k = 0;
  for (const ir::LoweredRoutine& routine : lowered.routines) {
    for (const ir::Kernel& kernel : routine.kernels) {
      begin = now_ns();
      KILN_ASSIGN_OR_RETURN(std::string text, kernel_source(kernel, lowered.program, format));
      kernels[k].emitting = seconds_since(begin);
      kernels[k++].lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    }
  }

  begin = now_ns();
  Result<hal::ExecutableRef> built = runtime::build_executable(lowered, device);
  const double building = seconds_since(begin);
  if (!built.ok()) return built.status().annotate("building for " + device->info().name);

  std::string out = "compile timings on " + device->info().name + " (" + format + ", " +
                    std::to_string(kernels.size()) + " kernels, " +
                    std::to_string(std::count(source.begin(), source.end(), '\n')) + " lines of source)\n";
  out += row("parsing", parse_seconds);
  out += row("lowering", lowering);
  out += row("passes", passes);
  out += row("emitting", emitting);
  out += row("building, of which:", building);
  if (*built) {
    for (const hal::BuildStep& step : (*built)->build_steps()) out += row("  " + step.what, step.seconds);
  }
  out += row("total", parse_seconds + seconds_since(start));
  out += "\nper kernel (emitting: the kernel alone):\n";
  char header[96];
  std::snprintf(header, sizeof header, "%10s  %10s  %7s  %s\n", "passes", "emitting", "lines", "kernel");
  out += header;
  for (const KernelTimes& t : kernels) {
    char line[96];
    std::snprintf(line, sizeof line, "%8.3f s  %8.3f s  %7zu  ", t.passes, t.emitting, t.lines);
    out += line + t.name + "\n";
  }
  return out;
}

}  // namespace kiln::tools
