// The HAL conformance test suite (CTS): one set of cases that every driver must pass.
//
// In the spirit of IREE's runtime/src/iree/hal/cts: each test file derives its fixture from
// CtsTest, whose parameter is a driver name ("cpu", later "opencl", "cuda"), and instantiates it
// with KILN_CTS_INSTANTIATE(Fixture), which runs the cases once per built-in driver; on a
// machine where a driver is not available (no OpenCL platform, no CUDA device) its cases skip,
// each with one line saying why. Kernels come from a per-format table (test_kernel_source), so a new driver only
// adds its dialect of the same few test kernels. A device whose formats cannot express them (the
// loop-IR interpreter: no push constants, no workgroup ids) skips exactly the cases that need
// them (CTS_REQUIRE_KERNELS) and runs every other case: semaphores, queues, transfers, buffers.
//
// Rules the cases follow: every blocking wait has a finite timeout (kWaitMs) so that a broken
// implementation fails instead of hanging; sleeps (grace_sleep) only give a wrongly ordered
// implementation the chance to misbehave, never make correct ordering work; no upper bounds on
// time are asserted.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/hal/driver.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/hal/semaphore.h"

namespace kiln::cts {

using hal::BufferRef;
using hal::SemaphoreList;
using SemaphoreRef = std::shared_ptr<hal::Semaphore>;

// How long any single blocking wait in a test may take before the test fails.
inline constexpr int64_t kWaitMs = 10000;
inline Timeout wait_timeout() { return Timeout::after_ms(kWaitMs); }
// How long a test gives a wrongly ordered implementation to do something it must not.
inline constexpr int kGraceMs = 20;
void grace_sleep(int ms = kGraceMs);

// Thrown by must() when a setup step fails; gtest reports it as a failure of the test.
struct CtsFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <typename T>
T must(Result<T> result, const char* what = "result") {
  if (!result.ok()) throw CtsFailure(std::string(what) + ": " + result.status().to_string());
  return std::move(result).value();
}
inline void must(const Status& status, const char* what = "status") {
  if (!status.ok()) throw CtsFailure(std::string(what) + ": " + status.to_string());
}

#define CTS_ASSERT_OK(expr)                                                      \
  do {                                                                           \
    const ::kiln::Status cts_status_ = (expr);                                   \
    ASSERT_TRUE(cts_status_.ok()) << #expr << " -> " << cts_status_.to_string(); \
  } while (0)
#define CTS_EXPECT_OK(expr)                                                      \
  do {                                                                           \
    const ::kiln::Status cts_status_ = (expr);                                   \
    EXPECT_TRUE(cts_status_.ok()) << #expr << " -> " << cts_status_.to_string(); \
  } while (0)
#define CTS_EXPECT_CODE(code_, expr)                         \
  do {                                                       \
    const ::kiln::Status cts_status_ = (expr);               \
    EXPECT_EQ(cts_status_.code(), ::kiln::StatusCode::code_) \
        << #expr << " -> " << cts_status_.to_string();       \
  } while (0)
#define CTS_EXPECT_NOT_OK(expr)                                           \
  do {                                                                    \
    const ::kiln::Status cts_status_ = (expr);                            \
    EXPECT_FALSE(cts_status_.ok()) << #expr << " unexpectedly succeeded"; \
  } while (0)

#define CTS_REQUIRE_KERNELS() \
  if (!has_kernels()) GTEST_SKIP() << "the CTS has no test kernels for this device's formats"

// ---------------------------------------------------------------------------------------------
// Drivers.

// Names of the built-in drivers, in registry order.
std::vector<std::string> registered_drivers();
// "cpu" → "cpu"; anything that is not [A-Za-z0-9] becomes '_'.
std::string driver_test_name(const ::testing::TestParamInfo<std::string>& info);

// Runs the fixture's cases once per built-in driver (CtsTest::SetUp skips unavailable ones).
#define KILN_CTS_INSTANTIATE(fixture)                                             \
  GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(fixture);                         \
  INSTANTIATE_TEST_SUITE_P(Drivers, fixture,                                      \
                           ::testing::ValuesIn(::kiln::cts::registered_drivers()), \
                           ::kiln::cts::driver_test_name)

// ---------------------------------------------------------------------------------------------
// Test kernels. Every format provides the same exports, in this order, over uint32_t elements.
// The linear workgroup index is x + count_x * (y + count_y * z).
enum TestKernel : uint32_t {
  // bindings: out. constants: none. out[linear] = x + 1000*y + 1000000*z. Returns 10 if the slot
  // is past the binding and 11 if it was already written (not 0xFFFFFFFF): run each workgroup
  // exactly once over a buffer pre-filled with 0xFF bytes.
  kWriteIds = 0,
  // bindings: data. constants: addend, elements per workgroup. Adds the addend to the workgroup's
  // range of elements (clipped to the binding).
  kAddConstant = 1,
  // bindings: source, target. constants: source offset (elements), elements per workgroup.
  // target[i] = source[i + offset] over the workgroup's range (clipped to the target); returns 12
  // when reading past the source.
  kCopyOffset = 2,
  // bindings: none. constants: value. Returns the value (nonzero fails the dispatch).
  kReturnConstant = 3,
  // bindings: out (>= 12 elements), probe. constants: 3 values. Workgroup 0 writes:
  // out[0] abi version, out[1..3] workgroup count, out[4] binding count, out[5] constant count,
  // out[6..8] constants, out[9] out's byte length, out[10] probe's byte length,
  // out[11] probe[0] (the first element of the probe binding, as seen at its offset).
  kProbeState = 4,
  kTestKernelCount = 5,
};
inline constexpr uint32_t kIdsEmpty = 0xFFFFFFFFu;
inline uint32_t workgroup_id_value(uint32_t x, uint32_t y, uint32_t z) {
  return x + 1000u * y + 1000000u * z;
}

// The test kernels in the first of the device's executable formats that the table knows;
// UNIMPLEMENTED when it knows none (the tests that need kernels are then skipped).
Result<hal::ExecutableSource> test_kernel_source(const hal::DeviceInfo& info);
// A source with a syntax error in the first of the device's formats that the table has one for
// (also formats without test kernels, e.g. "kiln-loop"), for compiler diagnostics; UNIMPLEMENTED
// when it has none.
Result<hal::ExecutableSource> broken_kernel_source(const hal::DeviceInfo& info);

// ---------------------------------------------------------------------------------------------
// The fixture.

class CtsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  hal::Device& device() { return *device_; }
  hal::Allocator& allocator() { return device_->allocator(); }

  SemaphoreRef semaphore(uint64_t initial_value = 0) {
    return device_->create_semaphore(initial_value);
  }
  // Waits with the suite's finite timeout.
  static Status wait(const SemaphoreRef& semaphore, uint64_t value) {
    return semaphore->wait(value, wait_timeout());
  }
  // The semaphore's value, or ~0 when it has failed.
  static uint64_t value_of(const SemaphoreRef& semaphore) {
    auto value = semaphore->query();
    return value.ok() ? *value : ~uint64_t{0};
  }

  // A buffer of `size` bytes, every byte set to `fill` (through a mapping when the usage allows,
  // else through the queue).
  BufferRef make_buffer(size_t size, uint8_t fill = 0, uint32_t usage = hal::kUsageDefault);
  BufferRef make_buffer(const std::vector<uint8_t>& bytes, uint32_t usage = hal::kUsageDefault);
  BufferRef make_u32_buffer(const std::vector<uint32_t>& values);
  // Reads bytes back synchronously (the caller has already waited for the writers).
  std::vector<uint8_t> read_bytes(const BufferRef& buffer, size_t offset = 0,
                                  size_t length = hal::Buffer::kWholeBuffer);
  std::vector<uint32_t> read_u32(const BufferRef& buffer);

  // The test kernels, compiled once per test. Tests that use them start with
  // CTS_REQUIRE_KERNELS(), which skips them when the format table has none for this device.
  hal::ExecutableRef kernels();
  bool has_kernels();
  hal::DispatchCommand make_dispatch(TestKernel kernel, std::array<uint32_t, 3> workgroups,
                                     std::vector<uint32_t> constants,
                                     std::vector<hal::BufferBinding> bindings);

  hal::DeviceRef device_;
  hal::QueueRef queue_;
  hal::QueueRef queue2_;

 private:
  hal::ExecutableRef kernels_;
};

// Compares byte vectors, reporting the first difference instead of printing megabytes.
::testing::AssertionResult bytes_equal(const std::vector<uint8_t>& actual,
                                       const std::vector<uint8_t>& expected);

// `size` bytes of a reproducible pseudo-random pattern.
std::vector<uint8_t> pattern_bytes(size_t size, uint32_t seed);

// Records the order in which host calls ran.
class OrderLog {
 public:
  void add(int id);
  std::vector<int> entries() const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::vector<int> entries_;
};

// Runs fn on a helper thread and waits up to kWaitMs for it; false (and the thread is left
// detached) when it did not finish. `fn` must only capture what it owns (shared_ptrs, copies).
bool run_bounded(std::function<void()> fn, int64_t timeout_ms = kWaitMs);

// Polls `predicate` until it is true or kWaitMs passed; returns its last value.
bool eventually(const std::function<bool()>& predicate);

}  // namespace kiln::cts
