// The `interp` driver: loop-IR kernels compiled from their text and run through a HAL queue —
// elementwise and reduction kernels, the parallel split over workgroups, bounds checks that fail
// the dispatch, and compile errors. Every op's semantics (integer edge cases, NaN rules, f64
// evaluation) are in interp_semantics_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "drivers/interp_test_util.h"

namespace kiln {
namespace {

using interp_test::InterpTest;

// ---------------------------------------------------------------------------------------------
// The driver.

TEST_F(InterpTest, DriverAndDevice) {
  auto driver = drivers::builtin_registry().find("interp");
  ASSERT_TRUE(driver.ok()) << driver.status().to_string();
  EXPECT_TRUE((*driver)->availability().ok());
  auto devices = (*driver)->enumerate_devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name, "interp:0");
  EXPECT_EQ((*devices)[0].driver, "interp");
  EXPECT_EQ((*devices)[0].description, "reference interpreter of the loop IR");
  const hal::DeviceInfo& info = device_->info();
  EXPECT_EQ(info.name, "interp:0");
  EXPECT_EQ(info.capabilities.executable_formats, std::vector<std::string>{"kiln-loop"});
  EXPECT_GE(info.capabilities.compute_units, 1u);
  EXPECT_EQ((*driver)->create_device(1, {}).status().code(), StatusCode::kOutOfRange);
  // cpu comes first in the registry, interp after it.
  const auto& drivers = drivers::builtin_registry().drivers();
  ASSERT_GE(drivers.size(), 2u);
  EXPECT_EQ(drivers[0]->name(), "cpu");
  EXPECT_EQ(drivers[1]->name(), "interp");
}

TEST_F(InterpTest, WorkerThreadsOption) {
  hal::DeviceOptions options;
  options.worker_threads = 3;
  auto device = drivers::builtin_registry().create_device("interp:0", options);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  EXPECT_EQ((*device)->info().capabilities.compute_units, 3u);
  options.worker_threads = 0;
  EXPECT_EQ(drivers::builtin_registry().create_device("interp", options).status().code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Kernels.

constexpr const char* kElementwise = R"(
(kernel scale_relu (nodes 4 9) (vars 1) (locals 0)
  (for v0 100 parallel
    (store 9 v0 (+ f32 (* f32 (relu f32 (load f32 4 v0)) (const f32 2)) (const f32 1)))))
)";

TEST_F(InterpTest, Elementwise) {
  hal::ExecutableRef executable = must_compile(kElementwise);
  ASSERT_TRUE(executable);
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i - 50) * 0.25f;
  hal::BufferRef in = buffer(x), out = buffer(std::vector<float>(100, -1.0f));
  ASSERT_TRUE(run(executable, 0, 7, {{in}, {out}}).ok());
  std::vector<float> y = read<float>(out);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(y[i], std::max(x[i], 0.0f) * 2 + 1) << i;
  }
}

// Row sums of a 6x10 matrix through a local accumulator declared per row (zero-filled each
// time), and the sum of everything through an f64 local in a sequential kernel.
constexpr const char* kReductions = R"(
(kernel row_sums (nodes 0 1) (vars 2) (locals 1)
  (for v0 6 parallel
    (local 0 f32 1
      (for v1 10
        (local_store 0 0 (+ f32 (local_load f32 0 0) (load f32 0 (+ (* v0 10) v1)))))
      (store 1 v0 (local_load f32 0 0)))))
(kernel total (nodes 0 2) (vars 1) (locals 1)
  (local 0 f64 2
    (for v0 60
      (local_store 0 1 (+ f64 (local_load f64 0 1) (f64 (load f32 0 v0)))))
    (store 2 0 (local_load f64 0 1))
    (store 2 1 (local_load f64 0 0))))
)";

TEST_F(InterpTest, ReductionsAccumulateInLocals) {
  hal::ExecutableRef executable = must_compile(kReductions);
  ASSERT_TRUE(executable);
  std::vector<float> x(60);
  for (int i = 0; i < 60; ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
  hal::BufferRef in = buffer(x), rows = buffer(std::vector<float>(6, 99.0f)),
                 total = buffer(std::vector<double>(2, 99.0));
  ASSERT_TRUE(run(executable, 0, 3, {{in}, {rows}}).ok());
  ASSERT_TRUE(run(executable, 1, 1, {{in}, {total}}).ok());
  std::vector<float> sums = read<float>(rows);
  double all = 0;
  for (int r = 0; r < 6; ++r) {
    float expected = 0;
    for (int c = 0; c < 10; ++c) expected += x[r * 10 + c];
    EXPECT_EQ(sums[r], expected) << "row " << r;
    all += expected;
  }
  std::vector<double> t = read<double>(total);
  EXPECT_EQ(t[0], all);
  EXPECT_EQ(t[1], 0.0);  // the untouched element of the zero-filled local
}

// out[i] += 1 for every i: each iteration must run exactly once whatever the workgroup count.
constexpr const char* kIncrement = R"(
(kernel inc_parallel (nodes 0) (vars 1) (locals 0)
  (for v0 37 parallel
    (store 0 v0 (+ i32 (load i32 0 v0) (const i32 1)))))
(kernel inc_sequential (nodes 0) (vars 1) (locals 0)
  (for v0 37
    (store 0 v0 (+ i32 (load i32 0 v0) (const i32 1)))))
(kernel inc_block (nodes 0) (vars 1) (locals 0)
  (block
    (for v0 37 parallel
      (store 0 v0 (+ i32 (load i32 0 v0) (const i32 1))))))
)";

TEST_F(InterpTest, ParallelSplitRunsEveryIterationOnce) {
  hal::ExecutableRef executable = must_compile(kIncrement);
  ASSERT_TRUE(executable);
  for (uint32_t ordinal : {0u, 1u, 2u}) {
    // 1, 3, E, and more than E (the extra workgroups are empty); the sequential kernels run in
    // workgroup 0 only.
    for (uint32_t workgroups : {1u, 3u, 5u, 36u, 37u, 64u}) {
      SCOPED_TRACE(testing::Message() << "export " << ordinal << ", " << workgroups << " workgroups");
      hal::BufferRef out = buffer(std::vector<int32_t>(38, 10));
      ASSERT_TRUE(run(executable, ordinal, workgroups, {{out}}).ok());
      std::vector<int32_t> values = read<int32_t>(out);
      for (int i = 0; i < 37; ++i) EXPECT_EQ(values[i], 11) << i;
      EXPECT_EQ(values[37], 10);
    }
  }
}

// A 12x20 by 20x9 matrix product, parallel over rows; every workgroup count gives the same bits.
constexpr const char* kMatmul = R"(
(kernel matmul (nodes 0 1 2) (vars 3) (locals 1)
  (for v0 12 parallel
    (for v1 9
      (local 0 f32 1
        (for v2 20
          (local_store 0 0
            (+ f32 (local_load f32 0 0)
                   (* f32 (load f32 0 (+ (* v0 20) v2)) (load f32 1 (+ (* v2 9) v1))))))
        (store 2 (+ (* v0 9) v1) (local_load f32 0 0))))))
)";

TEST_F(InterpTest, WorkgroupCountsGiveIdenticalResults) {
  hal::ExecutableRef executable = must_compile(kMatmul);
  ASSERT_TRUE(executable);
  std::vector<float> a(12 * 20), b(20 * 9);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i)) * 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i) * 0.7f);
  hal::BufferRef ba = buffer(a), bb = buffer(b);
  std::vector<std::vector<float>> results;
  for (uint32_t workgroups : {1u, 3u, 12u}) {
    hal::BufferRef c = buffer(std::vector<float>(12 * 9, 0.0f));
    ASSERT_TRUE(run(executable, 0, workgroups, {{ba}, {bb}, {c}}).ok());
    results.push_back(read<float>(c));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // The products accumulate in f32 (the local rounds at every store); the terms in f64.
  for (int i = 0; i < 12; ++i) {
    for (int j = 0; j < 9; ++j) {
      float acc = 0;
      for (int k = 0; k < 20; ++k) {
        acc = static_cast<float>(static_cast<double>(acc) +
                                 static_cast<double>(a[i * 20 + k]) * b[k * 9 + j]);
      }
      EXPECT_EQ(results[0][i * 9 + j], acc) << i << "," << j;
    }
  }
}

TEST_F(InterpTest, SeveralExportsMatchedByName) {
  std::string text = kReductions;
  // Exports in another order than the text, one kernel exported twice, one not at all.
  auto executable = compile(text, {{"total", 2, 0}, {"row_sums", 2, 0}, {"total", 2, 0}});
  ASSERT_TRUE(executable.ok()) << executable.status().to_string();
  EXPECT_EQ((*executable)->exports().size(), 3u);
  hal::BufferRef in = buffer(std::vector<float>(60, 1.0f));
  hal::BufferRef total = buffer(std::vector<double>(2, 0.0));
  ASSERT_TRUE(run(*executable, 2, 1, {{in}, {total}}).ok());
  EXPECT_EQ(read<double>(total)[0], 60.0);
  hal::BufferRef rows = buffer(std::vector<float>(6, 0.0f));
  ASSERT_TRUE(run(*executable, 1, 2, {{in}, {rows}}).ok());
  EXPECT_EQ(read<float>(rows), std::vector<float>(6, 10.0f));
}

TEST_F(InterpTest, BindingsAtOffsets) {
  // The kernel sees a binding's range only: element 0 is the binding's first byte.
  hal::ExecutableRef executable = must_compile(
      "(kernel shift (nodes 0 1) (vars 1) (locals 0)"
      " (for v0 4 (store 1 v0 (load i32 0 v0))))");
  ASSERT_TRUE(executable);
  hal::BufferRef source = buffer(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  hal::BufferRef target = buffer(std::vector<int32_t>(8, -1));
  ASSERT_TRUE(run(executable, 0, 1, {{source, 12, 16}, {target, 8, 16}}).ok());
  EXPECT_EQ(read<int32_t>(target), (std::vector<int32_t>{-1, -1, 3, 4, 5, 6, -1, -1}));
  // The same with a binding one element too short fails.
  Status status = run(executable, 0, 1, {{source, 20, 12}, {target, 8, 16}});
  EXPECT_FALSE(status.ok());
}

// ---------------------------------------------------------------------------------------------
// Bounds checks: a failing dispatch, never undefined behaviour.

void expect_failed_with(const Status& status, int code) {
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), StatusCode::kDeadlineExceeded) << status.to_string();
  EXPECT_NE(status.message().find("returned " + std::to_string(code)), std::string::npos)
      << status.to_string();
}

TEST_F(InterpTest, OutOfRangeAccessesFailTheDispatch) {
  hal::ExecutableRef executable = must_compile(R"(
(kernel load_past (nodes 0 1) (vars 1) (locals 0)
  (for v0 8 parallel (store 1 v0 (load f32 0 (+ v0 1)))))
(kernel store_past (nodes 0 1) (vars 1) (locals 0)
  (for v0 9 parallel (store 1 v0 (const f32 1))))
(kernel negative (nodes 0 1) (vars 0) (locals 0)
  (store 1 0 (load f32 0 -1)))
(kernel huge (nodes 0 1) (vars 0) (locals 0)
  (store 1 4611686018427387904 (load f32 0 0)))
(kernel local_past (nodes 0 1) (vars 1) (locals 1)
  (local 0 f32 4 (for v0 5 (local_store 0 v0 (const f32 1)))))
(kernel local_load_past (nodes 0 1) (vars 0) (locals 1)
  (local 0 f32 4 (store 1 0 (local_load f32 0 4))))
(kernel in_range (nodes 0 1) (vars 1) (locals 0)
  (for v0 8 parallel (store 1 v0 (load f32 0 v0))))
)");
  ASSERT_TRUE(executable);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  hal::BufferRef in = buffer(x);
  for (uint32_t workgroups : {1u, 3u, 8u}) {
    hal::BufferRef out = buffer(std::vector<float>(8, 0));
    expect_failed_with(run(executable, 0, workgroups, {{in}, {out}}), 1);
    expect_failed_with(run(executable, 1, workgroups, {{in}, {out}}), 2);
  }
  hal::BufferRef out = buffer(std::vector<float>(8, 0));
  expect_failed_with(run(executable, 2, 1, {{in}, {out}}), 1);
  expect_failed_with(run(executable, 3, 1, {{in}, {out}}), 2);
  expect_failed_with(run(executable, 4, 1, {{in}, {out}}), 3);
  expect_failed_with(run(executable, 5, 1, {{in}, {out}}), 3);
  // A binding shorter than the kernel assumes.
  hal::BufferRef short_in = buffer(std::vector<float>(7, 0));
  expect_failed_with(run(executable, 6, 2, {{short_in}, {out}}), 1);
  // Stores past the end of an output.
  hal::BufferRef short_out = buffer(std::vector<float>(5, 0));
  expect_failed_with(run(executable, 6, 1, {{in}, {short_out}}), 2);
  EXPECT_EQ(read<float>(short_out), (std::vector<float>{1, 2, 3, 4, 5}));  // up to the failure
  // The queue is still usable.
  ASSERT_TRUE(run(executable, 6, 3, {{in}, {out}}).ok());
  EXPECT_EQ(read<float>(out), x);
}

// ---------------------------------------------------------------------------------------------
// Compile errors.

TEST_F(InterpTest, MalformedTextFailsCompile) {
  auto result = compile("(kernel bad (nodes 0) (vars 1) (locals 0)\n  (for v0 4 (store 0 v0 (frob f32 1))))",
                        {{"bad", 1, 0}});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("executable 'interp_test'"), std::string::npos)
      << result.status().to_string();
  EXPECT_NE(result.status().message().find("2:26: unknown operation 'frob'"), std::string::npos)
      << result.status().to_string();

  auto truncated = compile("(kernel bad (nodes 0) (vars 1) (locals 0) (for v0 4", {{"bad", 1, 0}});
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("unexpected end of text"), std::string::npos)
      << truncated.status().to_string();

  auto deep = compile(std::string(100000, '('), {{"bad", 1, 0}});
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(InterpTest, ExportsMustMatchKernels) {
  const std::string text = kElementwise;
  auto missing = compile(text, {{"scale_relu", 2, 0}, {"not_there", 0, 0}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("export 'not_there' has no kernel"), std::string::npos)
      << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("scale_relu"), std::string::npos);

  auto bindings = compile(text, {{"scale_relu", 3, 0}});
  ASSERT_FALSE(bindings.ok());
  EXPECT_EQ(bindings.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bindings.status().message().find("3 bindings"), std::string::npos)
      << bindings.status().to_string();

  auto constants = compile(text, {{"scale_relu", 2, 1}});
  ASSERT_FALSE(constants.ok());
  EXPECT_EQ(constants.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(constants.status().message().find("push constants"), std::string::npos);

  hal::ExecutableSource c_source;
  c_source.format = "c";
  c_source.source = "int f(void) { return 0; }";
  c_source.exports = {{"f", 0, 0}};
  EXPECT_EQ(device_->compile_executable(c_source).status().code(), StatusCode::kUnimplemented);

  auto big = compile("(kernel big (nodes) (vars 0) (locals 1) (local 0 f64 1000000000000 (block)))");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("at most"), std::string::npos) << big.status().to_string();

  auto duplicate = compile(text + text, {{"scale_relu", 2, 0}});
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("already used"), std::string::npos);
}

}  // namespace
}  // namespace kiln