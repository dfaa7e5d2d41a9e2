// The loop-IR optimization passes (kiln/loop/optimize.h) executed: a few kernels that exercise
// folding, fma, hoisting and its safety rules run unoptimized and optimized on the `interp`
// reference and on the `cpu` device, and all four runs must agree (floats within rounding,
// integers exactly). Guarded loads that are out of range prove that hoisting never makes a load
// run that the original does not run: the reference would fail the dispatch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/wait_limit.h"
#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"
#include "kiln/hal/queue.h"
#include "kiln/loop/loop.h"
#include "kiln/loop/op_eval.h"
#include "kiln/loop/optimize.h"

namespace kiln {
namespace {

using ir::DType;
using ir::Kernel;

using test::kWaitMs;

// A node's buffer: its element type and values (integers kept in `f` too, exactly).
struct NodeBuffer {
  DType type = DType::kF32;
  std::vector<double> values;
};
using Buffers = std::map<int, NodeBuffer>;

Result<hal::DeviceRef> device(const std::string& name) {
  hal::DeviceOptions options;
  options.cache_dir = "";  // compile every time: the test is about the kernels
  return drivers::builtin_registry().create_device(name, options);
}

std::vector<unsigned char> bytes_of(const NodeBuffer& b) {
  const size_t size = ir::dtype_size(b.type);
  std::vector<unsigned char> out(b.values.size() * size);
  for (size_t i = 0; i < b.values.size(); ++i) {
    ir::Scalar v;
    if (ir::is_float_type(b.type)) {
      v.f = b.values[i];
    } else {
      v.i = static_cast<int64_t>(b.values[i]);
    }
    ir::store_scalar(b.type, v, out.data() + i * size);
  }
  return out;
}

void read_back(const std::vector<unsigned char>& bytes, NodeBuffer* b) {
  const size_t size = ir::dtype_size(b->type);
  for (size_t i = 0; i < b->values.size(); ++i) {
    const ir::Scalar v = ir::load_scalar(b->type, bytes.data() + i * size);
    b->values[i] = ir::is_float_type(b->type) ? v.f : ir::int_to_double(b->type, v.i);
  }
}

// Compiles `kernels` for `dev` ("kiln-loop" text for interp, C for cpu), runs them in order
// (each over its maximal workgroup count) on `buffers`, and reads every buffer back.
Status run(const hal::DeviceRef& dev, bool interp, const std::vector<Kernel>& kernels, Buffers* buffers) {
  hal::ExecutableSource source;
  if (interp) {
    source.format = "kiln-loop";
    for (const Kernel& k : kernels) source.source += ir::print_kernel(k);
  } else {
    source.format = std::string(codegen::dialect_format(codegen::Dialect::kC));
    KILN_ASSIGN_OR_RETURN(source.source, codegen::emit_kernels(kernels, nullptr));
  }
  for (const Kernel& k : kernels) source.exports.push_back({k.name, static_cast<uint32_t>(k.nodes.size()), 0});
  source.label = "optimize_execution_test";
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, dev->compile_executable(source));
  std::map<int, hal::BufferRef> bound;
  for (auto& [node, b] : *buffers) {
    std::vector<unsigned char> bytes = bytes_of(b);
    KILN_ASSIGN_OR_RETURN(hal::BufferRef buffer, dev->allocator().allocate({}, bytes.size()));
    KILN_RETURN_IF_ERROR(buffer->write_data(0, bytes.data(), bytes.size()));
    bound[node] = buffer;
  }
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, dev->create_queue("optimize-test"));
  auto timeline = dev->create_semaphore();
  uint64_t value = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    hal::DispatchCommand dispatch;
    dispatch.executable = executable;
    dispatch.export_ordinal = static_cast<uint32_t>(i);
    dispatch.workgroups = {static_cast<uint32_t>(codegen::max_workgroups(kernels[i])), 1, 1};
    for (int node : kernels[i].nodes) dispatch.bindings.push_back({bound.at(node)});
    hal::SemaphoreList waits;
    if (value > 0) waits.push_back({timeline, value});
    KILN_RETURN_IF_ERROR(queue->dispatch(waits, {{timeline, value + 1}}, std::move(dispatch)));
    ++value;
  }
  KILN_RETURN_IF_ERROR(timeline->wait(value, Timeout::after_ms(kWaitMs)));
  for (auto& [node, b] : *buffers) {
    std::vector<unsigned char> bytes(b.values.size() * ir::dtype_size(b.type));
    KILN_RETURN_IF_ERROR(bound[node]->read_data(0, bytes.data(), bytes.size()));
    read_back(bytes, &b);
  }
  return Status();
}

// Deterministic inputs: floats in [-2, 2], integers anywhere in i32.
NodeBuffer filled(DType type, size_t n, uint32_t seed) {
  NodeBuffer b{type, std::vector<double>(n)};
  uint32_t x = seed * 2654435761u + 1;
  for (double& v : b.values) {
    x = x * 1664525u + 1013904223u;
    const bool is_int = type == DType::kI32 || type == DType::kI64;
    v = is_int ? static_cast<double>(static_cast<int32_t>(x)) : (x >> 8) / double(1 << 24) * 4 - 2;
  }
  return b;
}

std::vector<Kernel> parse(const std::string& text) {
  Result<std::vector<Kernel>> kernels = ir::parse_kernels(text);
  EXPECT_TRUE(kernels.ok()) << kernels.status().to_string();
  return kernels.ok() ? *kernels : std::vector<Kernel>();
}

// Runs `text` unoptimized and optimized on interp and cpu from `inputs`; all must agree with the
// unoptimized interp run.
void expect_same_results(const std::string& text, const Buffers& inputs) {
  std::vector<Kernel> plain = parse(text);
  ASSERT_FALSE(plain.empty());
  std::vector<Kernel> optimized = plain;
  for (Kernel& k : optimized) ir::optimize_kernel(k);
  std::string optimized_text;
  for (const Kernel& k : optimized) optimized_text += ir::print_kernel(k);
  ASSERT_NE(optimized_text, text) << "the passes changed nothing; the test would prove nothing";

  Result<hal::DeviceRef> interp = device("interp");
  Result<hal::DeviceRef> cpu = device("cpu");
  ASSERT_TRUE(interp.ok()) << interp.status().to_string();
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  Buffers reference = inputs;
  Status st = run(*interp, true, plain, &reference);
  ASSERT_TRUE(st.ok()) << st.to_string();
  struct Variant {
    const char* name;
    bool interp;
    const std::vector<Kernel>* kernels;
  };
  for (const Variant& v : {Variant{"interp, optimized", true, &optimized},
                           Variant{"cpu, unoptimized", false, &plain},
                           Variant{"cpu, optimized", false, &optimized}}) {
    Buffers out = inputs;
    st = run(v.interp ? *interp : *cpu, v.interp, *v.kernels, &out);
    ASSERT_TRUE(st.ok()) << v.name << ": " << st.to_string() << "\n" << optimized_text;
    for (const auto& [node, b] : reference) {
      for (size_t i = 0; i < b.values.size(); ++i) {
        const double want = b.values[i], got = out.at(node).values[i];
        if (b.type == DType::kI32 || b.type == DType::kI64) {
          ASSERT_EQ(got, want) << v.name << ": node " << node << "[" << i << "]\n" << optimized_text;
        } else if (!(std::isnan(want) && std::isnan(got))) {
          ASSERT_NEAR(got, want, 1e-5 + 1e-4 * std::fabs(want))
              << v.name << ": node " << node << "[" << i << "]\n" << optimized_text;
        }
      }
    }
  }
}

TEST(OptimizeExecutionTest, MatmulBiasReluInPlace) {
  // c = a(8x16) * b(16x4) accumulated in place, then y = relu(c + bias): fma and a hoisted a[i, k].
  const std::string text =
      "(kernel mm (nodes 0 1 4) (vars 3) (locals 0)\n"
      "  (for v0 8 parallel\n"
      "    (for v1 4 (store 4 (+ (* v0 4) (* v1 1)) (const f32 0)))\n"
      "    (for v2 16\n"
      "      (for v1 4\n"
      "        (store 4 (+ (* v0 4) v1) (+ f32 (load f32 4 (+ (* v0 4) v1)) (* f32 (load f32 0 (+ (* v0 16) v2)) (load f32 1 (+ (* v2 4) v1)))))))))\n"
      "(kernel bias (nodes 4 2 3) (vars 2) (locals 0)\n"
      "  (for v0 8 parallel\n"
      "    (for v1 4\n"
      "      (store 3 (+ (+ (* v0 4) v1) 0) (relu f32 (+ f32 (load f32 4 (+ (* v0 4) v1)) (* f32 (const f32 1) (load f32 2 v1))))))))\n";
  expect_same_results(text, {{0, filled(DType::kF32, 128, 1)}, {1, filled(DType::kF32, 64, 2)},
                             {2, filled(DType::kF32, 4, 3)}, {3, filled(DType::kF32, 32, 4)},
                             {4, filled(DType::kF32, 32, 5)}});
}

TEST(OptimizeExecutionTest, SoftmaxRowsWithHoistedMaxAndSum) {
  const std::string text =
      "(kernel softmax (nodes 0 1) (vars 2) (locals 2)\n"
      "  (for v0 4 parallel\n"
      "    (local 0 f32 1\n"
      "      (local_store 0 0 (const f32 -inf))\n"
      "      (for v1 10 (local_store 0 0 (max f32 (local_load f32 0 0) (load f32 0 (+ (* v0 10) v1)))))\n"
      "      (local 1 f32 1\n"
      "        (for v1 10 (local_store 1 0 (+ f32 (local_load f32 1 0) (exp f32 (- f32 (load f32 0 (+ (* v0 10) v1)) (local_load f32 0 0))))))\n"
      "        (for v1 10\n"
      "          (store 1 (+ (* v0 10) v1) (/ f32 (exp f32 (- f32 (load f32 0 (+ (* v0 10) v1)) (local_load f32 0 0))) (+ f32 (log f32 (exp f32 (local_load f32 1 0))) (const f32 0)))))))))\n";
  expect_same_results(text, {{0, filled(DType::kF32, 40, 6)}, {1, filled(DType::kF32, 40, 7)}});
}

TEST(OptimizeExecutionTest, GuardedOutOfRangeLoadsStayGuarded) {
  // Node 0 has 32 elements: (load f32 0 100) and (load f32 0 1000) are out of range and must
  // never run — not out of the select operand, the if body, or the extent-0 loop.
  const std::string text =
      "(kernel guarded (nodes 0 1 2) (vars 3) (locals 0)\n"
      "  (for v0 4 parallel\n"
      "    (for v1 8\n"
      "      (store 1 (+ (* v0 8) v1) (select f32 (< (+ v1 (load i64 2 0)) -1000) (exp f32 (load f32 0 100)) (* f32 (load f32 0 v0) (exp f32 (f32 v0)))))\n"
      "      (if (< v1 0) (store 1 v1 (load f32 0 1000)))\n"
      "      (for v2 0 (store 1 v2 (sqrt f32 (load f32 0 1000)))))))\n";
  Buffers inputs = {{0, filled(DType::kF32, 32, 8)}, {1, filled(DType::kF32, 32, 9)},
                    {2, NodeBuffer{DType::kI64, {5}}}};
  expect_same_results(text, inputs);
}

TEST(OptimizeExecutionTest, IntegerWrapAroundAndOffsets) {
  const std::string text =
      "(kernel ints (nodes 0 1) (vars 2) (locals 0)\n"
      "  (for v0 3 parallel\n"
      "    (for v1 4\n"
      "      (store 1 (- (+ (* (+ v0 1) 4) v1) 4)\n"
      "        (+ i32 (* i32 (load i32 0 (+ (* v0 4) v1)) (+ i32 (const i32 65536) (const i32 0)))\n"
      "               (+ i32 (* i32 (const i32 2147483647) (const i32 2)) (/ i32 (const i32 -2147483648) (const i32 -1))))))))\n";
  expect_same_results(text, {{0, filled(DType::kI32, 12, 10)}, {1, filled(DType::kI32, 12, 11)}});
}

TEST(OptimizeExecutionTest, ReductionsSplitIntoLanes) {
  // Rows of 100 (three lanes' rounds and a tail of 4): an f32 sum and max, an i32 sum that wraps
  // and an f64 product; split_reductions makes each a local array of lanes.
  const std::string text =
      "(kernel reduce (nodes 0 1 2 3 4 5 6) (vars 2) (locals 4)\n"
      "  (for v0 3 parallel\n"
      "    (local 0 f32 1 (local 1 f32 1 (local 2 i32 1 (local 3 f64 1\n"
      "      (local_store 1 0 (const f32 -inf))\n"
      "      (local_store 3 0 (const f64 1))\n"
      "      (for v1 100 (local_store 0 0 (+ f32 (local_load f32 0 0) (load f32 0 (+ (* v0 100) v1)))))\n"
      "      (for v1 100 (local_store 1 0 (max f32 (load f32 0 (+ (* v0 100) v1)) (local_load f32 1 0))))\n"
      "      (for v1 100 (local_store 2 0 (+ i32 (local_load i32 2 0) (load i32 1 (+ (* v0 100) v1)))))\n"
      "      (for v1 100 (local_store 3 0 (* f64 (local_load f64 3 0) (load f64 2 (+ (* v0 100) v1)))))\n"
      "      (store 3 v0 (local_load f32 0 0))\n"
      "      (store 4 v0 (local_load f32 1 0))\n"
      "      (store 5 v0 (local_load i32 2 0))\n"
      "      (store 6 v0 (local_load f64 3 0))))))))\n";
  Buffers inputs = {{0, filled(DType::kF32, 300, 12)}, {1, filled(DType::kI32, 300, 13)},
                    {2, filled(DType::kF64, 300, 14)}, {3, filled(DType::kF32, 3, 15)},
                    {4, filled(DType::kF32, 3, 16)}, {5, filled(DType::kI32, 3, 17)},
                    {6, filled(DType::kF64, 3, 18)}};
  // The max of a row holding a NaN is NaN, wherever in the row (here in a lane and in the tail).
  inputs[0].values[37] = std::nan("");
  inputs[0].values[298] = std::nan("");
  expect_same_results(text, inputs);
}

}  // namespace
}  // namespace kiln
