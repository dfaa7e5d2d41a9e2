// Helpers shared by the runtime layer's tests (runtime_api, runtime_errors, merge_transfer,
// stream_equivalence, stress): real cpu devices, programs parsed from .kiln text, and reading /
// writing a node's host copy as floats. Every blocking wait has a finite timeout, so that a bug
// fails a test instead of hanging it.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/same_bits.h"
#include "common/sanitized.h"
#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"

namespace kiln::runtime_test {

// The runtime's names the tests use most.
using runtime::Backend;
using runtime::CodeRef;
using runtime::ContextRef;
using runtime::HostedKind;
using runtime::MergeMode;
using runtime::NodeTable;
using runtime::RoutineRef;
using runtime::Sharing;
using runtime::StreamRef;

// Long enough for a sanitizer build on a loaded machine, short enough that a hang fails.
inline Timeout wait_limit() { return Timeout::after_ms(120000); }

using test::kSanitized;  // the stress tests do less work under a sanitizer

#define KILN_ASSERT_OK(expr)                            \
  do {                                                  \
    const ::kiln::Status kiln_status_ = (expr);         \
    ASSERT_TRUE(kiln_status_.ok()) << #expr << ": " << kiln_status_; \
  } while (0)

#define KILN_EXPECT_OK(expr)                            \
  do {                                                  \
    const ::kiln::Status kiln_status_ = (expr);         \
    EXPECT_TRUE(kiln_status_.ok()) << #expr << ": " << kiln_status_; \
  } while (0)

// Asserts that a Result holds a value and moves it into `lhs`.
#define KILN_ASSERT_OK_AND_ASSIGN(lhs, expr)                                    \
  auto KILN_CONCAT_(kiln_result_, __LINE__) = (expr);                           \
  ASSERT_TRUE(KILN_CONCAT_(kiln_result_, __LINE__).ok())                        \
      << #expr << ": " << KILN_CONCAT_(kiln_result_, __LINE__).status();        \
  lhs = std::move(*KILN_CONCAT_(kiln_result_, __LINE__))

// A status with `code` whose message contains every one of `words`.
inline ::testing::AssertionResult has_error(const Status& status, StatusCode code,
                                            std::initializer_list<std::string> words = {}) {
  if (status.code() != code) {
    return ::testing::AssertionFailure() << "expected " << code << ", got " << status;
  }
  for (const std::string& w : words) {
    if (status.message().find(w) == std::string::npos) {
      return ::testing::AssertionFailure() << "the message does not mention '" << w << "': " << status;
    }
  }
  return ::testing::AssertionSuccess();
}

inline Result<ir::Program> parse(const std::string& text, const std::string& file = "test.kiln") {
  return lang::parse_program(text, file);
}

// A fresh cpu device (its kernel cache from KILN_CACHE_DIR, as ctest sets it).
inline Result<hal::DeviceRef> cpu_device(hal::DeviceOptions options = {}) {
  return drivers::builtin_registry().create_device("cpu", options);
}

inline Result<std::vector<float>> read_floats(runtime::NodeTable& nodes, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(name));
  return tensor.read_as<float>(wait_limit());
}

inline Status write_floats(runtime::NodeTable& nodes, const std::string& name,
                           const std::vector<float>& values) {
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(name));
  return tensor.write_from(values);
}

// n floats start, start + step, ...
inline std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

using test::same_bits;  // bitwise equality of vectors (NaNs with the same bits compare equal)

}  // namespace kiln::runtime_test
