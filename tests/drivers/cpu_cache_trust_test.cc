// The CPU driver's cache and another user (issue 48): a shared object planted, with a valid
// trailer, in a cache directory someone else owns or may write is never dlopen()ed (the program
// is compiled and its own object runs), and a failing source is kept only in a trusted cache,
// 0600 in a 0700 failed/.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "base/disk_cache.h"
#include "common/other_user.h"
#include "common/temp_dir.h"
#include "drivers/cpu/cpu_compiler.h"
#include "kiln/base/env.h"

namespace kiln::cpu {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// A program whose object says which it is; `tag` makes its source (and key) unique.
std::string value_source(const std::string& tag, int value) {
  return "/* " + tag + " */\nint kiln_trust_value(void) { return " + std::to_string(value) + "; }\n";
}

class CpuCacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(root_.path().empty());
    tag_ = root_.path();
  }

  CpuCompiler compiler(const std::string& cache_dir) const {
    return CpuCompiler(env_string("KILN_CC").value_or("cc"), "", DiskCache(cache_dir), 60000);
  }

  // Builds `source` with a new compiler on `cache_dir` (another process, in effect) and returns
  // what its object's kiln_trust_value() says, -1 on failure.
  static int run(CpuCompiler& cc, const std::string& source) {
    Result<std::shared_ptr<LoadedLibrary>> library = cc.build(source, "trust");
    EXPECT_TRUE(library.ok()) << library.status();
    if (!library.ok()) return -1;
    Result<void*> symbol = (*library)->symbol("kiln_trust_value");
    EXPECT_TRUE(symbol.ok()) << symbol.status();
    return symbol.ok() ? reinterpret_cast<int (*)()>(*symbol)() : -1;
  }

  // The only .so entry of `dir`.
  static fs::path only_entry(const std::string& dir) {
    fs::path found;
    for (const auto& file : fs::directory_iterator(dir)) {
      if (file.path().extension() == ".so") {
        EXPECT_TRUE(found.empty()) << "two entries in " << dir;
        found = file.path();
      }
    }
    EXPECT_FALSE(found.empty()) << "no entry in " << dir;
    return found;
  }

  // A cache holding our program's entry with the object of another program (y = 3 for our
  // y = 2) under a freshly computed trailer: what anyone who can write the directory can make.
  std::string planted_cache(const std::string& name = "ours") {
    const std::string theirs = root_.file(name + "-theirs"), ours = root_.file(name);
    {
      CpuCompiler cc = compiler(theirs);
      EXPECT_EQ(run(cc, value_source(tag_, 3)), 3);
      CpuCompiler own = compiler(ours);
      EXPECT_EQ(run(own, value_source(tag_, 2)), 2);
    }
    const fs::path their_entry = only_entry(theirs), our_entry = only_entry(ours);
    const std::string their_name = their_entry.filename().string(), our_name = our_entry.filename().string();
    std::string bytes = read_file(their_entry.string()).value();
    std::optional<std::string_view> object = DiskCache::parse_entry(bytes, their_name);
    EXPECT_TRUE(object.has_value());
    EXPECT_TRUE(write_file_atomic(our_entry.string(), DiskCache::make_entry(our_name, std::string(*object))).ok());
    return ours;
  }

  TempDir root_{"kiln-cpu-trust"};
  std::string tag_;
};

TEST_F(CpuCacheTrustTest, PlantedObjectIsLoadedFromTheUsersOwnCache) {
  // The premise: a valid entry is trusted where only its user can write, so the plant works there.
  const std::string dir = planted_cache();
  CpuCompiler cc = compiler(dir);
  EXPECT_EQ(run(cc, value_source(tag_, 2)), 3);
}

TEST_F(CpuCacheTrustTest, PlantedObjectInAnotherUsersCacheIsNotLoaded) {
  KILN_SKIP_UNLESS_ROOT();
  const std::string dir = planted_cache();
  ASSERT_TRUE(test::give_to_other_user(dir));
  CpuCompiler cc = compiler(dir);
  EXPECT_EQ(run(cc, value_source(tag_, 2)), 2);
  EXPECT_EQ(cc.stats().compiles, 1u);
  EXPECT_EQ(cc.stats().disk_hits, 0u);
}

TEST_F(CpuCacheTrustTest, PlantedObjectInACacheOthersMayWriteIsNotLoaded) {
  for (mode_t mode : {0777, 0775}) {
    SCOPED_TRACE(mode);
    const std::string dir = planted_cache("ours" + std::to_string(mode));
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    CpuCompiler cc = compiler(dir);
    EXPECT_EQ(run(cc, value_source(tag_, 2)), 2);
    EXPECT_EQ(cc.stats().disk_hits, 0u);
    // The private directory used instead serves the next compiler of the process.
    CpuCompiler again = compiler(dir);
    EXPECT_EQ(run(again, value_source(tag_, 2)), 2);
    EXPECT_EQ(again.stats().disk_hits, 1u);
  }
}

// Where the failing source of `cc` was kept, from its message.
std::string kept_source(CpuCompiler& cc, const std::string& tag) {
  Result<std::shared_ptr<LoadedLibrary>> library = cc.build("/* " + tag + " */\nint broken(void) { return kiln_no_such_name; }\n", "broken");
  EXPECT_FALSE(library.ok());
  std::smatch match;
  const std::string message = library.status().message();
  EXPECT_TRUE(std::regex_search(message, match, std::regex("source kept at (\\S+\\.c)"))) << message;
  return match.size() > 1 ? match[1].str() : "";
}

TEST_F(CpuCacheTrustTest, FailedSourceIsKeptPrivatelyInATrustedCacheOnly) {
  const std::string trusted = root_.file("trusted");
  CpuCompiler cc = compiler(trusted);
  const std::string kept = kept_source(cc, tag_);
  EXPECT_EQ(kept.rfind(trusted + "/failed/", 0), 0u) << kept;
  struct stat st;
  ASSERT_EQ(::stat(kept.c_str(), &st), 0) << kept;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((trusted + "/failed").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // A refused cache gets nothing: the source stays in the private build directory.
  const std::string refused = root_.file("refused");
  ASSERT_EQ(::mkdir(refused.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(refused.c_str(), 0777), 0);
  CpuCompiler other = compiler(refused);
  const std::string elsewhere = kept_source(other, tag_ + " refused");
  EXPECT_NE(elsewhere.rfind(refused + "/", 0), 0u) << elsewhere;
  EXPECT_TRUE(fs::exists(elsewhere)) << elsewhere;
  EXPECT_FALSE(fs::exists(refused + "/failed"));
  fs::remove_all(fs::path(elsewhere).parent_path());
}

}  // namespace
}  // namespace kiln::cpu
