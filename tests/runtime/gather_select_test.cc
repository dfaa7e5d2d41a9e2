// Gathers written with select over an integer comparison, as loss functions write them
// (negative log-likelihood, per-element softmax cross-entropy): every device computes what a
// direct evaluation in double computes. GCC 12 at -O3 -march=native once miscompiled the first
// program (masked loads of one SLP group all used the first vector's mask); the CPU driver's
// flags avoid that, and this test runs the programs through the real driver at those flags.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/lang/parser.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

// p[a, b] = sum over k of (t[a, b] == k ? x[k, a, b] : 0): x[t[a, b], a, b], or 0 when t is out
// of [0, K).
constexpr char kPick[] = R"(
input x : f32[2, 64, 6]
input t : i32[64, 6]
output p : f32[64, 6]
p[a, b] = sum(select(t[a, b] == k, x[k, a, b], 0))
)";

// Negative log-likelihood of log-probabilities `lp` (classes on the last axis) for labels `t`,
// per element and averaged.
constexpr char kNll[] = R"(
input lp : f32[48, 10]
input t : i32[48]
output loss : f32[48]
output mean_loss : f32[]
loss[n] = sum(-select(t[n] == c, lp[n, c], 0))
mean_loss = mean(loss[n])
)";

// Softmax cross-entropy with a per-element output.
constexpr char kSoftmaxXent[] = R"(
input z : f32[33, 7]
input t : i32[33]
output loss : f32[33]
tensor m : f32[33]
tensor s : f32[33]
tensor picked : f32[33]
m[n] = max(z[n, c])
s[n] = sum(exp(z[n, c] - m[n]))
picked[n] = sum(select(t[n] == c, z[n, c], 0))
loss[n] = log(s[n]) + m[n] - picked[n]
)";

struct Inputs {
  std::map<std::string, HostTensor> tensors;
};

// Floats uniform in [-2, 2); labels uniform in [-1, classes] so that some are out of range.
Inputs make_inputs(const ir::Program& program, int classes, uint64_t seed) {
  Inputs in;
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role != ir::Role::kInput) continue;
    HostTensor t = empty_tensor(node);
    Random random = Random::for_name(seed, node.name);
    for (int64_t i = 0; i < t.size(); ++i) {
      if (node.dtype == ir::DType::kI32) {
        t.set(i, static_cast<double>(static_cast<int64_t>(random.next_u64() % (classes + 2)) - 1));
      } else {
        t.set(i, random.uniform(-2, 2));
      }
    }
    in.tensors[node.name] = std::move(t);
  }
  return in;
}

std::map<std::string, HostTensor> run(const hal::DeviceRef& device, const ir::Program& program,
                                      const Inputs& in) {
  std::map<std::string, HostTensor> out;
  auto instance = runtime::ProgramInstance::create(device, program, {});
  EXPECT_TRUE(instance.ok()) << instance.status();
  if (!instance.ok()) return out;
  for (const auto& [name, t] : in.tensors) EXPECT_TRUE(write_tensor(**instance, name, t).ok());
  EXPECT_TRUE((*instance)->run("main").ok());
  for (const ir::TensorNode* node : result_nodes(program)) {
    Result<HostTensor> t = read_tensor(**instance, *node);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out[node->name] = std::move(*t);
  }
  return out;
}

class GatherSelectTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (Status available = driver_availability(GetParam()); !available.ok()) {
      GTEST_SKIP() << GetParam() << " is not available here: " << available;
    }
    auto device = open_device(GetParam(), cache_.path());
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
  }
  // Runs `text` on the device under test with inputs from several seeds; `expect` computes the
  // outputs from the inputs in double.
  template <typename Expect>
  void check(const char* text, int classes, Expect expect) {
    Result<ir::Program> program = lang::parse_program(text, "gather.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      Inputs in = make_inputs(*program, classes, seed);
      std::map<std::string, HostTensor> got = run(device_, *program, in);
      std::map<std::string, HostTensor> want;
      for (const ir::TensorNode* node : result_nodes(*program)) want[node->name] = empty_tensor(*node);
      expect(in.tensors, want);
      for (const auto& [name, w] : want) {
        ASSERT_TRUE(got.count(name)) << name;
        std::optional<std::string> diff = first_difference(name, w, got[name]);
        EXPECT_FALSE(diff) << GetParam() << ": " << *diff;
      }
    }
  }

  TempDir cache_;
  hal::DeviceRef device_;
};

TEST_P(GatherSelectTest, PickAlongTheLeadingAxis) {
  check(kPick, 2, [](std::map<std::string, HostTensor>& in, std::map<std::string, HostTensor>& out) {
    const HostTensor &x = in["x"], &t = in["t"];
    for (int64_t a = 0; a < 64; ++a) {
      for (int64_t b = 0; b < 6; ++b) {
        const int64_t k = static_cast<int64_t>(t.at(a * 6 + b));
        out["p"].set(a * 6 + b, k >= 0 && k < 2 ? x.at(k * 384 + a * 6 + b) : 0.0);
      }
    }
  });
}

TEST_P(GatherSelectTest, NegativeLogLikelihood) {
  check(kNll, 10, [](std::map<std::string, HostTensor>& in, std::map<std::string, HostTensor>& out) {
    const HostTensor &lp = in["lp"], &t = in["t"];
    double total = 0;
    for (int64_t n = 0; n < 48; ++n) {
      const int64_t c = static_cast<int64_t>(t.at(n));
      const double loss = c >= 0 && c < 10 ? -lp.at(n * 10 + c) : 0.0;
      out["loss"].set(n, loss);
      total += static_cast<float>(loss);
    }
    out["mean_loss"].set(0, total / 48);
  });
}

TEST_P(GatherSelectTest, SoftmaxCrossEntropyPerElement) {
  check(kSoftmaxXent, 7, [](std::map<std::string, HostTensor>& in, std::map<std::string, HostTensor>& out) {
    const HostTensor &z = in["z"], &t = in["t"];
    for (int64_t n = 0; n < 33; ++n) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < 7; ++c) m = std::max(m, z.at(n * 7 + c));
      for (int64_t c = 0; c < 7; ++c) s += std::exp(z.at(n * 7 + c) - m);
      const int64_t label = static_cast<int64_t>(t.at(n));
      out["loss"].set(n, std::log(s) + m - (label >= 0 && label < 7 ? z.at(n * 7 + label) : 0.0));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Devices, GatherSelectTest, ::testing::Values("interp", "cpu", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::e2e
