// A content-addressed cache of blobs on disk, safe to share between processes.
//
// Each entry is one file, `<dir>/<key>.<suffix>`, holding the payload followed by a trailer
// (magic, payload length, SHA-256 of the payload). Entries are written to a temporary file in
// the same directory and renamed into place, so a reader sees either nothing or a whole entry.
// A truncated or corrupt entry is reported as a miss (and removed), never loaded.
// The payload comes first so that an entry which is a shared object can be dlopen()ed in place.
#pragma once

#include <optional>
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

  // The path of a valid entry, nullopt on a miss. A corrupt entry is deleted and is a miss.
  Result<std::optional<std::string>> lookup(std::string_view key, std::string_view suffix) const;
  // Reads a valid entry's payload, nullopt on a miss.
  Result<std::optional<std::string>> load(std::string_view key, std::string_view suffix) const;
  // Atomically writes the entry; returns its path.
  Result<std::string> store(std::string_view key, std::string_view suffix,
                            std::string_view payload) const;

  // Checks a whole entry file's bytes; returns the payload length if the trailer is valid.
  static std::optional<size_t> validate(std::string_view file_bytes);

 private:
  std::string dir_;
};

// Reads a whole file. NOT_FOUND etc. with the path in the message.
Result<std::string> read_file(const std::string& path);
// Writes a file via a temporary sibling and rename(2).
Status write_file_atomic(const std::string& path, std::string_view bytes);
// mkdir -p.
Status make_directories(const std::string& path);

}  // namespace kiln
