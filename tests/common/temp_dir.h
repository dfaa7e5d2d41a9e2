// A fresh temporary directory for a test, removed with everything in it on destruction, even
// where a test took permissions away. Shared by every test folder (tests/ is on the include path).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kiln::test {

class TempDir {
 public:
  // Made under $TMPDIR (else /tmp) as PREFIX-XXXXXX; path() is empty if that failed.
  explicit TempDir(const std::string& prefix = "kiln-test") {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    }
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace kiln::test
