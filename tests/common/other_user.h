// Another user, for tests of what kiln trusts: the tests run as root (here and on CI), which may
// give a file to any uid. Root bypasses permission checks, so what such tests check is kiln's own
// test of owners and modes, not the kernel's access control.
#pragma once

#include <unistd.h>

#include <string>

namespace kiln::test {

// A uid no account uses.
constexpr uid_t kOtherUid = 54321;

// Gives `path` itself (not a link's target) to kOtherUid; false where this process may not.
inline bool give_to_other_user(const std::string& path) {
  return ::lchown(path.c_str(), kOtherUid, kOtherUid) == 0;
}

#define KILN_SKIP_UNLESS_ROOT()                                                       \
  do {                                                                                \
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user"; \
  } while (0)

}  // namespace kiln::test
