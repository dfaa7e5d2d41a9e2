#include "kiln/base/log.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

TEST(LogTest, ErrorIsAlwaysEnabled) {
  EXPECT_TRUE(log_enabled(LogLevel::kError));
  // Levels nest: anything enabled implies every more severe level is enabled.
  if (log_enabled(LogLevel::kDebug)) {
    EXPECT_TRUE(log_enabled(LogLevel::kInfo));
  }
  if (log_enabled(LogLevel::kInfo)) {
    EXPECT_TRUE(log_enabled(LogLevel::kWarn));
  }
}

TEST(LogTest, MessageFormat) {
  (void)log_enabled(LogLevel::kError);  // reads KILN_LOG (and any warning) before capturing
  ::testing::internal::CaptureStderr();
  log_message(LogLevel::kError, "disk on fire");
  log_message(LogLevel::kDebug, std::string("x = ") + std::to_string(3));
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "kiln: error: disk on fire\nkiln: debug: x = 3\n");
}

TEST(LogTest, Macro) {
  (void)log_enabled(LogLevel::kError);  // reads KILN_LOG (and any warning) before capturing
  ::testing::internal::CaptureStderr();
  KILN_LOG(kError, "via macro");
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "kiln: error: via macro\n");
}

}  // namespace
}  // namespace kiln
