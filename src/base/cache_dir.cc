#include "base/cache_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/base/env.h"
#include "kiln/base/log.h"

namespace kiln {

namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string owner_and_mode(const struct stat& st) {
  return "owner uid " + std::to_string(st.st_uid) + ", mode " + octal_mode(st.st_mode);
}

// Why a directory or file with status `st` is not trusted under `sharing`; empty when it is.
std::string distrust(const struct stat& st, CacheSharing sharing) {
  const uid_t me = ::geteuid();
  if (sharing == CacheSharing::kPrivate && st.st_uid != me && st.st_uid != 0) {
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) + ")";
  }
  if (st.st_mode & S_IWOTH) return "writable by others";
  if (sharing == CacheSharing::kPrivate && (st.st_mode & S_IWGRP)) return "writable by its group";
  return "";
}

// A handle on the directory `name` (relative to `at`) that follows no link in its last component;
// O_PATH needs no permission on the directory itself, only fstat and the *at calls use it.
int open_directory_at(int at, const std::string& name) {
  int fd;
  do {
    fd = ::openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// The private directories made in place of refused ones, removed at exit by the process that
// made them (not by a forked child, which inherits the list).
struct PrivateDir {
  std::string path;  // empty when none could be made
  pid_t maker = 0;
};
struct PrivateDirs {
  std::mutex mutex;
  std::map<std::string, PrivateDir> by_refused;  // guarded by mutex
  bool cleanup_registered = false;               // guarded by mutex
};

PrivateDirs& private_dirs() {
  static PrivateDirs* dirs = new PrivateDirs();  // never destroyed: the exit handler uses it
  return *dirs;
}

// Removes a directory of files (entries and the temporary files of unfinished writes).
void remove_flat_directory(const std::string& path) {
  if (DIR* dir = ::opendir(path.c_str())) {
    std::vector<std::string> names;
    while (dirent* entry = ::readdir(dir)) {
      if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) names.push_back(entry->d_name);
    }
    for (const std::string& name : names) ::unlinkat(::dirfd(dir), name.c_str(), 0);
    ::closedir(dir);
  }
  ::rmdir(path.c_str());
}

void remove_private_dirs() {
  PrivateDirs& dirs = private_dirs();
  // A thread still inside private_dir_for at exit holds the lock: leave the files to the system.
  std::unique_lock<std::mutex> lock(dirs.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (const auto& [refused, dir] : dirs.by_refused) {
    if (!dir.path.empty() && dir.maker == ::getpid()) remove_flat_directory(dir.path);
  }
}

// The private directory used in place of `refused`, made on first use; the first call for a
// directory says why it is refused, once per process.
Result<std::string> private_dir_for(const std::string& refused, CacheSharing sharing, const std::string& why,
                                    const struct stat& st) {
  PrivateDirs& dirs = private_dirs();
  std::lock_guard<std::mutex> lock(dirs.mutex);
  auto it = dirs.by_refused.find(refused);
  if (it == dirs.by_refused.end()) {
    const std::string parent = temp_directory();
    std::string made = parent + "/kiln-private-XXXXXX";
    std::string instead;
    if (::mkdtemp(made.data())) {
      if (!dirs.cleanup_registered) dirs.cleanup_registered = std::atexit(remove_private_dirs) == 0;
      instead = "compiled code is cached in the private directory " + made + " instead, until the process exits";
    } else {
      instead = "no private directory could be made in " + parent + " (" + std::strerror(errno) +
                "), so compiled code is not cached on disk";
      made.clear();
    }
    const char* rule = sharing == CacheSharing::kShared
                           ? "a shared cache (KILN_CACHE_SHARED=1) is trusted only when others may not write it"
                           : "a cache is trusted only when it belongs to this user and no one else may write it "
                             "(KILN_CACHE_SHARED=1 also trusts one its group may write)";
    KILN_LOG(kWarn, "the cache directory " + refused + " (" + owner_and_mode(st) + ") is not used: it is " + why + "; " +
                        rule + "; " + instead);
    it = dirs.by_refused.emplace(refused, PrivateDir{made, ::getpid()}).first;
  }
  if (it->second.path.empty()) {
    return failed_precondition_error("the cache directory " + refused + " is not used (it is " + why +
                                     ") and no private directory could be made in its place");
  }
  return it->second.path;
}

}  // namespace

std::string temp_directory() { return env_string("TMPDIR").value_or("/tmp"); }

Result<std::optional<CacheDir>> CacheDir::open_existing(const std::string& path, CacheSharing sharing) {
  return open(path, sharing, false);
}

Result<CacheDir> CacheDir::open_or_create(const std::string& path, CacheSharing sharing) {
  KILN_ASSIGN_OR_RETURN(std::optional<CacheDir> dir, open(path, sharing, true));
  return std::move(*dir);  // open() with `create` returns a directory or an error
}

Result<std::optional<CacheDir>> CacheDir::open(const std::string& path, CacheSharing sharing, bool create) {
  if (path.empty()) return invalid_argument_error("the cache directory is empty");
  struct stat st {};
  std::string why;
  for (bool made = false;;) {
    const int fd = open_directory_at(AT_FDCWD, path);
    if (fd >= 0) {
      if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return errno_error(err, "checking cache directory " + path);
      }
      why = distrust(st, sharing);
      if (why.empty()) return std::optional<CacheDir>(CacheDir(fd, path, sharing, false));
      ::close(fd);
      break;
    }
    const int err = errno;
    // O_DIRECTORY|O_NOFOLLOW fails on a link with ENOTDIR (ELOOP on some kernels).
    if ((err == ENOTDIR || err == ELOOP) && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      why = "a symbolic link (name the directory itself)";
      break;
    }
    if (err != ENOENT && err != ENOTDIR) return errno_error(err, "opening cache directory " + path);
    if (!create) return std::optional<CacheDir>();
    if (made) return errno_error(err, "opening cache directory " + path);
    KILN_RETURN_IF_ERROR(make_directories(path, 0700));
    made = true;
  }
  KILN_ASSIGN_OR_RETURN(std::string private_path, private_dir_for(path, sharing, why, st));
  const int fd = open_directory_at(AT_FDCWD, private_path);
  if (fd < 0) return errno_error(errno, "opening the private cache directory " + private_path);
  CacheDir dir(fd, private_path, CacheSharing::kPrivate, true);
  // Checked like any other: someone who could replace it could plant entries in it.
  if (::fstat(fd, &st) != 0) return errno_error(errno, "checking cache directory " + private_path);
  if (std::string wrong = distrust(st, CacheSharing::kPrivate); !wrong.empty()) {
    return failed_precondition_error("the private cache directory " + private_path + " is " + wrong);
  }
  return std::optional<CacheDir>(std::move(dir));
}

CacheDir::CacheDir(CacheDir&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), sharing_(other.sharing_), substituted_(other.substituted_) {
  other.fd_ = -1;
}

CacheDir& CacheDir::operator=(CacheDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    sharing_ = other.sharing_;
    substituted_ = other.substituted_;
    other.fd_ = -1;
  }
  return *this;
}

CacheDir::~CacheDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::string CacheDir::file_path(std::string_view name) const {
  std::string path = path_;
  if (path.empty() || path.back() != '/') path += '/';
  path += name;
  return path;
}

std::string CacheDir::distrust_file(const struct stat& st) const {
  std::string why = distrust(st, sharing_);
  return why.empty() ? why : why + " (" + owner_and_mode(st) + ")";
}

Result<CacheDir> CacheDir::subdirectory(const std::string& name) const {
  const std::string path = file_path(name);
  if (::mkdirat(fd_, name.c_str(), 0700) != 0 && errno != EEXIST) return errno_error(errno, "creating directory " + path);
  const int fd = open_directory_at(fd_, name);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return failed_precondition_error("the cache directory " + path + " is not used: it is not a directory (or a link)");
    }
    return errno_error(errno, "opening cache directory " + path);
  }
  CacheDir dir(fd, path, sharing_, substituted_);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(errno, "checking cache directory " + path);
  if (std::string why = distrust(st, sharing_); !why.empty()) {
    return failed_precondition_error("the cache directory " + path + " (" + owner_and_mode(st) + ") is not used: it is " + why);
  }
  return dir;
}

}  // namespace kiln
