// End-to-end: every program of examples/kiln parses, runs on the reference interpreter and on the
// CPU with the same deterministic random inputs, and both agree; a few examples are also checked
// against results computed here directly (in double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/lang/parser.h"
#include "runtime/e2e_util.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::e2e {
namespace {

constexpr uint64_t kSeed = 20240601;

std::string examples_dir() { return std::string(KILN_SOURCE_DIR) + "/examples/kiln"; }

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(examples_dir(), ec)) {
    if (entry.path().extension() == ".kiln") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ir::Program> load_example(const std::string& name) {
  const std::string path = examples_dir() + "/" + name + ".kiln";
  Result<std::string> text = read_file(path);
  if (!text.ok()) return text.status();
  return lang::parse_program(*text, "examples/kiln/" + name + ".kiln");
}

// One example compiled for one device, with its inputs set and its default routines run.
struct Ran {
  std::unique_ptr<runtime::ProgramInstance> instance;
  std::map<std::string, HostTensor> inputs;   // what was written
  std::map<std::string, HostTensor> results;  // outputs and params after the run
};

// Every size of an example with sizes runs at this value: more rows than a workgroup's share,
// and not a multiple of a vector's lanes.
constexpr int64_t kExampleSize = 37;

// Runs `program` on `device` with random inputs from `seed`; `runs` passes over the routines.
Ran run_on(const hal::DeviceRef& device, const ir::Program& general, uint64_t seed, int runs = 1) {
  Ran ran;
  runtime::ProgramOptions options;
  options.sizes.assign(general.sizes.size(), kExampleSize);
  auto instance = runtime::ProgramInstance::create(device, general, options);
  EXPECT_TRUE(instance.ok()) << device->info().name << ": " << instance.status();
  if (!instance.ok()) return ran;
  ran.instance = std::move(*instance);
  // The program at its bound sizes (the instance's nodes, less those lowering added).
  ir::Program program = ran.instance->lowered().program;
  program.nodes.resize(general.nodes.size());
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role != ir::Role::kInput) continue;
    HostTensor t = random_tensor(node, seed);
    Status st = write_tensor(*ran.instance, node.name, t);
    EXPECT_TRUE(st.ok()) << node.name << ": " << st;
    ran.inputs[node.name] = std::move(t);
  }
  for (int r = 0; r < runs; ++r) {
    for (const std::string& routine : default_routines(program)) {
      Status st = ran.instance->run(routine);
      EXPECT_TRUE(st.ok()) << device->info().name << " routine " << routine << ": " << st;
    }
  }
  for (const ir::TensorNode* node : result_nodes(program)) {
    Result<HostTensor> t = read_tensor(*ran.instance, *node);
    EXPECT_TRUE(t.ok()) << node->name << ": " << t.status();
    if (t.ok()) ran.results[node->name] = std::move(*t);
  }
  return ran;
}

class ExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(cache_.path().empty());
    auto cpu = open_device("cpu", cache_.path());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *cpu;
    auto interp = open_device("interp", cache_.path());
    ASSERT_TRUE(interp.ok()) << interp.status();
    interp_ = *interp;
  }

  // Runs an example on both devices and checks that they agree; returns the CPU run.
  Ran run_both(const std::string& name, ir::Program* program_out = nullptr) {
    Result<ir::Program> program = load_example(name);
    EXPECT_TRUE(program.ok()) << name << ": " << program.status();
    if (!program.ok()) return {};
    Ran reference = run_on(interp_, *program, kSeed);
    Ran cpu = run_on(cpu_, *program, kSeed);
    EXPECT_FALSE(cpu.results.empty()) << name;
    for (const auto& [tensor, expected] : reference.results) {
      auto it = cpu.results.find(tensor);
      if (it == cpu.results.end()) continue;
      if (auto diff = first_difference(tensor, expected, it->second)) {
        ADD_FAILURE() << name << ": cpu differs from interp: " << *diff;
      }
    }
    if (program_out) *program_out = std::move(*program);
    return cpu;
  }

  // Every example on the first device of `driver` agrees with the interpreter; skipped, with the
  // reason, where the driver is not available.
  void expect_examples_agree_on(const std::string& driver_name) {
    Result<hal::DriverRef> driver = drivers::builtin_registry().find(driver_name);
    ASSERT_TRUE(driver.ok()) << driver.status();
    Status available = (*driver)->availability();
    if (!available.ok()) GTEST_SKIP() << driver_name << " is not available here: " << available;
    auto device = open_device(driver_name, cache_.path());
    ASSERT_TRUE(device.ok()) << device.status();
    for (const std::string& name : example_names()) {
      SCOPED_TRACE(name);
      Result<ir::Program> program = load_example(name);
      ASSERT_TRUE(program.ok()) << name << ": " << program.status();
      Ran reference = run_on(interp_, *program, kSeed);
      Ran ran = run_on(*device, *program, kSeed);
      EXPECT_FALSE(ran.results.empty()) << name;
      for (const auto& [tensor, expected] : reference.results) {
        auto it = ran.results.find(tensor);
        if (it == ran.results.end()) continue;
        if (auto diff = first_difference(tensor, expected, it->second)) {
          ADD_FAILURE() << name << ": " << driver_name << " differs from interp: " << *diff;
        }
      }
    }
  }

  TempDir cache_;
  hal::DeviceRef cpu_, interp_;
};

TEST_F(ExamplesTest, EveryExampleAgreesOnInterpAndOpenCL) { expect_examples_agree_on("opencl"); }

TEST_F(ExamplesTest, EveryExampleAgreesOnInterpAndCuda) { expect_examples_agree_on("cuda"); }

TEST_F(ExamplesTest, ThereAreExamples) {
  std::vector<std::string> names = example_names();
  EXPECT_GE(names.size(), 6u) << examples_dir();
  for (const char* expected : {"matmul_bias_relu", "softmax", "maxpool", "conv2d"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

TEST_F(ExamplesTest, EveryExampleAgreesOnInterpAndCpu) {
  for (const std::string& name : example_names()) {
    SCOPED_TRACE(name);
    ir::Program program;
    Ran cpu = run_both(name, &program);
    // Every output is finite, and not all zero (the program computed something).
    for (const ir::TensorNode* node : result_nodes(program)) {
      if (node->role != ir::Role::kOutput || !cpu.results.count(node->name)) continue;
      const HostTensor& t = cpu.results.at(node->name);
      bool nonzero = false;
      for (int64_t i = 0; i < t.size(); ++i) {
        ASSERT_TRUE(std::isfinite(t.at(i))) << node->name << index_string(t.dims, i);
        nonzero = nonzero || t.at(i) != 0;
      }
      EXPECT_TRUE(nonzero) << node->name << " is all zeros";
    }
  }
}

TEST_F(ExamplesTest, RunningTwiceGivesTheSameOutputs) {
  // An example that does not update its params must reproduce its first run; one that does
  // (the training program) continues training instead, and is left out.
  for (const std::string& name : example_names()) {
    SCOPED_TRACE(name);
    Result<ir::Program> program = load_example(name);
    ASSERT_TRUE(program.ok()) << program.status();
    bool trains = false;
    for (const ir::Routine& r : program->routines) {
      for (const ir::Assignment& a : r.statements) {
        trains |= program->nodes[a.target].role == ir::Role::kParam;
      }
    }
    if (trains) continue;
    Ran once = run_on(cpu_, *program, kSeed, 1);
    Ran twice = run_on(cpu_, *program, kSeed, 2);
    for (const auto& [tensor, expected] : once.results) {
      if (auto diff = first_difference(tensor, expected, twice.results[tensor], {0, 0})) {
        ADD_FAILURE() << *diff;
      }
    }
  }
}

// Checks a result against a reference computed here, for both devices.
void expect_matches(const std::string& what, const std::vector<double>& reference,
                    const HostTensor& actual, Tolerance tol = {}) {
  HostTensor expected{ir::DType::kF64, actual.dims, std::string(reference.size() * 8, '\0')};
  for (size_t i = 0; i < reference.size(); ++i) expected.set(static_cast<int64_t>(i), reference[i]);
  HostTensor actual64{ir::DType::kF64, actual.dims, std::string(actual.bytes.size() / ir::dtype_size(actual.dtype) * 8, '\0')};
  for (int64_t i = 0; i < actual.size(); ++i) actual64.set(i, actual.at(i));
  if (auto diff = first_difference(what, expected, actual64, tol)) ADD_FAILURE() << *diff;
}

TEST_F(ExamplesTest, MatmulBiasReluMatchesDirectComputation) {
  Result<ir::Program> program = load_example("matmul_bias_relu");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& a = ran.inputs.at("a");
    const HostTensor& b = ran.inputs.at("b");
    const HostTensor& bias = ran.results.at("bias");  // initialized by the runtime: uniform(-0.1, 0.1)
    ASSERT_EQ(a.dims, (std::vector<int64_t>{64, 128}));
    ASSERT_EQ(b.dims, (std::vector<int64_t>{128, 32}));
    bool bias_varies = false;
    for (int64_t j = 0; j < 32; ++j) {
      EXPECT_GE(bias.at(j), -0.1);
      EXPECT_LT(bias.at(j), 0.1);
      bias_varies = bias_varies || bias.at(j) != bias.at(0);
    }
    EXPECT_TRUE(bias_varies) << "uniform(-0.1, 0.1) gave one value everywhere";
    std::vector<double> y(64 * 32);
    int positive = 0;
    for (int i = 0; i < 64; ++i) {
      for (int j = 0; j < 32; ++j) {
        double c = 0;
        for (int k = 0; k < 128; ++k) c += a.at(i * 128 + k) * b.at(k * 32 + j);
        y[i * 32 + j] = std::max(0.0, c + bias.at(j));
        positive += y[i * 32 + j] > 0;
      }
    }
    EXPECT_GT(positive, 64 * 32 / 4);
    EXPECT_LT(positive, 64 * 32 * 3 / 4);
    expect_matches("y", y, ran.results.at("y"));
  }
}

TEST_F(ExamplesTest, SoftmaxRowsSumToOne) {
  Result<ir::Program> program = load_example("softmax");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& x = ran.inputs.at("x");
    const HostTensor& y = ran.results.at("y");
    ASSERT_EQ(y.dims, (std::vector<int64_t>{4, 10}));
    std::vector<double> reference(40);
    for (int i = 0; i < 4; ++i) {
      double m = -INFINITY, s = 0, row = 0;
      for (int j = 0; j < 10; ++j) m = std::max(m, x.at(i * 10 + j));
      for (int j = 0; j < 10; ++j) s += std::exp(x.at(i * 10 + j) - m);
      for (int j = 0; j < 10; ++j) {
        reference[i * 10 + j] = std::exp(x.at(i * 10 + j) - m) / s;
        EXPECT_GT(y.at(i * 10 + j), 0.0);
        EXPECT_LT(y.at(i * 10 + j), 1.0);
        row += y.at(i * 10 + j);
      }
      EXPECT_NEAR(row, 1.0, 1e-5) << "row " << i;
    }
    expect_matches("y", reference, y);
  }
}

TEST_F(ExamplesTest, MaxpoolMatchesDirectLoop) {
  Result<ir::Program> program = load_example("maxpool");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& img = ran.inputs.at("img");  // [2, 4, 16, 16]
    const HostTensor& p = ran.results.at("p");     // [2, 4, 8, 8]
    ASSERT_EQ(p.dims, (std::vector<int64_t>{2, 4, 8, 8}));
    std::vector<double> reference(2 * 4 * 8 * 8);
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 4; ++c)
        for (int y = 0; y < 8; ++y)
          for (int x = 0; x < 8; ++x) {
            double m = -INFINITY;
            for (int dy = 0; dy < 2; ++dy)
              for (int dx = 0; dx < 2; ++dx) {
                m = std::max(m, img.at(((n * 4 + c) * 16 + 2 * y + dy) * 16 + 2 * x + dx));
              }
            reference[((n * 4 + c) * 8 + y) * 8 + x] = m;
          }
    // A maximum is one of the inputs: exact.
    expect_matches("p", reference, p, {0, 0});
  }
}

TEST_F(ExamplesTest, PaddedConvolutionMatchesDirectLoop) {
  Result<ir::Program> program = load_example("conv2d");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& img = ran.inputs.at("img");  // [1, 3, 16, 16]
    const HostTensor& w = ran.inputs.at("w");      // [8, 3, 3, 3]
    const HostTensor& bias = ran.results.at("bias");
    const HostTensor& o = ran.results.at("o");     // [1, 8, 16, 16]
    ASSERT_EQ(o.dims, (std::vector<int64_t>{1, 8, 16, 16}));
    for (int co = 0; co < 8; ++co) EXPECT_EQ(bias.at(co), 0.5);
    std::vector<double> reference(8 * 16 * 16);
    for (int co = 0; co < 8; ++co)
      for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x) {
          double s = 0;
          for (int ci = 0; ci < 3; ++ci)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = y + ky - 1, ix = x + kx - 1;
                if (iy < 0 || iy >= 16 || ix < 0 || ix >= 16) continue;  // zero padding
                s += img.at((ci * 16 + iy) * 16 + ix) * w.at(((co * 3 + ci) * 3 + ky) * 3 + kx);
              }
          reference[(co * 16 + y) * 16 + x] = s + bias.at(co);
        }
    expect_matches("o", reference, o);
  }
}

TEST_F(ExamplesTest, LayernormNormalizesRows) {
  Result<ir::Program> program = load_example("layernorm");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& x = ran.inputs.at("x");  // [8, 32]
    const HostTensor& y = ran.results.at("y");
    std::vector<double> reference(8 * 32);
    for (int i = 0; i < 8; ++i) {
      double mu = 0, var = 0, ymean = 0;
      for (int j = 0; j < 32; ++j) mu += x.at(i * 32 + j) / 32;
      for (int j = 0; j < 32; ++j) var += (x.at(i * 32 + j) - mu) * (x.at(i * 32 + j) - mu) / 32;
      for (int j = 0; j < 32; ++j) {
        reference[i * 32 + j] = (x.at(i * 32 + j) - mu) / std::sqrt(var + 1e-5);  // gamma 1, beta 0
        ymean += y.at(i * 32 + j) / 32;
      }
      EXPECT_NEAR(ymean, 0.0, 1e-5) << "row " << i;
    }
    expect_matches("y", reference, y);
  }
}

TEST_F(ExamplesTest, MlpMatchesDirectComputation) {
  Result<ir::Program> program = load_example("mlp");
  ASSERT_TRUE(program.ok()) << program.status();
  for (const hal::DeviceRef& device : {interp_, cpu_}) {
    SCOPED_TRACE(device->info().name);
    Ran ran = run_on(device, *program, kSeed);
    ASSERT_TRUE(ran.instance);
    const HostTensor& x = ran.inputs.at("x");  // [8, 16]
    const HostTensor& w1 = ran.results.at("w1");  // [16, 32], normal(0, 0.25)
    const HostTensor& w2 = ran.results.at("w2");  // [32, 4]
    const HostTensor& b1 = ran.results.at("b1");
    const HostTensor& b2 = ran.results.at("b2");
    std::vector<double> reference(8 * 4);
    for (int i = 0; i < 8; ++i) {
      std::vector<double> h(32);
      for (int j = 0; j < 32; ++j) {
        double z = 0;
        for (int k = 0; k < 16; ++k) z += x.at(i * 16 + k) * w1.at(k * 32 + j);
        h[j] = std::tanh(z + b1.at(j));
      }
      for (int o = 0; o < 4; ++o) {
        double s = 0;
        for (int j = 0; j < 32; ++j) s += h[j] * w2.at(j * 4 + o);
        reference[i * 4 + o] = s + b2.at(o);
      }
    }
    expect_matches("logits", reference, ran.results.at("logits"));
  }
}

TEST_F(ExamplesTest, RandomInitializersAreDeterministic) {
  Result<ir::Program> program = load_example("mlp");
  ASSERT_TRUE(program.ok()) << program.status();
  Ran a = run_on(interp_, *program, kSeed);
  Ran b = run_on(cpu_, *program, kSeed);
  ASSERT_TRUE(a.instance && b.instance);
  for (const char* param : {"w1", "w2"}) {
    const HostTensor& w = a.results.at(param);
    if (auto diff = first_difference(param, w, b.results.at(param), {0, 0})) ADD_FAILURE() << *diff;
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < w.size(); ++i) {
      mean += w.at(i) / double(w.size());
      sq += w.at(i) * w.at(i) / double(w.size());
    }
    const double expected_std = std::string(param) == "w1" ? 0.25 : 0.18;
    EXPECT_NEAR(mean, 0.0, 0.1) << param;
    EXPECT_NEAR(std::sqrt(sq - mean * mean), expected_std, expected_std * 0.3) << param;
  }
}

}  // namespace
}  // namespace kiln::e2e
