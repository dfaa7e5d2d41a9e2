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
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/base/status.h"

namespace kiln {

class DiskCache {
 public:
  // `dir` is created (with parents) on first store. An empty dir disables the cache.
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}

  // The default directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln,
  // else /tmp/kiln-cache-<uid>.
  static std::string default_dir();

  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }

  // Path where `key` is (or would be) stored.
  std::string entry_path(std::string_view key, std::string_view suffix) const;

  // Reads a valid entry's verified payload, nullopt on a miss. An error only when the file
  // exists but cannot be read (e.g. PERMISSION_DENIED).
  Result<std::optional<std::string>> load(std::string_view key, std::string_view suffix) const;
  // Atomically writes the entry; returns its path.
  Result<std::string> store(std::string_view key, std::string_view suffix,
                            std::string_view payload) const;

  // Parses the bytes of a whole entry file stored as `name` ("<key>.<suffix>"): the payload if
  // the trailer is well formed and both digests match, else nullopt. Total on arbitrary input.
  static std::optional<std::string_view> parse_entry(std::string_view file_bytes,
                                                     std::string_view name);
  // The bytes of the entry file for `payload` stored as `name`.
  static std::string make_entry(std::string_view name, std::string_view payload);

 private:
  std::string dir_;
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
// mkdir -p.
Status make_directories(const std::string& path);

}  // namespace kiln
