// CTS: executables — exports by name and ordinal, refused formats, compiler diagnostics, and
// compiling from several threads.
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

// Cases that compile the test kernels skip on devices without them (CTS_REQUIRE_KERNELS); the
// format refusal and the compiler diagnostic run on every device.
class ExecutableTest : public CtsTest {};
KILN_CTS_INSTANTIATE(ExecutableTest);

TEST_P(ExecutableTest, LookupExportByName) {
  CTS_REQUIRE_KERNELS();
  hal::ExecutableRef executable = kernels();
  const std::pair<const char*, TestKernel> names[] = {
      {"write_ids", kWriteIds},     {"add_constant", kAddConstant},
      {"copy_offset", kCopyOffset}, {"return_constant", kReturnConstant},
      {"probe_state", kProbeState},
  };
  for (const auto& [name, ordinal] : names) {
    auto found = executable->lookup_export(name);
    ASSERT_TRUE(found.ok()) << name << ": " << found.status().to_string();
    EXPECT_EQ(*found, uint32_t(ordinal)) << name;
  }
  auto missing = executable->lookup_export("no_such_kernel");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  EXPECT_EQ(executable->lookup_export("").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(executable->lookup_export("write_id").status().code(), StatusCode::kNotFound);
}

TEST_P(ExecutableTest, ExportInfoByOrdinal) {
  CTS_REQUIRE_KERNELS();
  hal::ExecutableRef executable = kernels();
  hal::ExecutableSource source = must(test_kernel_source(device().info()));
  ASSERT_EQ(executable->exports().size(), source.exports.size());
  EXPECT_EQ(executable->device_tag(), device().tag());
  for (uint32_t i = 0; i < source.exports.size(); ++i) {
    auto info = executable->export_info(i);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ((*info)->name, source.exports[i].name);
    EXPECT_EQ((*info)->binding_count, source.exports[i].binding_count);
    EXPECT_EQ((*info)->constant_count, source.exports[i].constant_count);
  }
  auto past = executable->export_info(uint32_t(source.exports.size()));
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument) << past.status().to_string();
  EXPECT_EQ(executable->export_info(~uint32_t{0}).status().code(), StatusCode::kInvalidArgument);
  auto copy = executable->export_info(kCopyOffset);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((*copy)->binding_count, 2u);
  EXPECT_EQ((*copy)->constant_count, 2u);
}

TEST_P(ExecutableTest, UnknownFormatIsRefused) {
  // Any source will do: the format is refused before the source is looked at.
  hal::ExecutableSource source;
  source.source = "not compiled";
  source.exports = {{"k", 0, 0}};
  source.label = "cts_unknown_format";
  source.format = "spirv-nonsense";
  auto result = device().compile_executable(source);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnimplemented) << result.status().to_string();
  source.format = "";
  EXPECT_FALSE(device().compile_executable(source).ok());
}

TEST_P(ExecutableTest, SyntaxErrorReportsCompilerDiagnostic) {
  auto broken = broken_kernel_source(device().info());
  if (!broken.ok()) GTEST_SKIP() << "the CTS has no broken test source for this device's formats";
  hal::ExecutableSource source = *broken;
  auto result = device().compile_executable(source);
  ASSERT_FALSE(result.ok());
  const std::string& message = result.status().message();
  EXPECT_NE(message.find("error"), std::string::npos) << result.status().to_string();
  // Still refused the second time (failures are not cached as successes).
  EXPECT_FALSE(device().compile_executable(source).ok());
}

TEST_P(ExecutableTest, ExportMissingFromTheCode) {
  CTS_REQUIRE_KERNELS();
  hal::ExecutableSource source = must(test_kernel_source(device().info()));
  source.exports.push_back({"not_in_the_source", 0, 0});
  auto result = device().compile_executable(source);
  EXPECT_FALSE(result.ok());
}

TEST_P(ExecutableTest, CompileTwiceBothWork) {
  CTS_REQUIRE_KERNELS();
  hal::ExecutableSource source = must(test_kernel_source(device().info()));
  hal::ExecutableRef first = must(device().compile_executable(source), "first compile");
  hal::ExecutableRef second = must(device().compile_executable(source), "second compile");
  for (const hal::ExecutableRef& executable : {first, second}) {
    BufferRef out = make_buffer(8 * 4, 0xFF);
    hal::DispatchCommand dispatch = make_dispatch(kWriteIds, {8, 1, 1}, {}, {{out}});
    dispatch.executable = executable;
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}}, std::move(dispatch)));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint32_t> values = read_u32(out);
    for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(values[i], i);
  }
}

TEST_P(ExecutableTest, ExecutableOutlivesItsFirstUser) {
  CTS_REQUIRE_KERNELS();
  // An executable stays usable after other executables of the same code are dropped.
  hal::ExecutableSource source = must(test_kernel_source(device().info()));
  hal::ExecutableRef kept = must(device().compile_executable(source), "compile");
  { hal::ExecutableRef dropped = must(device().compile_executable(source), "compile again"); }
  BufferRef out = make_buffer(4, 0xFF);
  hal::DispatchCommand dispatch = make_dispatch(kWriteIds, {1, 1, 1}, {}, {{out}});
  dispatch.executable = kept;
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}}, std::move(dispatch)));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_u32(out), std::vector<uint32_t>{0});
}

TEST_P(ExecutableTest, CompileFromManyThreads) {
  CTS_REQUIRE_KERNELS();
  // Several threads compile the same source and a distinct one each, at once.
  constexpr int kThreads = 4;
  hal::ExecutableSource source = must(test_kernel_source(device().info()));
  std::vector<Status> shared_results(kThreads), own_results(kThreads);
  std::vector<hal::ExecutableRef> own(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto shared = device().compile_executable(source);
      shared_results[t] = shared.status();
      hal::ExecutableSource variant = source;
      // A distinct but equivalent source: a trailing comment in the format's own syntax is not
      // portable, so append a harmless declaration only for "c".
      if (variant.format == "c") {
        variant.source += "\nint cts_thread_marker_" + std::to_string(t) + "_" +
                          std::to_string(now_ns()) + "(void) { return 0; }\n";
      }
      auto compiled = device().compile_executable(variant);
      own_results[t] = compiled.status();
      if (compiled.ok()) own[t] = *compiled;
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CTS_EXPECT_OK(shared_results[t]);
    CTS_EXPECT_OK(own_results[t]);
  }
  for (int t = 0; t < kThreads; ++t) {
    if (!own[t]) continue;
    BufferRef out = make_buffer(4 * 4, 0xFF);
    hal::DispatchCommand dispatch = make_dispatch(kWriteIds, {2, 2, 1}, {}, {{out}});
    dispatch.executable = own[t];
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}}, std::move(dispatch)));
    CTS_ASSERT_OK(wait(done, 1));
    EXPECT_EQ(read_u32(out), (std::vector<uint32_t>{0, 1, 1000, 1001}));
  }
}

}  // namespace
}  // namespace kiln::cts
