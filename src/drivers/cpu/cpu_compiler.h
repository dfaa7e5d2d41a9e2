// The CPU driver's compiler: C source → shared object with the system C compiler, loaded with
// dlopen, cached by content in memory and on disk.
//
// The cache key covers the source (with the kernel ABI prepended), the compiler's identity (its
// resolved path, size and modification time, read with stat(2), as ccache does, so that a warm
// lookup starts no process) and the flags. The identity last seen for a configured compiler name
// is remembered in the cache, so a machine whose compiler is gone still loads what was built.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/disk_cache.h"
#include "kiln/base/status.h"
#include "kiln/hal/executable.h"

namespace kiln::cpu {

// A dlopen()ed shared object; closed when the last executable using it is gone.
class LoadedLibrary {
 public:
  // `fd`, if not -1, is the file the library was loaded from; closed after dlclose().
  LoadedLibrary(void* handle, std::string path, int fd = -1)
      : handle_(handle), path_(std::move(path)), fd_(fd) {}
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  // NOT_FOUND naming the symbol and the object.
  Result<void*> symbol(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
  int fd_;
};

struct CompilerStats {
  uint64_t compiles = 0;     // C compiler runs
  uint64_t disk_hits = 0;
  uint64_t memory_hits = 0;
};

class CpuCompiler {
 public:
  // `compiler`: a program name or path; `flags`: extra flags, split on spaces; `jobs`: how many
  // compiles of one source may run side by side.
  CpuCompiler(std::string compiler, std::string flags, DiskCache cache, int64_t timeout_ms, size_t jobs = 1);

  // Builds (or finds) the shared object for `source`. `label` names it in diagnostics. A large
  // source with translation units (kiln/kernel_abi.h, KILN_UNIT_BOUNDARY) is compiled in up to
  // `jobs` parts at once, which are then linked; the cache holds the linked object.
  // `steps`, when given, receives what the build took (kiln/hal/executable.h, BuildStep).
  Result<std::shared_ptr<LoadedLibrary>> build(const std::string& source, const std::string& label,
                                               std::vector<hal::BuildStep>* steps = nullptr);
  CompilerStats stats() const;
  // The flags every kernel is built with, before the user's (KILN_CFLAGS).
  static std::vector<std::string> base_flags();

 private:
  Result<std::string> identity();
  // `head` (the kernel ABI) goes before every part of `source`.
  Result<std::string> compile_to_file(const std::string& head, const std::string& source, const std::string& key,
                                      const std::string& label, std::string* work_dir,
                                      std::vector<hal::BuildStep>* steps);

  std::string compiler_;
  std::string flags_;
  DiskCache cache_;
  int64_t timeout_ms_;
  size_t jobs_;
  mutable std::mutex mutex_;
  std::optional<std::string> identity_;  // guarded by mutex_
  std::string resolved_;                 // guarded by mutex_; empty when not found
  std::unordered_map<std::string, std::weak_ptr<LoadedLibrary>> loaded_;  // guarded by mutex_
  CompilerStats stats_;                                                   // guarded by mutex_
};

}  // namespace kiln::cpu
