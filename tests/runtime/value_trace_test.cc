// Value tracing (kiln/runtime/value_trace.h, docs/tracing.md): what traced routines log on each
// device, that the devices agree, that several streams on two devices at once lose and mix no
// line, that other output on standard output passes through, and that untraced code is the code
// of an untraced build.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"
#include "kiln/runtime/value_trace.h"
#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using nlohmann::json;
using runtime::CompileOptions;
using runtime::ValueTrace;

// h is inlined into z's statement; x[1] = 0 makes z[1] = log(0) = -inf; y is a reduction.
constexpr const char kValueTraceProgram[] = R"(input x : f32[4]
param w : f32[4, 3] = 0.5
tensor h : f32[4]
output z : f32[4]
output y : f32[3]
routine step {
  h[i] = x[i] * 2
  z[i] = log(h[i]) + w[i, 0]
  y[j] = sum(x[i] * w[i, j])
}
)";

bool driver_available(const std::string& name) {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find(name);
  return driver.ok() && (*driver)->availability().ok();
}

CompileOptions traced(int64_t lines = 16) {
  CompileOptions options;
  options.lower.trace_values = true;
  options.lower.trace_lines = lines;
  return options;
}

// A backend on `device` (or `backend`, when given) logging into `trace` (null: none), with
// routine `routine` of `program` compiled with tracing (`lines` per statement) and linked on a
// new stream over `nodes`.
struct TracedRoutine {
  std::shared_ptr<Backend> backend;
  RoutineRef routine;
};
Result<TracedRoutine> traced_routine(const std::string& device, std::shared_ptr<ValueTrace> trace,
                                     const ir::Program& program, std::shared_ptr<NodeTable> nodes,
                                     const std::string& routine, int64_t lines = 16,
                                     std::shared_ptr<Backend> backend = nullptr) {
  if (!backend) {
    KILN_ASSIGN_OR_RETURN(hal::DeviceRef dev, drivers::builtin_registry().create_device(device));
    runtime::BackendOptions options;
    options.value_trace = std::move(trace);
    KILN_ASSIGN_OR_RETURN(backend, Backend::create(dev, options));
  }
  KILN_ASSIGN_OR_RETURN(StreamRef stream, backend->new_stream(backend->streams().empty() ? "s0" : ""));
  KILN_ASSIGN_OR_RETURN(ContextRef root, backend->make_context(stream, std::move(nodes), "root"));
  KILN_ASSIGN_OR_RETURN(CodeRef code, backend->compile(program, routine, traced(lines)));
  KILN_ASSIGN_OR_RETURN(runtime::Linked linked, backend->link(root, code, routine));
  return TracedRoutine{backend, linked.routine};
}

std::vector<json> parse_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// Runs `step` `runs` times on `device` with x = [1, 0, 2, 3], tracing; returns the trace's lines.
void trace_runs(const std::string& device, int runs, std::vector<json>* lines) {
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<ValueTrace> trace, ValueTrace::start());
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram, "trace.kiln"));
  KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
  KILN_ASSERT_OK(write_floats(*nodes, "x", {1, 0, 2, 3}));
  KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine(device, trace, program, nodes, "step", 16));
  const std::shared_ptr<Backend>& backend = linked.backend;
  for (int r = 0; r < runs; ++r) KILN_ASSERT_OK(linked.routine->run());
  KILN_ASSERT_OK(backend->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::string text, trace->json_lines());
  KILN_ASSERT_OK(trace->stop());
  *lines = parse_lines(text);
}

double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  return s == "nan" ? NAN : s == "inf" ? INFINITY : -INFINITY;
}

TEST(ValueTraceTest, LogsIndicesReadsAndValuesOfEachStatement) {
  std::vector<json> lines;
  ASSERT_NO_FATAL_FAILURE(trace_runs("interp", 2, &lines));
  ASSERT_EQ(lines.size(), 3u);  // header, two runs
  EXPECT_EQ(lines[0]["kiln_value_trace"], 1);
  const json& run = lines[1];
  EXPECT_EQ(run["routine"], "step");
  EXPECT_EQ(run["stream"], "s0");
  EXPECT_EQ(run["run_number"], 0);
  EXPECT_EQ(lines[2]["run_number"], 1);
  EXPECT_LE(run["begin_ns"].get<int64_t>(), run["end_ns"].get<int64_t>());
  // h is inlined: the entries are z's and y's statements, in program order.
  ASSERT_EQ(run["entries"].size(), 2u);
  const json& z = run["entries"][0];
  EXPECT_EQ(z["kind"], "statement");
  EXPECT_EQ(z["file"], "trace.kiln");
  EXPECT_EQ(z["line"], 8);
  EXPECT_EQ(z["target"], "z");
  ASSERT_EQ(z["lines"].size(), 4u);
  const json& point = z["lines"][1];
  EXPECT_EQ(point["indices"]["i"], 1);
  ASSERT_EQ(point["reads"].size(), 2u);
  EXPECT_EQ(point["reads"][0]["ref"], "inlined h[i]");
  EXPECT_EQ(number(point["reads"][0]["value"]), 0.0);
  EXPECT_EQ(point["reads"][1]["ref"], "w[i, 0]");
  EXPECT_EQ(point["value"], "-inf");
  EXPECT_FLOAT_EQ(number(z["lines"][2]["value"]), std::log(4.0f) + 0.5f);
  // The reduction logs each term with every index bound, and the sum so far.
  const json& y = run["entries"][1];
  EXPECT_EQ(y["target"], "y");
  ASSERT_EQ(y["lines"].size(), 12u);
  EXPECT_EQ(y["lines"][3]["indices"], json({{"j", 0}, {"i", 3}}));
  EXPECT_FLOAT_EQ(number(y["lines"][3]["value"]), 0.5f * (1 + 0 + 2 + 3));
  EXPECT_FALSE(y.contains("truncated"));
}

TEST(ValueTraceTest, EveryDeviceLogsTheSameEntries) {
  std::vector<json> reference;
  ASSERT_NO_FATAL_FAILURE(trace_runs("interp", 1, &reference));
  for (const std::string device : {"cpu", "opencl"}) {
    if (!driver_available(device)) continue;
    SCOPED_TRACE(device);
    std::vector<json> lines;
    ASSERT_NO_FATAL_FAILURE(trace_runs(device, 1, &lines));
    ASSERT_EQ(lines.size(), reference.size());
    const json& a = reference[1]["entries"];
    const json& b = lines[1]["entries"];
    ASSERT_EQ(a.size(), b.size());
    for (size_t e = 0; e < a.size(); ++e) {
      EXPECT_EQ(a[e]["text"], b[e]["text"]);
      ASSERT_EQ(a[e]["lines"].size(), b[e]["lines"].size());
      for (size_t l = 0; l < a[e]["lines"].size(); ++l) {
        const json& p = a[e]["lines"][l];
        const json& q = b[e]["lines"][l];
        EXPECT_EQ(p["indices"], q["indices"]);
        ASSERT_EQ(p["reads"].size(), q["reads"].size());
        std::vector<std::pair<json, json>> values = {{p["value"], q["value"]}};
        for (size_t r = 0; r < p["reads"].size(); ++r) {
          EXPECT_EQ(p["reads"][r]["ref"], q["reads"][r]["ref"]);
          values.emplace_back(p["reads"][r]["value"], q["reads"][r]["value"]);
        }
        for (const auto& [u, v] : values) {
          const double x = number(u), w = number(v);
          if (std::isfinite(x)) {
            EXPECT_NEAR(x, w, 1e-5 * std::max(1.0, std::abs(x)));
          } else {
            EXPECT_EQ(u, v);
          }
        }
      }
    }
  }
}

TEST(ValueTraceTest, LimitsTheLinesOfAStatement) {
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<ValueTrace> trace, ValueTrace::start());
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram, "trace.kiln"));
  KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
  KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine("cpu", trace, program, nodes, "step", 3));
  const std::shared_ptr<Backend>& backend = linked.backend;
  KILN_ASSERT_OK(linked.routine->run());
  KILN_ASSERT_OK(backend->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::string text, trace->json_lines());
  const std::vector<json> lines = parse_lines(text);
  ASSERT_EQ(lines.size(), 2u);
  for (const json& entry : lines[1]["entries"]) {
    EXPECT_EQ(entry["lines"].size(), 3u);
    EXPECT_EQ(entry["truncated"], true);
  }
}

TEST(ValueTraceTest, RunningTracedCodeNeedsAValueTrace) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram));
  KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
  KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine("cpu", nullptr, program, nodes, "step", 16));
  EXPECT_TRUE(has_error(linked.routine->run(), StatusCode::kFailedPrecondition, {"value tracing", "ValueTrace"}));
}

TEST(ValueTraceTest, RunningTracedCodeAfterTheTraceStoppedFails) {
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<ValueTrace> trace, ValueTrace::start());
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram));
  KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
  KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine("cpu", trace, program, nodes, "step", 16));
  const std::shared_ptr<Backend>& backend = linked.backend;
  KILN_ASSERT_OK(linked.routine->run());
  KILN_ASSERT_OK(backend->await(wait_limit()));
  KILN_ASSERT_OK(trace->stop());
  EXPECT_FALSE(trace->active());
  EXPECT_TRUE(has_error(linked.routine->run(), StatusCode::kFailedPrecondition, {"stopped"}));
  EXPECT_EQ(trace->run_count(), 1u);
}

// Tracing off: no trace code at all, whatever the other trace option says; on: printf.
TEST(ValueTraceTest, UntracedSourceHasNoTraceCode) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef dev, cpu_device());
  KILN_ASSERT_OK_AND_ASSIGN(auto backend, Backend::create(dev));
  CompileOptions off;
  CompileOptions off_other_lines;
  off_other_lines.lower.trace_lines = 3;
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef a, backend->compile(program, "step", off));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef b, backend->compile(program, "step", off_other_lines));
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef c, backend->compile(program, "step", traced()));
  KILN_ASSERT_OK_AND_ASSIGN(std::string source_a, a->source_for(dev));
  KILN_ASSERT_OK_AND_ASSIGN(std::string source_b, b->source_for(dev));
  KILN_ASSERT_OK_AND_ASSIGN(std::string source_c, c->source_for(dev));
  EXPECT_EQ(source_a, source_b);
  EXPECT_EQ(source_a.find("printf"), std::string::npos);
  EXPECT_EQ(source_a.find("stdio.h"), std::string::npos);
  EXPECT_NE(source_c.find("printf(\"\\036kiln-trace"), std::string::npos);
}

// fd 1 → a file for the test's scope, put back after.
class StdoutToFile {
 public:
  explicit StdoutToFile(const std::string& path) {
    std::fflush(stdout);
    saved_ = dup(1);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
  }
  ~StdoutToFile() {
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
  }

 private:
  int saved_ = -1;
};

// Three streams on two devices (two cpu, one opencl; three cpu where OpenCL is missing) run the
// traced routine at once while another thread prints its own lines: every run's entry is
// complete, and every other line reaches standard output unchanged and in order.
TEST(ValueTraceTest, SeveralStreamsAndDevicesAtOnceLoseAndMixNothing) {
  test::TempDir dir;
  const std::string out_path = dir.path() + "/stdout.txt";
  constexpr int kRuns = 6, kUserLines = 300;
  std::string text;
  {
    StdoutToFile redirect(out_path);
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<ValueTrace> trace, ValueTrace::start());
    KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kValueTraceProgram, "trace.kiln"));
    KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
    KILN_ASSERT_OK(write_floats(*nodes, "x", {1, 0, 2, 3}));
    std::vector<std::shared_ptr<Backend>> backends;
    std::vector<RoutineRef> routines;
    for (const std::string device : {"cpu", "cpu", driver_available("opencl") ? "opencl" : "cpu"}) {
      // The two cpu streams share a backend.
      std::shared_ptr<Backend> shared;
      if (!backends.empty() && device == "cpu" && backends.back()->device()->info().driver == "cpu") {
        shared = backends.back();
      }
      KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine(device, trace, program, nodes, "step", 16, shared));
      if (!shared) backends.push_back(linked.backend);
      routines.push_back(linked.routine);
    }
    std::thread printer([] {
      for (int i = 0; i < kUserLines; ++i) std::printf("user line %d\n", i);
    });
    for (int r = 0; r < kRuns; ++r) {
      for (const RoutineRef& routine : routines) KILN_EXPECT_OK(routine->run());
    }
    printer.join();
    for (const auto& backend : backends) KILN_ASSERT_OK(backend->await(wait_limit()));
    KILN_ASSERT_OK_AND_ASSIGN(text, trace->json_lines());
    KILN_ASSERT_OK(trace->stop());
  }
  const std::vector<json> lines = parse_lines(text);
  ASSERT_EQ(lines.size(), 1u + 3 * kRuns);
  EXPECT_EQ(lines[0]["stray_lines"], 0);
  std::set<std::string> devices;
  for (size_t r = 1; r < lines.size(); ++r) {
    devices.insert(lines[r]["device"].get<std::string>());
    ASSERT_EQ(lines[r]["entries"].size(), 2u);
    EXPECT_EQ(lines[r]["entries"][0]["lines"].size(), 4u);
    EXPECT_EQ(lines[r]["entries"][1]["lines"].size(), 12u);
    EXPECT_EQ(lines[r]["entries"][0]["lines"][1]["value"], "-inf");
  }
  EXPECT_EQ(devices.size(), driver_available("opencl") ? 2u : 1u);
  std::ifstream in(out_path);
  std::string line;
  int next = 0;
  while (std::getline(in, line)) {
    if (line.rfind("user line ", 0) != 0) continue;  // gtest's own lines
    EXPECT_EQ(line, "user line " + std::to_string(next));
    ++next;
  }
  EXPECT_EQ(next, kUserLines);
}

// A library function of the test's own that prints while it runs: y = x, and a line on stdout.
Status echo_call(ral::ExecutionContext*, ral::MemRef<float, 1> x, ral::MemRef<float, 1> y) {
  for (int64_t i = 0; i < x.element_count(); ++i) y.data[i] = x.data[i];
  std::printf("echo_call copied %lld values\n", static_cast<long long>(x.element_count()));
  return Status();
}
KILN_RAL_API("trace_test_echo", "cpu", &echo_call);

// A call's own printf reaches standard output unchanged while tracing, and the call's entry
// summarizes its tensors (min / max / mean / NaN count) before the statement that follows it.
TEST(ValueTraceTest, CallsAreSummarizedAndTheirOutputPassesThrough) {
  test::TempDir dir;
  const std::string out_path = dir.path() + "/stdout.txt";
  std::string text;
  {
    StdoutToFile redirect(out_path);
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<ValueTrace> trace, ValueTrace::start());
    KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(R"(input x : f32[4]
output y : f32[4]
output z : f32[4]
routine main {
  call trace_test_echo(x) -> y
  z[i] = y[i] * 2
}
)", "echo.kiln"));
    KILN_ASSERT_OK_AND_ASSIGN(auto nodes, NodeTable::create(program, 1));
    KILN_ASSERT_OK(write_floats(*nodes, "x", {1, NAN, -3, 4}));
    KILN_ASSERT_OK_AND_ASSIGN(TracedRoutine linked, traced_routine("cpu", trace, program, nodes, "main"));
    const std::shared_ptr<Backend>& backend = linked.backend;
    KILN_ASSERT_OK(linked.routine->run());
    KILN_ASSERT_OK(backend->await(wait_limit()));
    KILN_ASSERT_OK_AND_ASSIGN(text, trace->json_lines());
    KILN_ASSERT_OK(trace->stop());
  }
  const std::vector<json> lines = parse_lines(text);
  ASSERT_EQ(lines.size(), 2u);
  const json& entries = lines[1]["entries"];
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]["kind"], "call");
  EXPECT_EQ(entries[0]["function"], "trace_test_echo");
  EXPECT_EQ(entries[0]["line"], 5);
  const json& x = entries[0]["inputs"][0];
  EXPECT_EQ(x["name"], "x");
  EXPECT_EQ(x["shape"], json({4}));
  EXPECT_EQ(x["nans"], 1);
  EXPECT_EQ(x["min"], -3);
  EXPECT_EQ(x["max"], 4);
  EXPECT_NEAR(x["mean"].get<double>(), 2.0 / 3.0, 1e-12);
  EXPECT_EQ(entries[0]["outputs"][0]["name"], "y");
  EXPECT_EQ(entries[0]["outputs"][0]["nans"], 1);
  EXPECT_EQ(entries[1]["target"], "z");
  EXPECT_EQ(entries[1]["lines"][1]["value"], "nan");
  std::ifstream in(out_path);
  std::stringstream all;
  all << in.rdbuf();
  const size_t at = all.str().find("echo_call copied 4 values\n");
  ASSERT_NE(at, std::string::npos) << all.str();
  EXPECT_TRUE(at == 0 || all.str()[at - 1] == '\n') << all.str();
  EXPECT_EQ(all.str().find("kiln-trace"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime_test
