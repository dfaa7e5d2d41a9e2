#include "kiln/base/env.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace kiln {
namespace {

constexpr const char* kVar = "KILN_TEST_ENV_UINT";

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kVar); }
  void TearDown() override { unsetenv(kVar); }
};

TEST_F(EnvTest, StringUnsetOrEmpty) {
  EXPECT_EQ(env_string(kVar), std::nullopt);
  setenv(kVar, "", 1);
  EXPECT_EQ(env_string(kVar), std::nullopt);
  setenv(kVar, "hello world", 1);
  EXPECT_EQ(env_string(kVar), "hello world");
}

TEST_F(EnvTest, UintUnset) {
  Result<std::optional<uint64_t>> r = env_uint(kVar, 1, 1024);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::nullopt);
  setenv(kVar, "", 1);
  r = env_uint(kVar, 1, 1024);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::nullopt);
}

TEST_F(EnvTest, UintValid) {
  for (auto [text, value] : {std::pair<const char*, uint64_t>{"1", 1}, {"16", 16}, {"1024", 1024},
                             {"0007", 7}}) {
    setenv(kVar, text, 1);
    Result<std::optional<uint64_t>> r = env_uint(kVar, 1, 1024);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().to_string();
    EXPECT_EQ(*r, value) << text;
  }
  setenv(kVar, "18446744073709551615", 1);
  Result<std::optional<uint64_t>> r = env_uint(kVar, 0, UINT64_MAX);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, UINT64_MAX);
  setenv(kVar, "0", 1);
  r = env_uint(kVar, 0, 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
}

TEST_F(EnvTest, UintMalformed) {
  for (const char* text : {"abc", "-1", "+5", " 5", "5 ", "5x", "0x10", "1.5", "1e3", "\t7"}) {
    setenv(kVar, text, 1);
    Result<std::optional<uint64_t>> r = env_uint(kVar, 0, UINT64_MAX);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
  }
  setenv(kVar, "abc", 1);
  Result<std::optional<uint64_t>> r = env_uint(kVar, 1, 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "KILN_TEST_ENV_UINT='abc' is not an integer in [1, 1024]");
}

TEST_F(EnvTest, UintOutOfRange) {
  for (const char* text : {"0", "1025", "99999999999"}) {
    setenv(kVar, text, 1);
    Result<std::optional<uint64_t>> r = env_uint(kVar, 1, 1024);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), std::string("KILN_TEST_ENV_UINT='") + text +
                                        "' is not an integer in [1, 1024]");
  }
}

TEST_F(EnvTest, UintOverflow) {
  for (const char* text : {"18446744073709551616", "18446744073709551620",
                           "99999999999999999999999999"}) {
    setenv(kVar, text, 1);
    Result<std::optional<uint64_t>> r = env_uint(kVar, 0, UINT64_MAX);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST_F(EnvTest, Seconds) {
  Result<std::optional<double>> r = env_seconds(kVar, 86400);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::nullopt);
  for (auto [text, value] : {std::pair<const char*, double>{"60", 60}, {"0.5", 0.5}, {"2.", 2}, {".25", 0.25}}) {
    setenv(kVar, text, 1);
    r = env_seconds(kVar, 86400);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status();
    EXPECT_EQ(*r, value) << text;
  }
  for (const char* text : {"0", "0.0", "-1", "abc", "inf", "nan", "1e3", " 5", "5s", "1.2.3", ".", "86401"}) {
    setenv(kVar, text, 1);
    r = env_seconds(kVar, 86400);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(),
              std::string(kVar) + "='" + text + "' is not a number of seconds in (0, 86400]");
  }
}

}  // namespace
}  // namespace kiln
