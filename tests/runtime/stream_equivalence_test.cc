// The data-parallel demo (examples/train_moons) on the runtime: one stream and two streams do
// the same arithmetic, so they train the same parameters; training reaches a good accuracy; a
// trace records both streams.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/drivers/drivers.h"
#include "runtime/runtime_test_util.h"
#include "trainer.h"

namespace kiln::runtime_test {
namespace {

Result<moons::TrainResult> train(int streams, int epochs, int points, uint32_t max_workgroups = 1,
                                 std::shared_ptr<runtime::Trace> trace = nullptr) {
  moons::TrainOptions options;
  options.streams = streams;
  options.epochs = epochs;
  options.points = points;
  options.max_workgroups = max_workgroups;
  options.trace = std::move(trace);
  return moons::train(options);
}

// Every parameter of `b` within `rel` (relative, with a small absolute floor) of `a`'s; counts
// the elements that differ at all.
void expect_same_parameters(const moons::TrainResult& a, const moons::TrainResult& b, double rel,
                            int* differing) {
  ASSERT_EQ(a.parameters.size(), 6u);
  ASSERT_EQ(b.parameters.size(), a.parameters.size());
  for (const auto& [name, values] : a.parameters) {
    ASSERT_TRUE(b.parameters.count(name)) << name;
    const std::vector<float>& other = b.parameters.at(name);
    ASSERT_EQ(other.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_TRUE(std::isfinite(values[i])) << name << "[" << i << "]";
      EXPECT_NEAR(other[i], values[i], rel * std::fabs(values[i]) + 1e-7) << name << "[" << i << "]";
      *differing += other[i] != values[i];
    }
  }
}

TEST(StreamEquivalence, OneAndTwoStreamsTrainTheSameParameters) {
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult one, train(1, 3, 4096));
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult two, train(2, 3, 4096));
  int differing = 0;
  expect_same_parameters(one, two, 1e-5, &differing);
  // Same kernels, same inputs, same order of merges: bit for bit.
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(one.loss, two.loss);
  EXPECT_EQ(one.accuracy, two.accuracy);
  // Training moved the parameters away from their initial values.
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult short_run, train(1, 1, 4096));
  int moved = 0;
  for (const auto& [name, values] : one.parameters) {
    for (size_t i = 0; i < values.size(); ++i) moved += values[i] != short_run.parameters[name][i];
  }
  EXPECT_GT(moved, 100);
}

TEST(StreamEquivalence, KernelsSplitOverWorkersToo) {
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult one, train(1, 2, 4096, 0));
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult two, train(2, 2, 4096, 0));
  int differing = 0;
  expect_same_parameters(one, two, 1e-5, &differing);
}

// One stream on the CPU and one on an OpenCL device: gradients cross devices through the merge
// buffer (staged through host memory), parameters come back the same way.
TEST(StreamEquivalence, OneStreamOnCpuAndOneOnOpenCL) {
  Result<hal::DriverRef> opencl = drivers::builtin_registry().find("opencl");
  ASSERT_TRUE(opencl.ok()) << opencl.status();
  if (Status available = (*opencl)->availability(); !available.ok()) {
    GTEST_SKIP() << "no OpenCL: " << available;
  }
  moons::TrainOptions options;
  options.streams = 2;
  options.epochs = 3;
  options.points = 4096;
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult cpu, moons::train(options));
  options.devices = {"cpu", "opencl"};
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult mixed, moons::train(options));
  // Another compiler's exp/tanh: the same within float rounding, not bitwise.
  int differing = 0;
  expect_same_parameters(cpu, mixed, 1e-3, &differing);
  EXPECT_NEAR(cpu.accuracy, mixed.accuracy, 0.01);
}

TEST(StreamEquivalence, TrainingReachesAGoodAccuracy) {
  moons::TrainOptions options;  // the demo's defaults: 2 streams, 40 epochs, 10000 points
  std::vector<double> losses;
  options.on_epoch = [&](int epoch, double loss, double accuracy) {
    EXPECT_EQ(epoch, static_cast<int>(losses.size()));
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    losses.push_back(loss);
  };
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult result, moons::train(options));
  ASSERT_EQ(static_cast<int>(losses.size()), options.epochs);
  EXPECT_GE(result.accuracy, 0.95);
  EXPECT_GE(result.final_accuracy, 0.95);
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_EQ(result.loss, losses.back());
  EXPECT_GT(result.seconds, 0);
}

// A data set that is not a multiple of the batch: the last batch of each epoch is smaller, its
// shards uneven (905 points: 453 and 452), and one and two streams still agree bit for bit; the
// trained parameters classify the whole data set, in one run of `evaluate`, as a forward pass
// computed here does.
TEST(StreamEquivalence, APartialLastBatchAndOneRunOverAllTheData) {
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult one, train(1, 3, 2 * 2048 + 905));
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult two, train(2, 3, 2 * 2048 + 905));
  int differing = 0;
  expect_same_parameters(one, two, 1e-5, &differing);
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(one.final_accuracy, two.final_accuracy);
  const moons::DataSet data = moons::make_moons(2 * 2048 + 905, 0.1, 0);
  const auto& w1 = two.parameters.at("w1");
  const auto& b1 = two.parameters.at("b1");
  const auto& w2 = two.parameters.at("w2");
  const auto& b2 = two.parameters.at("b2");
  const auto& w3 = two.parameters.at("w3");
  const float b3 = two.parameters.at("b3")[0];
  int correct = 0, borderline = 0;
  for (int n = 0; n < data.count(); ++n) {
    double h1[16], h2[16], logit = b3;
    for (int j = 0; j < 16; ++j) h1[j] = std::tanh(data.x[2 * n] * w1[j] + data.x[2 * n + 1] * w1[16 + j] + b1[j]);
    for (int k = 0; k < 16; ++k) {
      double z = b2[k];
      for (int j = 0; j < 16; ++j) z += h1[j] * w2[j * 16 + k];
      h2[k] = std::tanh(z);
    }
    for (int k = 0; k < 16; ++k) logit += h2[k] * w3[k];
    const double p = 1 / (1 + std::exp(-logit));
    correct += (p > 0.5) == (data.y[n] > 0.5);
    borderline += std::fabs(p - 0.5) < 1e-4;
  }
  EXPECT_NEAR(two.final_accuracy, static_cast<double>(correct) / data.count(), (borderline + 0.5) / data.count());
  EXPECT_GT(two.final_accuracy, 0.7);
  // One point in the last batch: shards of 1 and 0 points.
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult tiny, train(2, 1, 2049));
  EXPECT_GE(tiny.final_accuracy, 0.0);
}

TEST(StreamEquivalence, BadOptionsAreRefused) {
  EXPECT_TRUE(has_error(train(0, 1, 4096).status(), StatusCode::kInvalidArgument));
  EXPECT_TRUE(has_error(train(1, 0, 4096).status(), StatusCode::kInvalidArgument));
  EXPECT_TRUE(has_error(train(1, 1, 0).status(), StatusCode::kInvalidArgument, {"at least one point"}));
}

// Whether `text` has balanced {} and [] outside of strings, with proper string escapes.
bool balanced_json(const std::string& text) {
  std::vector<char> stack;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) return false;
      stack.pop_back();
    }
  }
  return !in_string && stack.empty();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(StreamEquivalence, TraceRecordsBothStreams) {
  auto trace = std::make_shared<runtime::Trace>();
  KILN_ASSERT_OK_AND_ASSIGN(moons::TrainResult result, train(2, 1, 4096, 1, trace));
  const std::vector<runtime::Trace::Event> events = trace->events();
  std::set<int> threads;
  std::set<std::string> stream_names;
  std::map<int, int> grads;  // per stream
  int updates = 0;
  int compiles = 0;
  std::vector<std::string> phases;  // the compiler thread's events in order
  int64_t phase_end_ns = 0;
  for (const runtime::Trace::Event& e : events) {
    if (e.category == "compile") {  // lowering, the passes, the device's build with its steps
      EXPECT_EQ(e.thread, runtime::Trace::kCompilerThread);
      EXPECT_EQ(e.stream, "compiler");
      EXPECT_FALSE(e.args.empty()) << e.name;
      EXPECT_LE(e.begin_ns, e.end_ns);
      EXPECT_LE(phase_end_ns, e.begin_ns) << e.name << " began before the phase before it ended";
      phase_end_ns = e.end_ns;
      if (e.name.rfind("compile for ", 0) == 0) {
        ++compiles;
        phases.push_back("build");
      } else {
        phases.push_back(e.name);
      }
      continue;
    }
    threads.insert(e.thread);
    stream_names.insert(e.stream);
    EXPECT_TRUE(e.category == "routine" || e.category == "transfer") << e.category;
    EXPECT_LE(e.begin_ns, e.end_ns) << e.name;
    if (e.name == "grad") {
      EXPECT_EQ(e.category, "routine");
      ++grads[e.thread];
    }
    updates += e.name == "update";
  }
  EXPECT_EQ(threads, (std::set<int>{0, 1}));
  EXPECT_EQ(stream_names, (std::set<std::string>{"stream 0", "stream 1"}));
  // 4096 points are 2 steps of 2 shards, one per stream.
  EXPECT_EQ(grads[0], 2);
  EXPECT_EQ(grads[1], 2);
  EXPECT_EQ(updates, 2);
  EXPECT_GE(compiles, 1);
  ASSERT_GE(phases.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(phases.begin(), phases.begin() + 3),
            (std::vector<std::string>{"lowering", "passes", "build"}));

  const std::string json = trace->json();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_TRUE(balanced_json(json)) << json.substr(0, 2000);
  EXPECT_EQ(count_of(json, "\"thread_name\""), 3u);  // the streams and the compiler
  EXPECT_NE(json.find("\"cat\": \"compile\""), std::string::npos);
  EXPECT_NE(json.find("\"args\": {\""), std::string::npos);
  EXPECT_EQ(count_of(json, "\"ph\": \"X\""), events.size());
  EXPECT_NE(json.find("\"stream 0\""), std::string::npos);
  EXPECT_NE(json.find("\"stream 1\""), std::string::npos);

  // Written to a file, atomically; an unwritable path is an error naming it.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-trace-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/trace.json";
  KILN_EXPECT_OK(trace->write_json(path));
  Result<std::string> written = read_file(path);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, json);
  const std::string bad = dir + "/no/such/dir/trace.json";
  const Status refused = trace->write_json(bad);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(bad), std::string::npos) << refused;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln::runtime_test
