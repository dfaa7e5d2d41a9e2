// Shared buffers (src/loop/shared_buffers.h, ir::LoweredRoutine::shared): which intermediates of
// a routine share one buffer, where each lies (ir::layout_shared_buffer), and that programs
// compute the same with them as with a buffer per intermediate, on every device, at fixed shapes
// and at sizes that grow and shrink between runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/backend.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

ir::LoweredProgram lowered(const std::string& text, ir::LowerOptions options = {}) {
  Result<ir::Program> program = lang::parse_program(text, "shared.kiln");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  Result<ir::LoweredProgram> out = ir::lower_program(*program, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : ir::LoweredProgram{};
}

// Lowering with a buffer per intermediate.
ir::LowerOptions unshared() {
  ir::LowerOptions options;
  options.shared_buffers = false;
  return options;
}

// The names of routine `r`'s shared nodes.
std::set<std::string> shared_names(const ir::LoweredProgram& p, size_t r = 0) {
  std::set<std::string> out;
  if (r >= p.routines.size()) return out;
  for (const ir::SharedNode& n : p.routines[r].shared) out.insert(p.program.nodes[static_cast<size_t>(n.node)].name);
  return out;
}

// A chain of transposes: each intermediate is read at two points, so none is inlined, and each
// lives from the kernel that writes it to the next one.
constexpr const char* kChain =
    "input x : f32[64, 64]\ntensor a : f32[64, 64]\ntensor b : f32[64, 64]\ntensor c : f32[64, 64]\n"
    "tensor d : f32[64, 64]\noutput y : f32[64]\n"
    "a[i, j] = x[i, j] * 2\nb[i, j] = a[j, i] + a[i, j]\nc[i, j] = b[j, i] - b[i, j] * 0.5\n"
    "d[i, j] = c[j, i] + c[i, j]\ny[i] = sum(d[j, i] * d[i, j])\n";

TEST(SharedBuffersTest, IntermediatesApartInTimeShareBytes) {
  const ir::LoweredProgram p = lowered(kChain);
  ASSERT_EQ(shared_names(p), (std::set<std::string>{"a", "b", "c", "d"}));
  const std::vector<ir::SharedNode>& shared = p.routines[0].shared;
  const ir::SharedLayout layout = ir::layout_shared_buffer(shared, std::vector<int64_t>(shared.size(), 64 * 64 * 4));
  // a and c (and b and d) are never live together: two nodes' bytes hold all four.
  EXPECT_EQ(layout.bytes, 2 * 64 * 64 * 4);
  for (size_t i = 0; i < shared.size(); ++i) {
    for (size_t j = i + 1; j < shared.size(); ++j) {
      const bool apart = shared[i].last < shared[j].first || shared[j].last < shared[i].first;
      const bool disjoint = layout.offsets[i] + 64 * 64 * 4 <= layout.offsets[j] ||
                            layout.offsets[j] + 64 * 64 * 4 <= layout.offsets[i];
      EXPECT_TRUE(apart || disjoint) << i << " and " << j << " are live together and overlap";
    }
  }
  EXPECT_TRUE(lowered(kChain, unshared()).routines[0].shared.empty());
  // The lowered text says where each lies and when it lives.
  const std::string text = ir::print_lowered(p);
  EXPECT_NE(text.find("; shared buffer, 32768 bytes: a@0 [0-1] b@16384 [1-2] c@0 [2-3] d@16384 [3-4]"), std::string::npos)
      << text;
}

TEST(SharedBuffersTest, LayoutKeepsLiveNodesApartAlignedAndLargestFirst) {
  // 0 and 1 live together, 2 after both, 3 across everything.
  const std::vector<ir::SharedNode> nodes = {{0, 0, 1}, {1, 1, 2}, {2, 3, 4}, {3, 0, 4}};
  const std::vector<int64_t> bytes = {1000, 300, 1200, 10};
  const ir::SharedLayout layout = ir::layout_shared_buffer(nodes, bytes);
  for (int64_t offset : layout.offsets) EXPECT_EQ(offset % ir::kSharedBufferAlignment, 0);
  // The largest (2) at 0; 0 lives apart from it, so at 0 too; 1 lives with 0, so past it; 3
  // lives with everything, past the end of each below it.
  EXPECT_EQ(layout.offsets, (std::vector<int64_t>{0, 1024, 0, 1536}));
  EXPECT_EQ(layout.bytes, 1546);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      const bool apart = nodes[i].last < nodes[j].first || nodes[j].last < nodes[i].first;
      const bool disjoint = layout.offsets[i] + bytes[i] <= layout.offsets[j] || layout.offsets[j] + bytes[j] <= layout.offsets[i];
      EXPECT_TRUE(apart || disjoint) << i << " and " << j;
    }
  }
  int64_t end = 0;
  for (size_t i = 0; i < nodes.size(); ++i) end = std::max(end, layout.offsets[i] + bytes[i]);
  EXPECT_EQ(layout.bytes, end);
}

TEST(SharedBuffersTest, OnlyIntermediatesWhoseValueNeverOutlivesARunShare) {
  // u is accumulated into before it is overwritten (its old value is read), v is requested
  // @device, w is read by a second routine, z is written and never read (the host may want it):
  // none of them shares; a, b and e do.
  const ir::LoweredProgram p = lowered(
      "input x : f32[32, 32]\ntensor a : f32[32, 32]\ntensor b : f32[32, 32]\ntensor u : f32[32, 32]\n"
      "tensor v : f32[32, 32] @device\ntensor w : f32[32, 32]\ntensor z : f32[32, 32]\ntensor e : f32[32, 32]\n"
      "output y : f32[32]\n"
      "routine main {\n"
      "  a[i, j] = x[i, j] + x[j, i]\n  b[i, j] = a[j, i] * a[i, j]\n  u[i, j] += b[j, i] + b[i, j]\n"
      "  v[i, j] = u[j, i] - u[i, j]\n  w[i, j] = v[j, i] + v[i, j]\n  z[i, j] = w[j, i] * w[i, j]\n"
      "  e[i, j] = w[j, i] * 2 + w[i, j]\n  y[i] = sum(e[i, j] + e[j, i])\n"
      "}\nroutine other {\n"
      "  y[i] = sum(w[j, i])\n}\n");
  EXPECT_EQ(shared_names(p, 0), (std::set<std::string>{"a", "b", "e"}));
  EXPECT_TRUE(shared_names(p, 1).empty());
}

TEST(SharedBuffersTest, ACallsOutputSharesAndACallsFirstArgumentDoesNot) {
  // s: written whole by sort, read after; t: passed to sort before anything writes it.
  const ir::LoweredProgram p = lowered(
      "input x : f32[16, 64]\ntensor a : f32[16, 64]\ntensor s : f32[16, 64]\ntensor t : f32[16, 64]\n"
      "tensor r : f32[16, 64]\noutput y : f32[16, 64]\noutput q : f32[16, 64]\n"
      "a[i, j] = x[i, j] * x[i, 63 - j]\ncall sort(a) -> s\nr[i, j] = s[i, j] + s[i, 63 - j]\n"
      "call sort(t) -> q\ny[i, j] = r[i, j] * r[i, 63 - j] + t[i, j]\n");
  EXPECT_EQ(shared_names(p), (std::set<std::string>{"a", "r", "s"}));
}

// What `text` computes on `device` with `lower`, its outputs by name (inputs drawn from `seed`,
// sizes at `values`).
std::map<std::string, HostTensor> outputs(const hal::DeviceRef& device, const std::string& text,
                                          const ir::LowerOptions& lower, const std::vector<int64_t>& values = {}) {
  std::map<std::string, HostTensor> out;
  Result<ir::Program> program = lang::parse_program(text, "shared.kiln");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return out;
  runtime::ProgramOptions options;
  options.lower = lower;
  options.sizes = values;
  auto instance = runtime::ProgramInstance::create(device, *program, options);
  EXPECT_TRUE(instance.ok()) << instance.status();
  if (!instance.ok()) return out;
  const ir::Program& bound = (*instance)->lowered().program;
  for (const ir::TensorNode& node : bound.nodes) {
    if (node.role == ir::Role::kInput) {
      EXPECT_TRUE(write_tensor(**instance, node.name, random_tensor(node, 5)).ok());
    }
  }
  // Twice: the second run starts from the bytes the first left in the shared buffer.
  for (int run = 0; run < 2; ++run) {
    for (const std::string& routine : default_routines(bound)) EXPECT_TRUE((*instance)->run(routine).ok());
  }
  for (const ir::TensorNode* node : result_nodes(bound)) {
    Result<HostTensor> t = read_tensor(**instance, *node);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out[node->name] = *t;
  }
  return out;
}

// A residual network in miniature: the skip connection keeps `h1` live across two layers, so the
// layers' outputs may only share bytes where the plan says they are apart; with a product (a
// gemm call) and a sort among the actions.
constexpr const char* kResidual =
    "input x : f32[48, 40]\nparam w1 : f32[40, 40] = uniform(-0.2, 0.2)\nparam w2 : f32[40, 40] = uniform(-0.2, 0.2)\n"
    "tensor h1 : f32[48, 40]\ntensor h2 : f32[48, 40]\ntensor h3 : f32[48, 40]\ntensor h4 : f32[48, 40]\n"
    "tensor s : f32[48, 40]\noutput y : f32[48, 40]\noutput m : f32[48]\n"
    "h1[i, j] = relu(x[i, j] + x[47 - i, j])\nh2[i, j] = sum(h1[i, k] * w1[k, j])\n"
    "h3[i, j] = relu(h2[i, j] + h2[47 - i, j])\nh4[i, j] = sum(h3[i, k] * w2[k, j])\n"
    "call sort(h4) -> s\ny[i, j] = s[i, j] + h1[i, j] + h1[47 - i, j]\nm[i] = max(h4[i, j] + s[i, 39 - j])\n";

TEST(SharedBuffersTest, ProgramsComputeTheSameAsWithABufferEach) {
  ASSERT_GE(lowered(kResidual).routines[0].shared.size(), 3u);
  TempDir dir;
  const ir::LowerOptions off = unshared();
  for (const std::string& name : present_devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    for (const char* text : {kChain, kResidual}) {
      const auto want = outputs(*device, text, off);
      const auto got = outputs(*device, text, {});
      ASSERT_EQ(got.size(), want.size()) << name;
      for (const auto& [output, tensor] : want) {
        // Bit for bit: sharing memory changes no operation.
        EXPECT_EQ(got.at(output).bytes, tensor.bytes) << name << ": " << output;
      }
    }
  }
}

TEST(SharedBuffersTest, SizedIntermediatesAreLaidOutAgainWhenTheSizesChange) {
  const std::string text =
      "size N\ninput x : f32[N, 24]\ntensor a : f32[N, 24]\ntensor b : f32[24, N]\ntensor c : f32[N, 24]\n"
      "output y : f32[N]\n"
      "a[i, j] = x[i, j] * x[i, 23 - j]\nb[j, i] = a[i, j] + a[i, 23 - j]\nc[i, j] = b[j, i] * b[23 - j, i]\n"
      "y[i] = sum(c[i, j] + c[i, 23 - j])\n";
  ASSERT_EQ(shared_names(lowered(text)), (std::set<std::string>{"a", "b", "c"}));
  Result<ir::Program> program = lang::parse_program(text, "sized.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  TempDir dir;
  const ir::LowerOptions off = unshared();
  for (const std::string& name : present_devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    // One link runs at growing and shrinking sizes; each result is bit for bit that of the
    // program at that size with a buffer per intermediate.
    auto backend = runtime::Backend::create(*device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto code = (*backend)->compile(*program, "main");
    ASSERT_TRUE(code.ok()) << code.status();
    auto stream = (*backend)->new_stream();
    ASSERT_TRUE(stream.ok());
    auto nodes = runtime::NodeTable::create(*program);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    auto root = (*backend)->make_context(*stream, *nodes);
    ASSERT_TRUE(root.ok());
    auto linked = (*backend)->link(*root, *code, "main");
    ASSERT_TRUE(linked.ok()) << name << ": " << linked.status();
    for (int64_t rows : {3, 200, 1, 0, 77, 200}) {
      const std::string what = name + " at N = " + std::to_string(rows);
      Result<ir::Program> fixed = ir::specialize_sizes(*program, {rows});
      ASSERT_TRUE(fixed.ok()) << what;
      const HostTensor x = random_tensor(*fixed->find_node("x"), static_cast<uint64_t>(rows) + 1);
      ASSERT_TRUE((*nodes)->tensor("x")->write(std::as_bytes(std::span<const char>(x.bytes)), {rows, 24}).ok()) << what;
      ASSERT_TRUE(linked->routine->run().ok()) << what;
      auto y = (*nodes)->tensor("y")->read_as<float>();
      ASSERT_TRUE(y.ok()) << what << ": " << y.status();
      runtime::ProgramOptions alone;
      alone.lower = off;
      auto reference = runtime::ProgramInstance::create(*device, *fixed, alone);
      ASSERT_TRUE(reference.ok()) << what << ": " << reference.status();
      ASSERT_TRUE(write_tensor(**reference, "x", x).ok()) << what;
      ASSERT_TRUE((*reference)->run("main").ok()) << what;
      Result<HostTensor> want = read_tensor(**reference, *fixed->find_node("y"));
      ASSERT_TRUE(want.ok()) << what;
      ASSERT_EQ(y->size() * sizeof(float), want->bytes.size()) << what;
      if (!want->bytes.empty()) EXPECT_EQ(std::memcmp(y->data(), want->bytes.data(), want->bytes.size()), 0) << what;
    }
  }
}

// The host cannot read an intermediate of a shared buffer: another's values would be there.
TEST(SharedBuffersTest, TheHostIsRefusedAnIntermediateOfASharedBuffer) {
  TempDir dir;
  Result<hal::DeviceRef> device = open_device("cpu", dir.path() + "/cache");
  ASSERT_TRUE(device.ok()) << device.status();
  Result<ir::Program> program = lang::parse_program(kChain, "chain.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  auto instance = runtime::ProgramInstance::create(*device, *program);
  ASSERT_TRUE(instance.ok()) << instance.status();
  std::vector<float> a(64 * 64);
  Status read = (*instance)->read("a", a.data(), a.size() * sizeof(float));
  EXPECT_EQ(read.code(), StatusCode::kInvalidArgument) << read;
  EXPECT_NE(read.message().find("shared buffer"), std::string::npos) << read;
}

}  // namespace
}  // namespace kiln::e2e
