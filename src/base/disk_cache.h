// A content-addressed cache of blobs on disk, safe to share between processes.
//
// Each entry is one file, `<dir>/<key>.<suffix>`, holding the payload followed by a trailer
// (magic, payload length, SHA-256 of "<key>.<suffix>", SHA-256 of the payload). Entries are
// written to a temporary file in the same directory and renamed into place, so a reader sees
// either nothing or a whole entry. Nothing found on disk is trusted: an entry that is not a
// regular file (a link, FIFO, device), is too large, truncated, belongs to another key or fails
// its checksum is a miss (warned about once per process, and removed), never returned. Callers
// use only the verified payload that load() returns, never the file itself (a file can change
// after it was checked).
//
// A checksum cannot tell an entry someone else planted from one of ours, so the cache is used only
// where no one else can write: see cache_dir.h. Directories the cache creates are 0700, entries
// are written 0600 (0644 in a shared cache), and a directory that fails the check is replaced, for
// the process, by a private one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/cache_dir.h"
#include "kiln/base/status.h"

namespace kiln {

class DiskCache {
 public:
  // `dir` is created (with parents, 0700) on first store. An empty dir disables the cache.
  explicit DiskCache(std::string dir, CacheSharing sharing = CacheSharing::kPrivate)
      : dir_(std::move(dir)), sharing_(sharing) {}
  // A device's cache: `dir` when given, else default_dir(); shared when KILN_CACHE_SHARED=1.
  // INVALID_ARGUMENT naming the variable when KILN_CACHE_SHARED is malformed.
  static Result<DiskCache> configured(const std::optional<std::string>& dir);

  // The default directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln,
  // else $TMPDIR/kiln-cache-<uid> ($TMPDIR defaulting to /tmp; used only if it passes the check
  // like any other, so one another user made first is refused).
  static std::string default_dir();

  const std::string& dir() const { return dir_; }
  CacheSharing sharing() const { return sharing_; }
  bool enabled() const { return !dir_.empty(); }

  // Path where `key` is (or would be) stored.
  std::string entry_path(std::string_view key, std::string_view suffix) const;

  // Reads a valid entry's verified payload, nullopt on a miss (also for a directory that is
  // refused, until this process stores into its private one). An error only when the directory
  // or the file exists but cannot be read (e.g. PERMISSION_DENIED).
  Result<std::optional<std::string>> load(std::string_view key, std::string_view suffix) const;
  // Atomically writes the entry; returns its path (in the private directory when the cache's
  // own is refused).
  Result<std::string> store(std::string_view key, std::string_view suffix,
                            std::string_view payload) const;
  // Atomically writes `bytes` as `<dir>/<subdir>/<name>` (subdir created 0700), for a file the
  // user is meant to open (a source that failed to build); returns its path. Only in the cache's
  // own directory: FAILED_PRECONDITION when that is refused, since the private directory used in
  // its place is removed at exit.
  Result<std::string> keep_file(std::string_view subdir, std::string_view name, std::string_view bytes) const;

  // Parses the bytes of a whole entry file stored as `name` ("<key>.<suffix>"): the payload if
  // the trailer is well formed and both digests match, else nullopt. Total on arbitrary input.
  static std::optional<std::string_view> parse_entry(std::string_view file_bytes,
                                                     std::string_view name);
  // The bytes of the entry file for `payload` stored as `name`.
  static std::string make_entry(std::string_view name, std::string_view payload);

 private:
  std::string dir_;
  CacheSharing sharing_;
};

// Reads a whole file. NOT_FOUND etc. with the path in the message.
Result<std::string> read_file(const std::string& path);
// Writes the concatenation of `parts` to a new temporary sibling of `path` (a name no other
// thread or process picks) and returns its name: renamed over `path` it replaces the file whole.
Result<std::string> write_parts_to_temp(const std::string& path, std::span<const std::string_view> parts);
// Writes a file via a temporary sibling and rename(2).
Status write_file_atomic(const std::string& path, std::string_view bytes);
// The same for the concatenation of `parts`, written one after another (never joined in memory).
Status write_parts_atomic(const std::string& path, std::span<const std::string_view> parts);
// mkdir -p; the directories it creates get `mode` (less the umask).
Status make_directories(const std::string& path, mode_t mode = 0755);

}  // namespace kiln
