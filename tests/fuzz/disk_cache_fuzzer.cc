// The disk-cache entry reader: any bytes in an entry file give a miss (the entry removed) or
// exactly a payload that was stored; any payload stored loads back unchanged.
//
// The target goes through the cache's public API only (a file in a cache directory, then load),
// so that it follows changes to the entry format without edits.
#include <dirent.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "base/disk_cache.h"
#include "fuzz_check.h"

using kiln::fuzz::check;

namespace {

constexpr std::string_view kKey = "00f1a2b3c4d5e6f7";
constexpr std::string_view kSuffix = "bin";

std::string* cache_dir = nullptr;

void remove_cache_dir() {
  if (!cache_dir) return;
  if (DIR* d = ::opendir(cache_dir->c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((*cache_dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(cache_dir->c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-cache-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    std::perror("disk_cache_fuzzer: mkdtemp");
    std::abort();
  }
  cache_dir = new std::string(pattern);
  std::atexit(remove_cache_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const kiln::DiskCache cache(*cache_dir);
  const std::string path = cache.entry_path(kKey, kSuffix);

  // The input as an entry file someone else (or a crash, or an attacker) left behind.
  kiln::Status written = kiln::write_file_atomic(path, bytes);
  check(written.ok(), "writing the entry file", written.to_string());
  kiln::Result<std::optional<std::string>> loaded = cache.load(kKey, kSuffix);
  check(loaded.ok(), "loading an entry failed with an error", loaded.ok() ? "" : loaded.status().to_string());
  // The pure entry reader agrees with what the cache loads.
  const std::string name = std::string(kKey) + "." + std::string(kSuffix);
  const std::optional<std::string_view> parsed = kiln::DiskCache::parse_entry(bytes, name);
  check(parsed.has_value() == loaded->has_value() && (!parsed || *parsed == **loaded),
        "DiskCache::parse_entry and DiskCache::load disagree");
  if (loaded->has_value()) {
    check((*loaded)->size() <= bytes.size() && bytes.substr(0, (*loaded)->size()) == **loaded,
          "a loaded payload is not the entry's leading bytes");
  } else {
    check(::access(path.c_str(), F_OK) != 0, "a corrupt entry was not removed");
  }

  // The input as a payload: what is stored loads back unchanged.
  kiln::Result<std::string> stored = cache.store(kKey, kSuffix, bytes);
  check(stored.ok(), "storing a payload failed", stored.ok() ? "" : stored.status().to_string());
  kiln::Result<std::optional<std::string>> back = cache.load(kKey, kSuffix);
  check(back.ok() && back->has_value() && **back == bytes, "a stored payload does not load back");
  ::unlink(path.c_str());
  return 0;
}
