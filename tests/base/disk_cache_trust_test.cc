// What the disk cache trusts (issue 48): only a directory of this user's that no one else may
// write. An entry planted with a valid trailer in another user's directory, in one its group or
// others may write, behind a symbolic link, or as another user's file is never returned; the
// cache then works in a private directory, says why once, and removes that directory at exit.
// Directories it makes are 0700 and entries 0600. A cache shared on purpose (KILN_CACHE_SHARED)
// also accepts its group; files kept for the user (keep_file) follow the same rule.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "base/disk_cache.h"
#include "base/sha256.h"
#include "common/other_user.h"
#include "common/scoped_env.h"
#include "common/temp_dir.h"
#include "common/test_child.h"

namespace kiln {
namespace {

using test::ScopedEnv;
using test::TempDir;

const std::string kTrustKey = sha256_hex("a kernel of the trust tests");

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool lexists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

class DiskCacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.path().empty()); }

  // A cache directory of this user's (0700) holding a valid entry of kTrustKey whose payload is
  // `payload`: what someone who can write there could plant.
  std::string planted_cache(const std::string& name, const std::string& payload) {
    const std::string dir = root_.file(name);
    EXPECT_EQ(::mkdir(dir.c_str(), 0700), 0) << dir;
    plant(dir, payload);
    return dir;
  }
  static void plant(const std::string& dir, const std::string& payload) {
    const std::string name = kTrustKey + ".so";
    ASSERT_TRUE(write_file_atomic(dir + "/" + name, DiskCache::make_entry(name, payload)).ok());
  }

  // The payload load() returns for kTrustKey, "" on a miss.
  static std::string loaded(const DiskCache& cache) {
    Result<std::optional<std::string>> found = cache.load(kTrustKey, "so");
    EXPECT_TRUE(found.ok()) << found.status();
    return found.ok() && found->has_value() ? **found : "";
  }

  // Expects the directory of `cache` to be refused: nothing is read from it, and what is stored
  // goes to a private directory, where it is found; returns where it went.
  static std::string expect_refused(const DiskCache& cache) {
    EXPECT_EQ(loaded(cache), "");
    Result<std::string> stored = cache.store(kTrustKey, "so", "ours");
    EXPECT_TRUE(stored.ok()) << stored.status();
    if (!stored.ok()) return "";
    EXPECT_NE(stored->rfind(cache.dir() + "/", 0), 0u) << *stored;
    EXPECT_EQ(loaded(cache), "ours");
    return *stored;
  }

  TempDir root_{"kiln-cache-trust"};
};

TEST_F(DiskCacheTrustTest, MadeDirectoriesAre0700AndEntries0600) {
  DiskCache cache(root_.file("a/b"));
  Result<std::string> stored = cache.store(kTrustKey, "so", "ours");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(mode_of(root_.file("a")), 0700u);
  EXPECT_EQ(mode_of(root_.file("a/b")), 0700u);
  EXPECT_EQ(mode_of(*stored), 0600u);
  EXPECT_EQ(loaded(cache), "ours");
}

TEST_F(DiskCacheTrustTest, OwnDirectoryNoOneElseMayWriteIsUsed) {
  // 0755 made by an earlier version (or by hand) is accepted: others may read, not write.
  for (mode_t mode : {0700, 0750, 0755, 0500}) {
    SCOPED_TRACE(mode);
    const std::string dir = planted_cache("own" + std::to_string(mode), "ours");
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    EXPECT_EQ(loaded(DiskCache(dir)), "ours");
  }
}

TEST_F(DiskCacheTrustTest, PlantedEntryInAnotherUsersDirectoryIsNotLoaded) {
  KILN_SKIP_UNLESS_ROOT();
  const std::string dir = planted_cache("theirs", "planted");
  ASSERT_TRUE(test::give_to_other_user(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  // What this process builds is cached elsewhere, privately, and found there; their directory
  // is left as it was.
  expect_refused(DiskCache(dir));
  const std::string name = kTrustKey + ".so";
  EXPECT_EQ(read_file(dir + "/" + name).value(), DiskCache::make_entry(name, "planted"));
}

TEST_F(DiskCacheTrustTest, DirectoryOthersMayWriteIsNotUsed) {
  for (mode_t mode : {0770, 0730, 0777, 0703, 01777}) {
    SCOPED_TRACE(mode);
    const std::string dir = planted_cache("writable" + std::to_string(mode), "planted");
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    expect_refused(DiskCache(dir));
  }
}

TEST_F(DiskCacheTrustTest, LinkForTheCacheDirectoryIsNotFollowed) {
  const std::string real = planted_cache("real", "planted");
  const std::string link = root_.file("link");
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  const std::string stored = expect_refused(DiskCache(link));
  EXPECT_NE(stored.rfind(real + "/", 0), 0u) << stored;
  EXPECT_EQ(loaded(DiskCache(real)), "planted");  // the target itself is untouched
}

TEST_F(DiskCacheTrustTest, LinkForAnEntryIsNotFollowed) {
  // The user's own cache, where an entry is a link to a valid entry somewhere else.
  const std::string dir = planted_cache("linked-entry", "own");
  const std::string elsewhere = planted_cache("elsewhere", "planted");
  const std::string entry = dir + "/" + kTrustKey + ".so";
  ASSERT_EQ(::unlink(entry.c_str()), 0);
  ASSERT_EQ(::symlink((elsewhere + "/" + kTrustKey + ".so").c_str(), entry.c_str()), 0);
  EXPECT_EQ(loaded(DiskCache(dir)), "");
  EXPECT_EQ(loaded(DiskCache(elsewhere)), "planted");  // the link's target is untouched
}

TEST_F(DiskCacheTrustTest, EntryOfAnotherUserOrWritableByOthersIsNotLoaded) {
  const std::string dir = planted_cache("entries", "planted");
  const std::string entry = dir + "/" + kTrustKey + ".so";
  ASSERT_EQ(::chmod(entry.c_str(), 0666), 0);
  EXPECT_EQ(loaded(DiskCache(dir)), "");
  EXPECT_FALSE(lexists(entry));  // removed as invalid, rebuilt by the caller
  if (::geteuid() != 0) return;
  plant(dir, "planted");
  ASSERT_TRUE(test::give_to_other_user(entry));
  EXPECT_EQ(loaded(DiskCache(dir)), "");
}

TEST_F(DiskCacheTrustTest, TemporaryFallbackMadeByAnotherUserIsNotUsed) {
  KILN_SKIP_UNLESS_ROOT();
  ScopedEnv no_dir("KILN_CACHE_DIR", ""), no_xdg("XDG_CACHE_HOME", ""), no_home("HOME", "");
  ScopedEnv tmp("TMPDIR", root_.path().c_str());
  const std::string fallback = DiskCache::default_dir();
  ASSERT_EQ(fallback, root_.file("kiln-cache-" + std::to_string(::getuid())));
  // Made first, by name, by someone else, and filled.
  ASSERT_EQ(::mkdir(fallback.c_str(), 0755), 0);
  plant(fallback, "planted");
  ASSERT_TRUE(test::give_to_other_user(fallback));
  const std::string stored = expect_refused(DiskCache(fallback));
  EXPECT_EQ(stored.rfind(root_.file("kiln-private-"), 0), 0u) << stored;
  EXPECT_EQ(mode_of(stored.substr(0, stored.rfind('/'))), 0700u);
}

// Child mode of RefusalIsSaidOnce: several caches on the refused directory KILN_TRUST_TEST_DIR,
// each loading and storing; prints where the last entry went.
TEST(DiskCacheTrustChildTest, UsesARefusedDirectory) {
  const char* dir = std::getenv("KILN_TRUST_TEST_DIR");
  if (!dir) GTEST_SKIP() << "runs only as a child process";
  std::string stored_at;
  for (int i = 0; i < 3; ++i) {
    DiskCache cache(dir);
    Result<std::optional<std::string>> found = cache.load(kTrustKey, "so");
    ASSERT_TRUE(found.ok()) << found.status();
    Result<std::string> stored = cache.store(kTrustKey, "so", "ours");
    ASSERT_TRUE(stored.ok()) << stored.status();
    stored_at = *stored;
  }
  std::printf("stored at %s\n", stored_at.c_str());
  std::fflush(stdout);
}

TEST_F(DiskCacheTrustTest, RefusalIsSaidOnceAndThePrivateDirectoryGoesAtExit) {
  const std::string dir = planted_cache("refused", "planted");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const std::string output = test::run_test_child(
      {"KILN_TRUST_TEST_DIR=" + dir, "TMPDIR=" + root_.path(), "KILN_LOG=warn"},
      "DiskCacheTrustChildTest.UsesARefusedDirectory", 60000);
  size_t said = 0;
  for (size_t at = output.find("is not used"); at != std::string::npos; at = output.find("is not used", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << output;
  // It names the directory, its owner and its mode, and why.
  EXPECT_NE(output.find("the cache directory " + dir + " (owner uid " + std::to_string(::geteuid()) + ", mode 0777)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("writable by others"), std::string::npos) << output;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(output, match, std::regex("stored at (\\S+)"))) << output;
  const std::string stored = match[1];
  EXPECT_EQ(stored.rfind(root_.file("kiln-private-"), 0), 0u) << stored;
  EXPECT_FALSE(lexists(stored.substr(0, stored.rfind('/')))) << "the private directory outlived the process";
}

// A cache shared on purpose (KILN_CACHE_SHARED=1): a directory its group may write is used,
// whoever owns it; one others may write still is not; entries are written 0644.
TEST_F(DiskCacheTrustTest, GroupWritableIsUsedOnlyWhenShared) {
  const std::string dir = planted_cache("team", "the team's");
  ASSERT_EQ(::chmod(dir.c_str(), 02770), 0);
  // A team's directory belongs to whoever made it.
  if (::geteuid() == 0) {
    ASSERT_TRUE(test::give_to_other_user(dir));
  }
  EXPECT_EQ(loaded(DiskCache(dir, CacheSharing::kShared)), "the team's");
  EXPECT_EQ(loaded(DiskCache(dir, CacheSharing::kPrivate)), "");
  Result<std::string> stored = DiskCache(dir, CacheSharing::kShared).store(sha256_hex("another"), "so", "mine");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->rfind(dir + "/", 0), 0u) << *stored;
  EXPECT_EQ(mode_of(*stored), 0644u);
}

TEST_F(DiskCacheTrustTest, WritableByOthersIsNeverUsedEvenShared) {
  for (mode_t mode : {0777, 01777, 0773}) {
    SCOPED_TRACE(mode);
    const std::string dir = planted_cache("open" + std::to_string(mode), "planted");
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    expect_refused(DiskCache(dir, CacheSharing::kShared));
  }
}

TEST_F(DiskCacheTrustTest, ConfiguredReadsKilnCacheShared) {
  {
    ScopedEnv shared("KILN_CACHE_SHARED", "1");
    Result<DiskCache> cache = DiskCache::configured(root_.path());
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ(cache->sharing(), CacheSharing::kShared);
    EXPECT_EQ(cache->dir(), root_.path());
  }
  for (const char* value : {"", "0"}) {
    ScopedEnv shared("KILN_CACHE_SHARED", value);
    Result<DiskCache> cache = DiskCache::configured(root_.path());
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ(cache->sharing(), CacheSharing::kPrivate) << value;
  }
  ScopedEnv shared("KILN_CACHE_SHARED", "yes");
  Result<DiskCache> cache = DiskCache::configured(std::nullopt);
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("KILN_CACHE_SHARED='yes'"), std::string::npos) << cache.status();
}

// Files kept for the user to open (a source that failed to build) follow the cache's rule.
TEST_F(DiskCacheTrustTest, KeptFilesArePrivateAndOnlyInATrustedCache) {
  DiskCache cache(root_.file("cache"));
  Result<std::string> kept = cache.keep_file("failed", "k.c", "int x = ;");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, root_.file("cache/failed/k.c"));
  EXPECT_EQ(read_file(*kept).value(), "int x = ;");
  EXPECT_EQ(mode_of(root_.file("cache/failed")), 0700u);
  EXPECT_EQ(mode_of(*kept), 0600u);
  EXPECT_EQ(cache.keep_file("../x", "k.c", "").status().code(), StatusCode::kInvalidArgument);

  // Not into a refused cache (nor into the private one used instead, which goes at exit).
  const std::string refused = planted_cache("refused", "planted");
  ASSERT_EQ(::chmod(refused.c_str(), 0777), 0);
  Result<std::string> not_kept = DiskCache(refused).keep_file("failed", "k.c", "int x = ;");
  EXPECT_EQ(not_kept.status().code(), StatusCode::kFailedPrecondition) << not_kept.status();
  EXPECT_FALSE(lexists(refused + "/failed"));

  // Nor through a link where the subdirectory should be.
  const std::string linked = planted_cache("linked", "ours");
  ASSERT_EQ(::symlink(refused.c_str(), (linked + "/failed").c_str()), 0);
  not_kept = DiskCache(linked).keep_file("failed", "k.c", "int x = ;");
  EXPECT_EQ(not_kept.status().code(), StatusCode::kFailedPrecondition) << not_kept.status();
  EXPECT_FALSE(lexists(refused + "/k.c"));
}

}  // namespace
}  // namespace kiln
