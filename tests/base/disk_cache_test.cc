#include "base/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"

namespace kiln {
namespace {

// Removes a directory tree (test helper; no symlink handling needed).
void remove_tree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path.c_str(), 0700);
    if (DIR* d = opendir(path.c_str())) {
      std::vector<std::string> names;
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      closedir(d);
      for (const std::string& name : names) remove_tree(path + "/" + name);
    }
    rmdir(path.c_str());
  } else {
    unlink(path.c_str());
  }
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-base-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { remove_tree(root_); }

  std::string root_;
};

const std::string kKey = sha256_hex("some kernel source");

TEST_F(DiskCacheTest, RoundTrip) {
  DiskCache cache(root_ + "/a/b/c");  // created with parents on first store
  EXPECT_TRUE(cache.enabled());
  std::string payload("binary\0payload\xff with bytes", 27);
  Result<std::string> stored = cache.store(kKey, "so", payload);
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  EXPECT_EQ(*stored, cache.entry_path(kKey, "so"));
  EXPECT_EQ(*stored, root_ + "/a/b/c/" + kKey + ".so");

  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, payload);

  // The file is payload + 80-byte trailer, and the payload comes first.
  Result<std::string> bytes = read_file(*stored);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), payload.size() + 80);
  EXPECT_EQ(bytes->substr(0, payload.size()), payload);
  EXPECT_EQ(bytes->substr(payload.size(), 8), "KILNCAC2");
  EXPECT_EQ(static_cast<uint8_t>((*bytes)[payload.size() + 8]), payload.size());
  EXPECT_EQ(DiskCache::parse_entry(*bytes, kKey + ".so"), std::string_view(payload));
  EXPECT_EQ(*bytes, DiskCache::make_entry(kKey + ".so", payload));
  // The same bytes under another name are not an entry.
  EXPECT_FALSE(DiskCache::parse_entry(*bytes, kKey + ".cl").has_value());

  // No temporary files are left behind.
  EXPECT_EQ(list_dir(cache.dir()), std::vector<std::string>{kKey + ".so"});

  // A different suffix is a different entry.
  Result<std::optional<std::string>> other = cache.load(kKey, "cl");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_F(DiskCacheTest, EmptyAndLargePayloads) {
  DiskCache cache(root_);
  ASSERT_TRUE(cache.store("00", "bin", "").ok());
  Result<std::optional<std::string>> empty = cache.load("00", "bin");
  ASSERT_TRUE(empty.ok());
  ASSERT_TRUE(empty->has_value());
  EXPECT_EQ(**empty, "");

  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  ASSERT_TRUE(cache.store("01", "bin", big).ok());
  Result<std::optional<std::string>> loaded = cache.load("01", "bin");
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_TRUE(**loaded == big);
}

TEST_F(DiskCacheTest, StoreOverwrites) {
  DiskCache cache(root_);
  ASSERT_TRUE(cache.store(kKey, "so", "first").ok());
  ASSERT_TRUE(cache.store(kKey, "so", "second, longer").ok());
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(**loaded, "second, longer");
}

TEST_F(DiskCacheTest, Miss) {
  DiskCache cache(root_ + "/never-created");
  Result<std::optional<std::string>> found = cache.load(kKey, "so");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_FALSE(found->has_value());
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_FALSE(exists(root_ + "/never-created"));  // lookups create nothing
}

TEST_F(DiskCacheTest, DisabledCache) {
  DiskCache cache("");
  EXPECT_FALSE(cache.enabled());
  Result<std::optional<std::string>> found = cache.load(kKey, "so");
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  EXPECT_FALSE(cache.store(kKey, "so", "x").ok());
}

TEST_F(DiskCacheTest, BadKeys) {
  DiskCache cache(root_);
  for (const char* key : {"", "a/b", "..", "../x", "/abs", "a..b"}) {
    Result<std::string> stored = cache.store(key, "so", "x");
    ASSERT_FALSE(stored.ok()) << key;
    EXPECT_EQ(stored.status().code(), StatusCode::kInvalidArgument) << key;
    Result<std::optional<std::string>> found = cache.load(key, "so");
    ASSERT_FALSE(found.ok()) << key;
    EXPECT_EQ(found.status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_FALSE(cache.load(key, "so").ok()) << key;
  }
  for (const char* suffix : {"", "s/o", ".."}) {
    EXPECT_EQ(cache.store("ab", suffix, "x").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(cache.load("ab", suffix).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(list_dir(root_).empty());
}

// Stores an entry, damages it with `damage`, and checks that it is a miss and is removed.
template <typename Damage>
void expect_corrupt_is_miss(const std::string& dir, Damage damage) {
  DiskCache cache(dir);
  std::string payload = "the compiled kernel, more or less";
  Result<std::string> stored = cache.store(kKey, "so", payload);
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  Result<std::string> bytes = read_file(*stored);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = damage(*bytes, payload.size());
  EXPECT_FALSE(DiskCache::parse_entry(damaged, kKey + ".so").has_value());
  int fd = open(stored->c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, damaged.data(), damaged.size()), static_cast<ssize_t>(damaged.size()));
  close(fd);

  Result<std::optional<std::string>> found = cache.load(kKey, "so");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_FALSE(found->has_value());
  EXPECT_FALSE(exists(*stored)) << "corrupt entry was not deleted";

  // Same through load().
  ASSERT_TRUE(cache.store(kKey, "so", payload).ok());
  fd = open(stored->c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, damaged.data(), damaged.size()), static_cast<ssize_t>(damaged.size()));
  close(fd);
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->has_value());
  EXPECT_FALSE(exists(*stored));

  // And storing again makes it valid.
  ASSERT_TRUE(cache.store(kKey, "so", payload).ok());
  Result<std::optional<std::string>> again = cache.load(kKey, "so");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ(**again, payload);
}

TEST_F(DiskCacheTest, TruncatedIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t) { return b.substr(0, b.size() - 1); });
}

TEST_F(DiskCacheTest, TruncatedBelowTrailerIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t) { return b.substr(0, 20); });
}

TEST_F(DiskCacheTest, EmptyFileIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string, size_t) { return std::string(); });
}

TEST_F(DiskCacheTest, PayloadTruncatedTrailerKeptIsMiss) {
  // Drops a payload byte but keeps the trailer whole: the length no longer matches.
  expect_corrupt_is_miss(root_, [](std::string b, size_t) { return b.substr(1); });
}

TEST_F(DiskCacheTest, FlippedPayloadByteIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t n) {
    b[n / 2] ^= 0x01;
    return b;
  });
}

TEST_F(DiskCacheTest, FlippedMagicIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t n) {
    b[n] ^= 0x20;
    return b;
  });
}

TEST_F(DiskCacheTest, FlippedLengthIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t n) {
    b[n + 8] ^= 0x01;
    return b;
  });
}

TEST_F(DiskCacheTest, FlippedDigestIsMiss) {
  expect_corrupt_is_miss(root_, [](std::string b, size_t) {
    b.back() ^= 0x80;
    return b;
  });
}

TEST_F(DiskCacheTest, ParseEntryRejectsGarbage) {
  EXPECT_FALSE(DiskCache::parse_entry("", "k.so").has_value());
  EXPECT_FALSE(DiskCache::parse_entry(std::string(80, '\0'), "k.so").has_value());
  EXPECT_FALSE(DiskCache::parse_entry(std::string(1000, 'K'), "k.so").has_value());
}

TEST_F(DiskCacheTest, EntryOfAnotherKeyIsMiss) {
  // A valid entry copied over another key's file must not be returned for that key.
  DiskCache cache(root_);
  const std::string other_key = sha256_hex("another kernel");
  ASSERT_TRUE(cache.store(kKey, "so", "mine").ok());
  ASSERT_TRUE(cache.store(other_key, "so", "theirs").ok());
  ASSERT_EQ(rename(cache.entry_path(other_key, "so").c_str(), cache.entry_path(kKey, "so").c_str()),
            0);
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->has_value()) << "loaded " << **loaded;
  EXPECT_FALSE(exists(cache.entry_path(kKey, "so")));
}

TEST_F(DiskCacheTest, FifoEntryIsMissWithoutWaiting) {
  // Opening a FIFO for reading blocks until a writer comes; the reader must not wait.
  DiskCache cache(root_);
  ASSERT_EQ(mkfifo(cache.entry_path(kKey, "so").c_str(), 0644), 0);
  EXPECT_EXIT(
      {
        alarm(20);  // a hang ends the child with SIGALRM, failing the expectation
        Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
        _exit(loaded.ok() && !loaded->has_value() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DiskCacheTest, SymlinkEntryIsMissNotFollowed) {
  DiskCache cache(root_);
  const std::string path = cache.entry_path(kKey, "so");
  ASSERT_EQ(symlink("/dev/zero", path.c_str()), 0);
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->has_value());
  // Also a link to a valid entry of the same key is not followed.
  ASSERT_TRUE(cache.store(kKey, "so", "payload").ok());
  const std::string real = root_ + "/real";
  ASSERT_EQ(rename(path.c_str(), real.c_str()), 0);
  ASSERT_EQ(symlink(real.c_str(), path.c_str()), 0);
  loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_TRUE(exists(real));  // the link is removed, not its target
}

TEST_F(DiskCacheTest, DeviceEntryIsMiss) {
  DiskCache cache(root_ + "/dev-like");
  // A directory where an entry should be is not an entry either.
  ASSERT_TRUE(make_directories(cache.entry_path(kKey, "so")).ok());
  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->has_value());
}

TEST_F(DiskCacheTest, InvalidEntriesAreReportedOnce) {
  // The warning is once per process, so count it in a fresh process: the "threadsafe" style
  // re-executes this binary for this test alone, where the default one would fork a process that
  // has already warned if an earlier test met an invalid entry.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DiskCache cache(root_);
  EXPECT_EXIT(
      {
        // Death tests capture stderr themselves: send it to a file of our own meanwhile.
        std::string log_path = root_ + "/stderr.txt";
        int saved = dup(2);
        int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (saved < 0 || log_fd < 0 || dup2(log_fd, 2) < 0) _exit(3);
        for (int i = 0; i < 3; ++i) {
          std::string key = sha256_hex("entry " + std::to_string(i));
          if (!write_file_atomic(cache.entry_path(key, "so"), "garbage").ok()) _exit(2);
          Result<std::optional<std::string>> loaded = cache.load(key, "so");
          if (!loaded.ok() || loaded->has_value()) _exit(2);
        }
        dup2(saved, 2);
        std::string err = read_file(log_path).value();
        size_t count = 0;
        for (size_t at = err.find("is not valid"); at != std::string::npos;
             at = err.find("is not valid", at + 1)) {
          ++count;
        }
        std::fprintf(stderr, "%s", err.c_str());
        _exit(count == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "cache entry .* is not valid");
}

TEST_F(DiskCacheTest, UnwritableDirectoryIsAStatus) {
  std::string dir;
  if (geteuid() == 0) {
    // Root ignores permissions; a path under a regular file fails with ENOTDIR instead.
    std::string file = root_ + "/plain-file";
    ASSERT_TRUE(write_file_atomic(file, "not a directory").ok());
    dir = file + "/sub";
  } else {
    std::string locked = root_ + "/locked";
    ASSERT_EQ(mkdir(locked.c_str(), 0500), 0);
    dir = locked + "/sub";
  }
  DiskCache cache(dir);
  Result<std::string> stored = cache.store(kKey, "so", "payload");
  ASSERT_FALSE(stored.ok());
  EXPECT_NE(stored.status().message().find(dir), std::string::npos)
      << stored.status().to_string();
  // Looking up in such a directory is a miss or a status, never a crash.
  Result<std::optional<std::string>> found = cache.load(kKey, "so");
  if (found.ok()) {
    EXPECT_FALSE(found->has_value());
  }
}

TEST_F(DiskCacheTest, ExistingUnwritableDirectoryIsAStatus) {
  if (geteuid() == 0) GTEST_SKIP() << "root bypasses directory permissions";
  std::string dir = root_ + "/ro";
  ASSERT_EQ(mkdir(dir.c_str(), 0500), 0);
  DiskCache cache(dir);
  Result<std::string> stored = cache.store(kKey, "so", "payload");
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(stored.status().message().find(cache.entry_path(kKey, "so")), std::string::npos)
      << stored.status().to_string();
  chmod(dir.c_str(), 0700);
  EXPECT_TRUE(list_dir(dir).empty());
}

TEST_F(DiskCacheTest, UnreadableEntryIsAStatus) {
  if (geteuid() == 0) GTEST_SKIP() << "root bypasses file permissions";
  DiskCache cache(root_);
  Result<std::string> stored = cache.store(kKey, "so", "payload");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(chmod(stored->c_str(), 0), 0);
  Result<std::optional<std::string>> found = cache.load(kKey, "so");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(found.status().message().find(*stored), std::string::npos);
  EXPECT_TRUE(exists(*stored));  // an unreadable entry is not "corrupt": left alone
}

TEST_F(DiskCacheTest, ConcurrentStoresOfOneKey) {
  DiskCache cache(root_ + "/shared");
  constexpr int kThreads = 8;
  std::vector<std::string> payloads;
  for (int i = 0; i < kThreads; ++i) payloads.push_back(std::string(10000 + 977 * i, 'a' + i));
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) {
        Result<std::string> r = cache.store(kKey, "so", payloads[i]);
        if (!r.ok()) {
          results[i] = r.status();
          return;
        }
        // Readers racing with writers see a whole entry or nothing, never a corrupt one.
        Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
        if (!loaded.ok()) {
          results[i] = loaded.status();
          return;
        }
        if (loaded->has_value() &&
            std::find(payloads.begin(), payloads.end(), **loaded) == payloads.end()) {
          results[i] = internal_error("loaded a payload nobody stored");
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.to_string();

  Result<std::optional<std::string>> loaded = cache.load(kKey, "so");
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_NE(std::find(payloads.begin(), payloads.end(), **loaded), payloads.end());
  EXPECT_EQ(list_dir(cache.dir()), std::vector<std::string>{kKey + ".so"});
}

TEST_F(DiskCacheTest, DefaultDir) {
  const char* names[] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "TMPDIR"};
  std::optional<std::string> saved[4];
  for (int i = 0; i < 4; ++i) {
    if (const char* v = std::getenv(names[i])) saved[i] = v;
  }
  setenv("KILN_CACHE_DIR", "/k", 1);
  setenv("XDG_CACHE_HOME", "/x", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(DiskCache::default_dir(), "/k");
  setenv("KILN_CACHE_DIR", "", 1);  // empty counts as unset
  EXPECT_EQ(DiskCache::default_dir(), "/x/kiln");
  unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(DiskCache::default_dir(), "/x/kiln");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DiskCache::default_dir(), "/h/.cache/kiln");
  unsetenv("HOME");
  // The last resort is a per-user name in the temporary directory: used only if it passes the
  // cache's check (disk_cache_trust_test.cc), so one another user made first is not.
  setenv("TMPDIR", "/t", 1);
  EXPECT_EQ(DiskCache::default_dir(), "/t/kiln-cache-" + std::to_string(getuid()));
  unsetenv("TMPDIR");
  EXPECT_EQ(DiskCache::default_dir(), "/tmp/kiln-cache-" + std::to_string(getuid()));
  for (int i = 0; i < 4; ++i) {
    if (saved[i]) {
      setenv(names[i], saved[i]->c_str(), 1);
    } else {
      unsetenv(names[i]);
    }
  }
}

TEST_F(DiskCacheTest, ReadFileErrorsNameThePath) {
  std::string missing = root_ + "/missing.txt";
  Result<std::string> r = read_file(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(missing), std::string::npos);
  EXPECT_FALSE(read_file(root_).ok());  // a directory
}

TEST_F(DiskCacheTest, WriteFileAtomic) {
  std::string path = root_ + "/file.txt";
  ASSERT_TRUE(write_file_atomic(path, "one").ok());
  EXPECT_EQ(*read_file(path), "one");
  ASSERT_TRUE(write_file_atomic(path, std::string("t\0o", 3)).ok());
  EXPECT_EQ(*read_file(path), std::string("t\0o", 3));
  EXPECT_EQ(list_dir(root_), std::vector<std::string>{"file.txt"});
  Status s = write_file_atomic(root_ + "/no/such/dir/f", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(root_ + "/no/such/dir/f"), std::string::npos);
}

TEST_F(DiskCacheTest, MakeDirectories) {
  std::string deep = root_ + "/x/y/z/";
  ASSERT_TRUE(make_directories(deep).ok());
  EXPECT_TRUE(exists(root_ + "/x/y/z"));
  EXPECT_TRUE(make_directories(deep).ok());  // already there
  EXPECT_TRUE(make_directories(root_).ok());
  ASSERT_TRUE(write_file_atomic(root_ + "/f", "x").ok());
  Status s = make_directories(root_ + "/f");
  EXPECT_FALSE(s.ok());
  s = make_directories(root_ + "/f/g/h");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(root_ + "/f/g"), std::string::npos) << s.to_string();
  EXPECT_FALSE(make_directories("").ok());
}

}  // namespace
}  // namespace kiln
