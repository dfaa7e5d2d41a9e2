// Which cache directories kiln trusts, and the private directory it uses in place of one it does
// not.
//
// Whoever can write into a cache directory can plant an entry with a valid trailer (its key is
// computed from what anyone can know: the source, the compiler, the flags) and so run code in
// every process that later loads it. A cache directory is therefore used only when the directory
// itself, opened without following a link (O_DIRECTORY|O_NOFOLLOW) and examined with fstat(2), is
// owned by the effective user (or root) and writable by neither its group nor others. A shared
// cache (CacheSharing::kShared, KILN_CACHE_SHARED=1: every user who can write there can run code
// in the processes that use it) may have any owner and be written by its group, never by others.
// Files inside are opened relative to the checked handle (openat), so that a path swapped after
// the check changes nothing, and pass the same test themselves.
//
// A directory that fails the check is neither read nor written: the process uses a private
// directory instead (mkdtemp under $TMPDIR, else /tmp; one per refused directory, made on first
// use, removed when the process exits; what a crash leaves is the system's temporary files) and
// says why once per directory, at warn level, naming the directory, its owner and its mode.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "kiln/base/status.h"

namespace kiln {

enum class CacheSharing {
  kPrivate,  // owned by this user (or root), written by no one else
  kShared,   // any owner, written by its group too, never by others
};

// $TMPDIR, else /tmp: where private build and cache directories are made.
std::string temp_directory();

// A cache directory opened and found trusted (or the private directory used in its place).
// Movable; closes its handle when destroyed.
class CacheDir {
 public:
  // The directory to read `path`'s entries from: nullopt when there is none (nothing exists at
  // `path`, or something that is not a directory or a link to one); the private directory when
  // `path` fails the check. An error when it cannot be opened (PERMISSION_DENIED, ...).
  static Result<std::optional<CacheDir>> open_existing(const std::string& path, CacheSharing sharing);
  // The directory to write `path`'s entries into: created when missing (with its missing
  // parents, each 0700); the private directory when `path` fails the check.
  static Result<CacheDir> open_or_create(const std::string& path, CacheSharing sharing);

  CacheDir(CacheDir&& other) noexcept;
  CacheDir& operator=(CacheDir&& other) noexcept;
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;
  ~CacheDir();

  int fd() const { return fd_; }
  // What was opened: the path asked for, or the private directory used in its place.
  const std::string& path() const { return path_; }
  bool substituted() const { return substituted_; }
  // `path()/name`, for messages.
  std::string file_path(std::string_view name) const;

  // Why a file found inside (its fstat) is not trusted, by the directory's own rule; empty when it
  // is: "owned by uid 54321", "writable by others (mode 0666)".
  std::string distrust_file(const struct stat& st) const;
  // The mode new files are created with: 0600, or 0644 in a shared cache.
  mode_t file_mode() const { return sharing_ == CacheSharing::kShared ? 0644 : 0600; }

  // The subdirectory `name`, created 0700 when missing and checked like the cache itself (a link
  // is not followed). Never replaced by a private directory: FAILED_PRECONDITION when it fails.
  Result<CacheDir> subdirectory(const std::string& name) const;

 private:
  // open_existing (`create` false) and open_or_create (true).
  static Result<std::optional<CacheDir>> open(const std::string& path, CacheSharing sharing, bool create);
  CacheDir(int fd, std::string path, CacheSharing sharing, bool substituted)
      : fd_(fd), path_(std::move(path)), sharing_(sharing), substituted_(substituted) {}

  int fd_ = -1;
  std::string path_;
  CacheSharing sharing_ = CacheSharing::kPrivate;
  bool substituted_ = false;
};

}  // namespace kiln
