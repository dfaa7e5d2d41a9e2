// The regular files under a directory and its subdirectories, for tests that watch a cache grow.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::test {

// How many regular files are under `dir` (0 where it does not exist or cannot be read).
inline size_t files_under(const std::string& dir) {
  std::error_code ec;
  size_t count = 0;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) ++count;
  }
  return count;
}

}  // namespace kiln::test
