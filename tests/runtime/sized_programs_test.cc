// Programs with sizes (language version 2) compiled once for every size: their kernels read the
// sizes from each dispatch. At each size, on every device, the one general build must compute
// what the program specialized to that size computes (the size written as a number), and the
// Backend's code bound to several sizes must share one executable.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/program_instance.h"
#include "kiln/runtime/transfer.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

using runtime::Backend;
using runtime::Code;
using runtime::NodeTable;
using runtime::ProgramInstance;
using runtime::ProgramOptions;

struct SizedCase {
  const char* name;
  const char* text;
};

// Each shape of lowering a size touches: strides and loop extents, collapsed rows, local arrays,
// range checks of compound subscripts, snapshots, reductions (mean divides by a size), products,
// sizes as values and affine dimensions.
// Calls at each run's shapes: sort and top-k of every row, and a product over a size that the
// compiler turns into gemm.
constexpr const char* kCalls =
    "size N\ninput x: f32[N, 64]\ninput w: f32[64, 64]\noutput up: f32[N, 64]\noutput best: f32[N, 4]\n"
    "output at: i32[N, 4]\noutput h: f32[N, 64]\ncall sort(x) -> up\ncall topk(x) -> best, at\n"
    "h[i, j] = sum(x[i, k] * w[k, j])\n";

const SizedCase kCases[] = {
    {"softmax",
     "size N\ninput x: f32[N, 10]\noutput y: f32[N, 10]\ntensor m: f32[N]\ntensor s: f32[N]\n"
     "m[i] = max(x[i, j])\ns[i] = sum(exp(x[i, j] - m[i]))\ny[i, j] = exp(x[i, j] - m[i]) / s[i]\n"},
    {"row_sum", "size N\ninput a: f32[N, 33]\noutput s: f32[N]\ns[i] = sum(a[i, j])\n"},
    {"relu_fma", "size N\ninput a: f32[N]\ninput b: f32[N]\ninput c: f32[N]\noutput y: f32[N]\n"
                 "y[i] = relu(a[i] * b[i] + c[i])\n"},
    {"product", "size M\ninput a: f32[M, 24]\ninput b: f32[24, 20]\noutput c: f32[M, 20]\n"
                "c[i, j] = sum(a[i, k] * b[k, j])\n"},
    {"mean_and_shift", "size N\ninput x: f32[N]\noutput m: f32\noutput d: f32[N]\nm = mean(x[i])\n"
                       "d[i] = x[i] - x[i - 1]\n"},
    {"collapsed_rows", "size N\ninput x: f32[2, N, 3]\noutput y: f32[2, N, 3]\noutput r: f32[2, N]\n"
                       "y[a, b, c] = x[a, b, c] * f32(b)\nr[a, b] = max(x[a, b, c])\n"},
    {"two_sizes", "size N\nsize M\ninput x: f32[N, M]\noutput t: f32[M, N]\noutput p: f32[N + M]\n"
                  "t[j, i] = x[i, j] + f32(M)\np[i] = f32(i) * f32(N) where i < N + M\n"},
    {"snapshot", "size N\ninput x: f32[N]\noutput y: f32[N]\ntensor t: f32[N]\nt[i] = x[i]\n"
                 "t[i] = t[i] + t[i + 1]\ny[i] = t[i] * 2\n"},
    {"i32_columns", "size N\ninput x: i32[N, 5]\noutput c: i32[5]\noutput e: i32[N, 5]\n"
                    "c[j] = sum(x[i, j])\ne[i, j] = x[i, j] * i32(N) + i32(j)\n"},
    {"calls", kCalls},
    // Products over several dimensions and a batch over N: gemm calls where N makes them large
    // enough (a size counts as 1024), the loop nests in the specialized program at N = 1.
    {"contractions",
     "size N\ninput h: f32[N, 8, 4, 4]\ninput wd: f32[8, 4, 4, 10]\ninput p: f32[N, 16, 16]\n"
     "input q: f32[N, 16, 20]\noutput z: f32[N, 10]\noutput r: f32[N, 16, 20]\n"
     "z[n, k] = sum(h[n, c, y, x] * wd[c, y, x, k])\nr[b, i, j] = sum(p[b, i, k] * q[b, k, j])\n"},
};

std::vector<std::string> devices() {
  std::vector<std::string> out = {"cpu", "interp"};
  if (driver_availability("opencl").ok()) out.push_back("opencl");
  return out;
}

// Every size of `program` set to `value`.
std::vector<int64_t> all_sizes(const ir::Program& program, int64_t value) {
  return std::vector<int64_t>(program.sizes.size(), value);
}

// Runs `program` (with sizes at `values`, or specialized already) on `device` with the inputs
// drawn from `seed`, and returns its outputs by name.
Result<std::map<std::string, HostTensor>> run_once(const hal::DeviceRef& device, const ir::Program& program,
                                                   const std::vector<int64_t>& values, uint64_t seed) {
  ProgramOptions options;
  options.seed = seed;
  if (program.has_sizes()) options.sizes = values;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ProgramInstance> instance, ProgramInstance::create(device, program, options));
  const ir::Program& bound = instance->lowered().program;
  for (const ir::TensorNode& node : bound.nodes) {
    if (node.role != ir::Role::kInput || node.id >= static_cast<int>(program.nodes.size())) continue;
    KILN_RETURN_IF_ERROR(write_tensor(*instance, node.name, random_tensor(node, seed)));
  }
  for (const std::string& routine : default_routines(bound)) KILN_RETURN_IF_ERROR(instance->run(routine));
  std::map<std::string, HostTensor> out;
  for (const ir::TensorNode* node : result_nodes(bound)) {
    KILN_ASSIGN_OR_RETURN(out[node->name], read_tensor(*instance, *node));
  }
  return out;
}

TEST(SizedProgramsTest, OneBuildComputesWhatTheSpecializedProgramDoesAtEverySize) {
  TempDir dir;
  for (const std::string& name : devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    for (const SizedCase& c : kCases) {
      Result<ir::Program> program = lang::parse_program(c.text, std::string(c.name) + ".kiln");
      ASSERT_TRUE(program.ok()) << c.name << ": " << program.status();
      for (int64_t size : {0, 1, 7, 130}) {
        const std::string what = name + ", " + c.name + " at " + std::to_string(size);
        const std::vector<int64_t> values = all_sizes(*program, size);
        Result<ir::Program> specialized = ir::specialize_sizes(*program, values);
        ASSERT_TRUE(specialized.ok()) << what << ": " << specialized.status();
        auto general = run_once(*device, *program, values, 17);
        auto expected = run_once(*device, *specialized, {}, 17);
        ASSERT_TRUE(general.ok()) << what << ": " << general.status();
        ASSERT_TRUE(expected.ok()) << what << ": " << expected.status();
        for (const auto& [output, tensor] : *expected) {
          ASSERT_TRUE(general->count(output)) << what << ": " << output;
          EXPECT_EQ(general->at(output).dims, tensor.dims) << what << ": " << output;
          if (auto diff = first_difference(output, tensor, general->at(output))) ADD_FAILURE() << what << ": " << *diff;
        }
      }
    }
  }
}

// The Backend: one compile, bound to sizes 1, 7, 0 and 1000, linked into contexts of their own;
// every binding runs the general code's executable.
TEST(SizedProgramsTest, CodeAtSizesSharesOneExecutable) {
  TempDir dir;
  for (const std::string& name : devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    Result<ir::Program> program = lang::parse_program(
        "size N\ninput x: f32[N, 3]\noutput y: f32[N]\ny[i] = sum(x[i, j] * f32(N))\n", "rows.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    auto backend = Backend::create(*device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto code = (*backend)->compile(*program, "main");
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_TRUE((*code)->needs_sizes());
    auto stream = (*backend)->new_stream();
    ASSERT_TRUE(stream.ok());
    // Unbound code does not link: its kernels would read no sizes.
    {
      auto nodes = NodeTable::create(*ir::specialize_sizes(*program, {2}));
      ASSERT_TRUE(nodes.ok()) << nodes.status();
      auto root = (*backend)->make_context(*stream, *nodes);
      ASSERT_TRUE(root.ok());
      auto linked = (*backend)->link(*root, *code, "main");
      ASSERT_FALSE(linked.ok());
      EXPECT_NE(linked.status().message().find("bind them first"), std::string::npos) << linked.status();
    }
    hal::ExecutableRef first;
    for (int64_t rows : {1, 7, 0, 1000}) {
      const std::string what = name + " at N = " + std::to_string(rows);
      auto bound = Code::at_sizes(*code, {rows});
      ASSERT_TRUE(bound.ok()) << what << ": " << bound.status();
      EXPECT_EQ((*bound)->sizes(), std::vector<int64_t>{rows});
      auto nodes = NodeTable::create(*ir::specialize_sizes(*program, {rows}));
      ASSERT_TRUE(nodes.ok()) << what << ": " << nodes.status();
      std::vector<float> x(static_cast<size_t>(rows) * 3);
      for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 5) - 2;
      ASSERT_TRUE((*nodes)->tensor("x")->write_from(x).ok()) << what;
      auto root = (*backend)->make_context(*stream, *nodes);
      ASSERT_TRUE(root.ok()) << what;
      auto linked = (*backend)->link(*root, *bound, "main");
      ASSERT_TRUE(linked.ok()) << what << ": " << linked.status();
      ASSERT_TRUE(linked->routine->run().ok()) << what;
      auto y = (*nodes)->tensor("y")->read_as<float>();
      ASSERT_TRUE(y.ok()) << what << ": " << y.status();
      ASSERT_EQ(y->size(), static_cast<size_t>(rows)) << what;
      for (int64_t i = 0; i < rows; ++i) {
        const float n = static_cast<float>(rows);
        const float sum = x[i * 3] * n + x[i * 3 + 1] * n + x[i * 3 + 2] * n;
        ASSERT_EQ((*y)[static_cast<size_t>(i)], sum) << what << " at " << i;
      }
      auto executable = (*bound)->executable_for(*device);
      ASSERT_TRUE(executable.ok()) << what;
      if (!first) first = *executable;
      EXPECT_EQ(*executable, first) << what << ": a second executable was built";
    }
    // Values that do not fit are refused, naming what is wrong.
    auto negative = Code::at_sizes(*code, {-1});
    EXPECT_FALSE(negative.ok());
    auto two = Code::at_sizes(*code, {1, 2});
    EXPECT_FALSE(two.ok());
  }
}

// A table of the program with sizes: one compile, one link, and runs at whatever sizes the
// inputs' shapes give; the arrays take each run's shape (growing past what they hold).
TEST(SizedProgramsTest, OneLinkRunsAtTheSizesItsInputsBind) {
  TempDir dir;
  for (const std::string& name : devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    Result<ir::Program> program = lang::parse_program(
        "size N\ninput x: f32[N, 3]\ninput w: f32[N]\noutput y: f32[N]\noutput t: f32[N + 1]\n"
        "tensor h: f32[N, 3]\nh[i, j] = x[i, j] * w[i]\ny[i] = sum(h[i, j] * f32(N))\n"
        "t[i] = f32(i) where i < N + 1\n", "rows.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    auto backend = Backend::create(*device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto code = (*backend)->compile(*program, "main");
    ASSERT_TRUE(code.ok()) << code.status();
    auto stream = (*backend)->new_stream();
    ASSERT_TRUE(stream.ok());
    auto nodes = NodeTable::create(*program);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    EXPECT_EQ((*nodes)->size_names(), std::vector<std::string>{"N"});
    EXPECT_EQ((*nodes)->size_values(), std::vector<int64_t>{-1});
    auto root = (*backend)->make_context(*stream, *nodes);
    ASSERT_TRUE(root.ok());
    auto linked = (*backend)->link(*root, *code, "main");
    ASSERT_TRUE(linked.ok()) << name << ": " << linked.status();
    // Nothing bound yet: the run says which size is missing.
    Status unbound = linked->routine->run();
    EXPECT_EQ(unbound.code(), StatusCode::kFailedPrecondition) << unbound;
    EXPECT_NE(unbound.message().find("N"), std::string::npos) << unbound;
    for (int64_t rows : {3, 7, 0, 1000, 5}) {
      const std::string what = name + " at N = " + std::to_string(rows);
      std::vector<float> x(static_cast<size_t>(rows) * 3), w(static_cast<size_t>(rows));
      for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 7) - 3;
      for (size_t k = 0; k < w.size(); ++k) w[k] = 0.5f * static_cast<float>(k % 3);
      auto xt = (*nodes)->tensor("x");
      auto wt = (*nodes)->tensor("w");
      ASSERT_TRUE(xt.ok() && wt.ok());
      ASSERT_TRUE(xt->write(std::as_bytes(std::span<const float>(x)), {rows, 3}).ok()) << what;
      // w's shape must agree with the N that x bound for this run.
      std::vector<float> wrong(static_cast<size_t>(rows) + 1);
      Status disagree = wt->write(std::as_bytes(std::span<const float>(wrong)), {rows + 1});
      EXPECT_EQ(disagree.code(), StatusCode::kInvalidArgument) << what << ": " << disagree;
      EXPECT_NE(disagree.message().find("size N, which is " + std::to_string(rows)), std::string::npos) << disagree;
      ASSERT_TRUE(wt->write(std::as_bytes(std::span<const float>(w)), {rows}).ok()) << what;
      EXPECT_EQ((*nodes)->size_values(), std::vector<int64_t>{rows});
      Status ran = linked->routine->run();
      ASSERT_TRUE(ran.ok()) << what << ": " << ran;
      auto y = (*nodes)->tensor("y")->read_as<float>();
      auto t = (*nodes)->tensor("t")->read_as<float>();
      ASSERT_TRUE(y.ok() && t.ok()) << what << ": " << y.status() << t.status();
      EXPECT_EQ((*nodes)->tensor("y")->desc().dims, std::vector<int64_t>{rows});
      ASSERT_EQ(y->size(), static_cast<size_t>(rows)) << what;
      ASSERT_EQ(t->size(), static_cast<size_t>(rows) + 1) << what;
      for (int64_t i = 0; i < rows; ++i) {
        const float n = static_cast<float>(rows);
        float sum = 0;
        for (int j = 0; j < 3; ++j) sum += x[i * 3 + j] * w[i] * n;
        ASSERT_FLOAT_EQ((*y)[static_cast<size_t>(i)], sum) << what << " at " << i;
      }
      for (int64_t i = 0; i <= rows; ++i) ASSERT_EQ((*t)[static_cast<size_t>(i)], static_cast<float>(i)) << what;
    }
    // A wrong rank, a fixed dimension that differs, an unknown size, a negative one.
    auto xt = (*nodes)->tensor("x");
    std::vector<float> six(6);
    EXPECT_EQ(xt->write(std::as_bytes(std::span<const float>(six)), {6}).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(xt->write(std::as_bytes(std::span<const float>(six)), {3, 2}).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*nodes)->set_sizes({{"M", 3}}).code(), StatusCode::kNotFound);
    EXPECT_EQ((*nodes)->set_sizes({{"N", -1}}).code(), StatusCode::kInvalidArgument);
  }
}

// Two routines of one context at sizes that go back and forth (5, 7, 5): each run sees the arrays
// at the current sizes, although the other routine grew them in between.
TEST(SizedProgramsTest, RoutinesFollowSizesThatComeBack) {
  TempDir dir;
  Result<hal::DeviceRef> device = open_device("cpu", dir.path() + "/cache");
  ASSERT_TRUE(device.ok()) << device.status();
  Result<ir::Program> program = lang::parse_program(
      "size N\ninput x: f32[N]\noutput y: f32[N]\nroutine twice {\n  y[i] = x[i] * 2\n}\n"
      "routine thrice {\n  y[i] = x[i] * 3\n}\n", "back.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  auto backend = Backend::create(*device);
  ASSERT_TRUE(backend.ok());
  auto code = (*backend)->compile_batch(*program, std::vector<std::string>{"twice", "thrice"});
  ASSERT_TRUE(code.ok()) << code.status();
  auto nodes = NodeTable::create(*program);
  auto stream = (*backend)->new_stream();
  ASSERT_TRUE(nodes.ok() && stream.ok());
  auto root = (*backend)->make_context(*stream, *nodes);
  ASSERT_TRUE(root.ok());
  auto linked = (*backend)->link_batch(*root, *code);
  ASSERT_TRUE(linked.ok()) << linked.status();
  const struct {
    int64_t n;
    size_t routine;
    float factor;
  } runs[] = {{5, 0, 2}, {7, 1, 3}, {5, 0, 2}, {700, 1, 3}, {5, 0, 2}};
  for (const auto& run : runs) {
    std::vector<float> x(static_cast<size_t>(run.n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    ASSERT_TRUE((*nodes)->tensor("x")->write(std::as_bytes(std::span<const float>(x)), {run.n}).ok());
    ASSERT_TRUE(linked->routines[run.routine]->run().ok());
    auto y = (*nodes)->tensor("y")->read_as<float>();
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ((*y)[i], x[i] * run.factor) << "N = " << run.n << " at " << i;
  }
}

// A host copy grown for new sizes may take the memory of one released before (large copies
// reuse huge-page mappings, kiln/base/host_memory.h), holding old values: until it is written it
// must still read as zeros and upload zeros.
TEST(SizedProgramsTest, AHostCopyInReusedMemoryReadsAsZerosUntilWritten) {
  Result<ir::Program> program = lang::parse_program(
      "size N\ninput x: f32[N]\noutput y: f32[N]\ny[i] += x[i]\n", "reuse.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  const int64_t n = int64_t{3} << 20;  // 12 MiB host copies: huge pages
  std::vector<float> sevens(static_cast<size_t>(n), 7.0f), ones(static_cast<size_t>(n), 1.0f);
  for (int round = 0; round < 3; ++round) {
    // A table whose host copies hold sevens, released; then a fresh one at the same size.
    {
      auto old_nodes = NodeTable::create(*program);
      ASSERT_TRUE(old_nodes.ok());
      for (const char* name : {"x", "y"}) {
        ASSERT_TRUE((*old_nodes)->tensor(name)->write(std::as_bytes(std::span<const float>(sevens)), {n}).ok());
      }
    }
    auto nodes = NodeTable::create(*program);
    ASSERT_TRUE(nodes.ok());
    ASSERT_TRUE((*nodes)->set_sizes({{"N", n}}).ok());
    for (const char* name : {"x", "y"}) {
      auto values = (*nodes)->tensor(name)->read_as<float>();
      ASSERT_TRUE(values.ok()) << values.status();
      ASSERT_EQ(values->size(), sevens.size());
      size_t nonzero = 0;
      for (float v : *values) nonzero += v != 0.0f;
      ASSERT_EQ(nonzero, 0u) << name << ", round " << round;
    }
    // Run on cpu: y's unwritten copy is uploaded as zeros, and the run adds x to it.
    ASSERT_TRUE((*nodes)->tensor("x")->write(std::as_bytes(std::span<const float>(ones)), {n}).ok());
    TempDir dir;
    Result<hal::DeviceRef> device = open_device("cpu", dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    auto backend = Backend::create(*device);
    ASSERT_TRUE(backend.ok());
    auto code = (*backend)->compile(*program, "main");
    auto stream = (*backend)->new_stream();
    ASSERT_TRUE(code.ok() && stream.ok()) << code.status();
    auto root = (*backend)->make_context(*stream, *nodes);
    ASSERT_TRUE(root.ok());
    auto linked = (*backend)->link(*root, *code, "main");
    ASSERT_TRUE(linked.ok()) << linked.status();
    ASSERT_TRUE(linked->routine->run().ok());
    auto y = (*nodes)->tensor("y")->read_as<float>();
    ASSERT_TRUE(y.ok()) << y.status();
    size_t wrong = 0;
    for (float v : *y) wrong += v != 1.0f;
    ASSERT_EQ(wrong, 0u) << "round " << round;
  }
}

// A sized gradient summed across two streams through the merge buffer (streaming and copied), and
// a copy between contexts whose tables bind N to other values refused, naming both shapes.
TEST(SizedProgramsTest, MergesAndTransfersOfSizedTensors) {
  TempDir dir;
  Result<hal::DeviceRef> device = open_device("cpu", dir.path() + "/cache");
  ASSERT_TRUE(device.ok()) << device.status();
  Result<ir::Program> program = lang::parse_program(
      "size N\ninput x: f32[N]\noutput g: f32[N]\nroutine grad {\n  g[i] = x[i] * 2\n}\n"
      "routine merge {\n  g[i] += g.merge[i]\n}\n", "merge.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  auto backend = Backend::create(*device);
  ASSERT_TRUE(backend.ok());
  auto code = (*backend)->compile_batch(*program, std::vector<std::string>{"grad", "merge"});
  ASSERT_TRUE(code.ok()) << code.status();
  auto nodes = NodeTable::create(*program);
  ASSERT_TRUE(nodes.ok());
  std::vector<runtime::LinkedBatch> shards;
  for (int k = 0; k < 2; ++k) {
    auto stream = (*backend)->new_stream();
    ASSERT_TRUE(stream.ok());
    auto root = (*backend)->make_context(*stream, *nodes);
    ASSERT_TRUE(root.ok());
    auto linked = (*backend)->link_batch(*root, *code);
    ASSERT_TRUE(linked.ok()) << linked.status();
    shards.push_back(*linked);
  }
  for (runtime::MergeMode mode : {runtime::MergeMode::kStreaming, runtime::MergeMode::kCopy}) {
    for (int64_t n : {6, 2, 9}) {
      for (int k = 0; k < 2; ++k) {
        std::vector<float> x(static_cast<size_t>(n), static_cast<float>(k + 1));
        ASSERT_TRUE((*nodes)->tensor("x")->write(std::as_bytes(std::span<const float>(x)), {n}).ok());
        ASSERT_TRUE(shards[static_cast<size_t>(k)].routines[0]->run().ok());  // grad
      }
      ASSERT_TRUE(runtime::device_to_device("g", mode, shards[0].context, shards[1].context).ok());
      ASSERT_TRUE(shards[0].routines[1]->run().ok());  // merge
      auto g = runtime::host_view(shards[0].context, "g");
      ASSERT_TRUE(g.ok()) << g.status();
      ASSERT_EQ(g->bytes.size(), static_cast<size_t>(n) * sizeof(float));
      const float* values = reinterpret_cast<const float*>(g->bytes.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(values[i], 2.0f + 4.0f) << "N = " << n << " at " << i;
    }
  }
  // A view taken at one size stays readable after a larger size gives the array a new buffer (the
  // view keeps its own; ASan would see a use after free otherwise).
  auto small = runtime::host_view(shards[0].context, "g");
  ASSERT_TRUE(small.ok()) << small.status();
  std::vector<float> big(100000, 1.0f);
  ASSERT_TRUE((*nodes)->tensor("x")->write(std::as_bytes(std::span<const float>(big)), {100000}).ok());
  ASSERT_TRUE(shards[0].routines[0]->run().ok());
  auto large = runtime::host_view(shards[0].context, "g");
  ASSERT_TRUE(large.ok()) << large.status();
  ASSERT_EQ(large->bytes.size(), big.size() * sizeof(float));
  EXPECT_NE(large->bytes.data(), small->bytes.data());
  float first = 0;
  std::memcpy(&first, small->bytes.data(), sizeof first);  // the old buffer, still alive
  EXPECT_EQ(first, 6.0f);
  // Two tables at other sizes: a copy between their contexts is refused, naming both shapes.
  auto other_nodes = NodeTable::create(*program);
  ASSERT_TRUE(other_nodes.ok());
  ASSERT_TRUE((*other_nodes)->set_sizes({{"N", 4}}).ok());
  auto stream = (*backend)->new_stream();
  auto root = (*backend)->make_context(*stream, *other_nodes);
  ASSERT_TRUE(root.ok());
  auto other = (*backend)->link_batch(*root, *code);
  ASSERT_TRUE(other.ok());
  Result<bool> copied = runtime::device_to_device("g", runtime::MergeMode::kNo, other->context, shards[0].context);
  ASSERT_FALSE(copied.ok());
  EXPECT_NE(copied.status().message().find("is f32[100000]"), std::string::npos) << copied.status();
  EXPECT_NE(copied.status().message().find("f32[4]"), std::string::npos) << copied.status();
  EXPECT_NE(copied.status().message().find("their tables bind its sizes to other values"), std::string::npos)
      << copied.status();
}

// Calls in code linked once over a table with sizes: bound again at each new size.
TEST(SizedProgramsTest, CallsRunAtTheShapesOfEachRun) {
  TempDir dir;
  Result<ir::Program> program = lang::parse_program(kCalls, "calls.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(lowered->routines[0].calls.size(), 3u) << "the product over N is not a gemm call";
  for (const std::string& name : devices()) {
    Result<hal::DeviceRef> device = open_device(name, dir.path() + "/cache");
    ASSERT_TRUE(device.ok()) << device.status();
    auto backend = Backend::create(*device);
    ASSERT_TRUE(backend.ok());
    auto code = (*backend)->compile(*program, "main");
    ASSERT_TRUE(code.ok()) << code.status();
    auto stream = (*backend)->new_stream();
    auto nodes = NodeTable::create(*program, 3);
    ASSERT_TRUE(stream.ok() && nodes.ok());
    auto root = (*backend)->make_context(*stream, *nodes);
    ASSERT_TRUE(root.ok());
    auto linked = (*backend)->link(*root, *code, "main");
    ASSERT_TRUE(linked.ok()) << name << ": " << linked.status();
    // Sizes that come back, with more in between than a routine keeps plans of (four): the
    // plans of 70 and 5 are reused, and those of 5 and 0 made again after they were dropped.
    for (int64_t rows : {5, 0, 70, 3, 70, 5, 9, 11, 5, 0}) {
      const std::string what = name + " at N = " + std::to_string(rows);
      Result<ir::Program> at = ir::specialize_sizes(*program, {rows});
      ASSERT_TRUE(at.ok()) << at.status();
      std::vector<NodeTable::ShapedWrite> writes;
      std::map<std::string, HostTensor> inputs;
      for (const ir::TensorNode& node : at->nodes) {
        if (node.role != ir::Role::kInput) continue;
        inputs[node.name] = random_tensor(node, 40 + static_cast<uint64_t>(rows));
        writes.push_back({node.name, std::as_bytes(std::span<const char>(inputs[node.name].bytes)), node.dims});
      }
      ASSERT_TRUE((*nodes)->write_shaped(writes).ok()) << what;
      Status ran = linked->routine->run();
      ASSERT_TRUE(ran.ok()) << what << ": " << ran;
      // The same program specialized to N, with the same inputs.
      auto expected = ProgramInstance::create(*device, *at, {});
      ASSERT_TRUE(expected.ok()) << what << ": " << expected.status();
      for (const auto& [input, tensor] : inputs) ASSERT_TRUE(write_tensor(**expected, input, tensor).ok());
      ASSERT_TRUE((*expected)->run("main").ok()) << what;
      for (const ir::TensorNode* node : result_nodes(*at)) {
        Result<HostTensor> want = read_tensor(**expected, *node);
        ASSERT_TRUE(want.ok());
        HostTensor got = empty_tensor(*node);
        auto tensor = (*nodes)->tensor(node->name);
        ASSERT_TRUE(tensor.ok());
        Status read = tensor->read(std::as_writable_bytes(std::span<char>(got.bytes)));
        ASSERT_TRUE(read.ok()) << what << ": " << read;
        if (auto diff = first_difference(node->name, *want, got)) ADD_FAILURE() << what << ": " << *diff;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::e2e
