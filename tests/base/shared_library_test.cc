// Loading optional libraries: the first name that loads wins, every failure is named, and
// SymbolBinder sets what it finds and lists what it does not (the C library stands in for an
// optional one).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kiln/base/shared_library.h"

namespace kiln {
namespace {

TEST(SharedLibraryTest, FirstNameThatLoadsAndEveryFailureNamed) {
  Result<void*> libc = load_shared_library({"libkiln-does-not-exist.so", "libc.so.6"});
  ASSERT_TRUE(libc.ok()) << libc.status();
  Result<void*> none = load_shared_library({"libkiln-missing-a.so", "libkiln-missing-b.so"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("libkiln-missing-a.so"), std::string::npos) << none.status();
  EXPECT_NE(none.status().message().find("; "), std::string::npos) << none.status();
  EXPECT_NE(none.status().message().find("libkiln-missing-b.so"), std::string::npos) << none.status();
}

TEST(SharedLibraryTest, SymbolBinderSetsFoundAndListsMissing) {
  Result<void*> libc = load_shared_library({"libc.so.6"});
  ASSERT_TRUE(libc.ok()) << libc.status();
  SymbolBinder binder(*libc);
  size_t (*length)(const char*) = nullptr;
  int (*absent)(int) = &::abs;  // set, so that the test sees the binder clear it
  binder.bind(length, "strlen");
  EXPECT_TRUE(binder.missing().empty());
  binder.bind(absent, "kiln_no_such_symbol");
  void (*other)() = nullptr;
  binder.bind(other, "kiln_nor_this_one");
  ASSERT_NE(length, nullptr);
  EXPECT_EQ(length("kiln"), 4u);
  EXPECT_EQ(absent, nullptr);
  EXPECT_EQ(binder.missing(), "kiln_no_such_symbol, kiln_nor_this_one");
}

}  // namespace
}  // namespace kiln
