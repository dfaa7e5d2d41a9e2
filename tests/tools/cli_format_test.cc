// How the command line prints numbers: times of `--repeat` with at least three significant digits
// (docs/cli.md), never an exponent.
#include <gtest/gtest.h>

#include "tools/print.h"

namespace kiln::tools {
namespace {

TEST(MillisecondsText, ThreeSignificantDigitsAtAnyScale) {
  EXPECT_EQ(milliseconds_text(0.000812), "0.000812");
  EXPECT_EQ(milliseconds_text(0.0008124), "0.000812");
  EXPECT_EQ(milliseconds_text(0.0123), "0.0123");
  EXPECT_EQ(milliseconds_text(0.5), "0.500");
  EXPECT_EQ(milliseconds_text(0.99949), "0.999");
  EXPECT_EQ(milliseconds_text(1.0), "1.000");
  EXPECT_EQ(milliseconds_text(12.3456), "12.346");
  EXPECT_EQ(milliseconds_text(18700.0), "18700.000");
  EXPECT_EQ(milliseconds_text(0.0), "0.000");
  EXPECT_EQ(milliseconds_text(1e-9), "0.00000000100");
}

}  // namespace
}  // namespace kiln::tools
