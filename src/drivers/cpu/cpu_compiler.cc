#include "drivers/cpu/cpu_compiler.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <cstdio>
#include <sstream>
#include <vector>

#include "base/process.h"
#include "base/sha256.h"
#include "drivers/cpu/c_units.h"
#include "drivers/cpu/kernel_abi_text.h"
#include "kiln/base/log.h"
#include "kiln/base/time.h"

namespace kiln::cpu {

namespace {

// Flags every build uses; user flags come after, so they can override. Kernels are built for
// this processor (-march=native), so the processor is part of every cache key.
// -fno-tree-loop-if-convert: GCC 12's vectorizer turns loads under a condition (select, range
// guards) into masked loads and, in an SLP group, gives every one the first vector's mask: wrong
// numbers, not a crash (tests/drivers/gcc_repro/slp_masked_load_wrong_mask.c).
// -fno-code-hoisting: a kernel over sizes has a second copy of its statements for small sizes
// (codegen's plain_sized_copy); GCC lifted what both copies compute above the test that picks
// one, and the values held through the loops cost a 1024^3 product 13% of its time.
const char* const kBaseFlags[] = {"-std=gnu11", "-O3", "-march=native", "-fPIC", "-shared",
                                  "-fno-strict-aliasing", "-fno-tree-loop-if-convert", "-fno-code-hoisting"};

// Units of generated C (c_units.h) are compiled side by side only in parts of at least this
// much: each part parses the common text (includes, helpers) again and starts a compiler.
constexpr size_t kMinUnitBytes = 16 * 1024;

// The processor's model and feature flags, as /proc/cpuinfo reports them for the first CPU.
const std::string& host_processor() {
  static const std::string signature = [] {
    std::string out;
    Result<std::string> info = read_file("/proc/cpuinfo");
    if (!info.ok()) return out;
    size_t pos = 0;
    while (pos < info->size()) {
      size_t end = info->find('\n', pos);
      if (end == std::string::npos) end = info->size();
      std::string_view line(info->data() + pos, end - pos);
      if (line.empty()) break;  // end of the first processor's block
      if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) out += std::string(line) + "\n";
      pos = end + 1;
    }
    return out;
  }();
  return signature;
}

std::vector<std::string> split_flags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  for (std::string flag; in >> flag;) out.push_back(flag);
  return out;
}

// Removes a private build directory (make_work_dir's) and what the build wrote there.
Status remove_tree(const std::string& dir) {
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  if (error) return errno_error(error.value(), "removing " + dir);
  return Status();
}

// A private build directory (mkdtemp: 0700, a name no one else holds) under $TMPDIR, never in the
// cache: the object is read back into memory and stored through DiskCache, so the build needs
// nothing from the cache's file system, and a cache directory that is refused or cannot be written
// never fails a build.
Result<std::string> make_work_dir() {
  std::string parent = temp_directory();
  std::string pattern = parent + "/kiln-build-XXXXXX";
  if (!::mkdtemp(pattern.data())) return errno_error(errno, "creating a build directory in " + parent);
  return pattern;
}

int write_fully(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// A dlopen() handle and the memory file it was loaded from (-1 if none).
struct OpenedObject {
  void* handle = nullptr;
  int fd = -1;
};

// dlopen()s exactly `object` (bytes already verified or just built): they are copied into an
// anonymous memory file that nobody else can write, and loaded through /proc/self/fd. Loading a
// file of the cache in place would trust whatever is there when dlopen reads it. The descriptor
// stays open while the library is loaded: dlopen() knows a loaded library by its path, so a
// later object loaded through the same /proc/self/fd/N would get the earlier one's handle. Without
// memfd or /proc, a private temporary file (in a fresh mkdtemp directory) holds the copy.
Result<OpenedObject> dlopen_object(std::string_view object, const std::string& label) {
  std::string error;
  int fd = static_cast<int>(::syscall(SYS_memfd_create, "kiln-kernel", MFD_CLOEXEC));
  if (fd >= 0) {
    int err = write_fully(fd, object);
    if (err == 0) {
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) return OpenedObject{handle, fd};
      error = ::dlerror();
      bool proc_mounted = ::access(path.c_str(), F_OK) == 0;
      ::close(fd);
      if (proc_mounted) {
        return internal_error("loading the compiled object of '" + label + "' failed: " + error);
      }
    } else {
      ::close(fd);
    }
  }
  std::string dir = temp_directory() + "/kiln-load-XXXXXX";
  if (!::mkdtemp(dir.data())) return errno_error(errno, "creating a directory to load '" + label + "'");
  std::string path = dir + "/kernel.so";
  Status written = write_file_atomic(path, object);
  void* handle = written.ok() ? ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (written.ok() && !handle) error = ::dlerror();
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
  if (!written.ok()) return written.annotate("loading the compiled object of '" + label + "'");
  if (!handle) return internal_error("loading the compiled object of '" + label + "' failed: " + error);
  return OpenedObject{handle, -1};
}

}  // namespace

std::vector<std::string> CpuCompiler::base_flags() {
  return std::vector<std::string>(std::begin(kBaseFlags), std::end(kBaseFlags));
}

LoadedLibrary::~LoadedLibrary() {
  if (handle_) ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

Result<void*> LoadedLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* sym = ::dlsym(handle_, name.c_str());
  if (!sym) return not_found_error("export '" + name + "' is not defined in " + path_);
  return sym;
}

CpuCompiler::CpuCompiler(std::string compiler, std::string flags, DiskCache cache,
                         int64_t timeout_ms, size_t jobs)
    : compiler_(std::move(compiler)),
      flags_(std::move(flags)),
      cache_(std::move(cache)),
      timeout_ms_(timeout_ms),
      jobs_(jobs) {}

CompilerStats CpuCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

Result<std::string> CpuCompiler::identity() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (identity_) return *identity_;
  const std::string record_key = sha256_hex("compiler-identity\n" + compiler_);
  Result<std::string> found = find_program(compiler_);
  struct stat st;
  char real[PATH_MAX];
  if (found.ok() && ::stat(found->c_str(), &st) == 0 && ::realpath(found->c_str(), real)) {
    resolved_ = *found;
    identity_ = std::string(real) + " size=" + std::to_string(st.st_size) +
                " mtime=" + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec);
    if (cache_.enabled()) {
      Result<std::optional<std::string>> recorded = cache_.load(record_key, "cc");
      if (!recorded.ok() || !recorded->has_value() || **recorded != *identity_) {
        Result<std::string> stored = cache_.store(record_key, "cc", *identity_);
        if (!stored.ok()) KILN_LOG(kWarn, "cannot record the C compiler: " + stored.status().to_string());
      }
    }
    return *identity_;
  }
  // No compiler: builds made by the one last seen under this name are still good.
  if (cache_.enabled()) {
    Result<std::optional<std::string>> recorded = cache_.load(record_key, "cc");
    if (recorded.ok() && recorded->has_value()) {
      identity_ = **recorded;
      return *identity_;
    }
  }
  return unavailable_error("C compiler '" + compiler_ +
                           "' was not found (set KILN_CC or DeviceOptions::c_compiler)");
}

Result<std::shared_ptr<LoadedLibrary>> CpuCompiler::build(const std::string& source, const std::string& label,
                                                          std::vector<hal::BuildStep>* steps) {
  std::vector<hal::BuildStep> ignored;
  if (!steps) steps = &ignored;
  const int64_t start = now_ns();
  KILN_ASSIGN_OR_RETURN(std::string id, identity());
  std::string line_name = label;
  for (char& c : line_name) {
    if (c == '"' || c == '\\' || c == '\n' || c == '\r') c = '_';
  }
  const std::string head = std::string(kKernelAbiText) + "\n#line 1 \"" + line_name + "\"\n";
  // The key is what is compiled, not where it came from: the #line (the program's path as given)
  // only names the file in the compiler's messages, so a copied or renamed program, or the same
  // text from Python and the command line, finds the same entry.
  Sha256 hasher;
  hasher.update_field("kiln-cpu-executable-v2");
  hasher.update_field(kKernelAbiText);
  hasher.update_field(source);
  hasher.update_field(id);
  for (const char* flag : kBaseFlags) hasher.update_field(flag);
  hasher.update_field(flags_);
  hasher.update_field(host_processor());
  const std::string key = hasher.hex_digest();

  std::unique_lock<std::mutex> lock(mutex_);
  if (auto it = loaded_.find(key); it != loaded_.end()) {
    if (std::shared_ptr<LoadedLibrary> library = it->second.lock()) {
      ++stats_.memory_hits;
      steps->push_back({"found in memory (built before by this process)", seconds_since(start)});
      return library;
    }
  }
  lock.unlock();

  // Disk cache: only the verified payload is loaded (DiskCache::load checks the entry's key and
  // checksum); an invalid entry reads as a miss and is rebuilt and replaced below.
  const std::string load_path = cache_.enabled() ? cache_.entry_path(key, "so") : label;
  bool from_disk = false;
  OpenedObject opened;
  if (cache_.enabled()) {
    Result<std::optional<std::string>> hit = cache_.load(key, "so");
    if (hit.ok() && hit->has_value()) {
      Result<OpenedObject> loaded = dlopen_object(**hit, label);
      if (loaded.ok()) {
        opened = *loaded;
        from_disk = true;
      } else {
        KILN_LOG(kWarn, "cached kernel object does not load, rebuilding: " + loaded.status().to_string());
      }
    } else if (!hit.ok()) {
      KILN_LOG(kWarn, "kernel cache lookup failed: " + hit.status().to_string());
    }
  }
  if (!from_disk) {
    std::string work_dir;
    KILN_ASSIGN_OR_RETURN(std::string object_path, compile_to_file(head, source, key, label, &work_dir, steps));
    Result<std::string> object = read_file(object_path);
    remove_tree(work_dir).ignore();
    if (!object.ok()) return object.status().annotate("reading the compiled object of '" + label + "'");
    if (cache_.enabled()) {
      Result<std::string> stored = cache_.store(key, "so", *object);
      static std::atomic<bool> warned{false};  // an unwritable cache is said once, not per kernel
      if (!stored.ok() && !warned.exchange(true)) {
        KILN_LOG(kWarn, "cannot store kernel objects in the cache (they are built privately): " +
                            stored.status().to_string());
      }
    }
    KILN_ASSIGN_OR_RETURN(opened, dlopen_object(*object, label));
  }
  if (from_disk) steps->push_back({"loaded from the disk cache", seconds_since(start)});
  auto library = std::make_shared<LoadedLibrary>(opened.handle, load_path, opened.fd);
  lock.lock();
  if (from_disk) ++stats_.disk_hits; else ++stats_.compiles;
  loaded_[key] = library;
  return library;
}

Result<std::string> CpuCompiler::compile_to_file(const std::string& head, const std::string& source,
                                                 const std::string& key, const std::string& label,
                                                 std::string* work_dir, std::vector<hal::BuildStep>* steps) {
  std::string compiler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    compiler = resolved_;
  }
  if (compiler.empty()) {
    return unavailable_error("C compiler '" + compiler_ + "' was not found and '" + label +
                             "' is not in the kernel cache (set KILN_CC or DeviceOptions::c_compiler)");
  }
  KILN_ASSIGN_OR_RETURN(*work_dir, make_work_dir());
  const std::vector<std::string> sources = group_units(source, jobs_, kMinUnitBytes);
  const bool split = sources.size() > 1;
  std::vector<std::string> flags = {compiler};
  for (const char* flag : kBaseFlags) flags.push_back(flag);
  for (std::string& flag : split_flags(flags_)) flags.push_back(std::move(flag));
  const std::string object_path = *work_dir + "/kernel.so";

  // One compile per source, side by side; a single source is built into the shared object at
  // once, several into objects linked below.
  struct Compile {
    std::string step;    // what the build step is called (--timings)
    std::string action;  // what failed, for the message: "compiling part 2 of 'LABEL'"
    std::string text;    // the source kept when it fails
    std::string source_path, output_path;
    Result<ProcessResult> run = internal_error("not run");
    double seconds = 0;
  };
  const size_t head_lines = static_cast<size_t>(std::count(head.begin(), head.end(), '\n'));
  std::vector<Compile> compiles(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    Compile& c = compiles[i];
    const std::string stem = *work_dir + "/kernel" + (split ? "-" + std::to_string(i) : "");
    const std::string lines =
        std::to_string(head_lines + static_cast<size_t>(std::count(sources[i].begin(), sources[i].end(), '\n')));
    const std::string part = std::to_string(i + 1) + " of " + std::to_string(sources.size());
    c.step = split ? compiler + " -c, part " + part + " (" + lines + " lines, side by side)"
                   : compiler + " (" + lines + " lines)";
    c.action = split ? "compiling part " + std::to_string(i + 1) + " of '" + label + "'" : "compiling '" + label + "'";
    c.text = head + sources[i];
    c.source_path = stem + ".c";
    c.output_path = split ? stem + ".o" : object_path;
    Status written = write_file_atomic(c.source_path, c.text);
    if (!written.ok()) {
      remove_tree(*work_dir).ignore();
      return written;
    }
  }
  auto run = [&](Compile& c, std::vector<std::string> argv) {
    const int64_t begin = now_ns();
    c.run = run_process(argv, timeout_ms_);
    c.seconds = seconds_since(begin);
  };
  auto compile_argv = [&](const Compile& c) {
    std::vector<std::string> argv = flags;
    argv.insert(argv.end(), {"-o", c.output_path, c.source_path, split ? "-c" : "-lm"});
    return argv;
  };
  std::vector<std::thread> others;
  for (size_t i = 1; i < compiles.size(); ++i) others.emplace_back(run, std::ref(compiles[i]), compile_argv(compiles[i]));
  run(compiles[0], compile_argv(compiles[0]));
  for (std::thread& t : others) t.join();
  auto failed = [](const Compile& c) { return !c.run.ok() || c.run->signalled || c.run->exit_code != 0; };
  if (split && std::none_of(compiles.begin(), compiles.end(), failed)) {
    Compile link{"link (" + compiler + ")", "linking '" + label + "'", compiles[0].text, compiles[0].source_path};
    std::vector<std::string> argv = flags;
    argv.insert(argv.end(), {"-o", object_path});
    for (const Compile& c : compiles) argv.push_back(c.output_path);
    argv.push_back("-lm");
    run(link, std::move(argv));
    compiles.push_back(std::move(link));
  }
  for (const Compile& c : compiles) steps->push_back({c.step, c.seconds});

  for (size_t i = 0; i < compiles.size(); ++i) {
    const Compile& c = compiles[i];
    if (!failed(c)) continue;
    // Keep the failing source where the message points, so the user can open it: in the cache's
    // failed/ when the cache is trusted and writable, else in the build directory, which stays.
    std::string kept = c.source_path;
    if (cache_.enabled()) {
      const std::string name = key + (split ? "-" + std::to_string(std::min(i, sources.size() - 1)) : "") + ".c";
      if (Result<std::string> k = cache_.keep_file("failed", name, c.text); k.ok()) {
        remove_tree(*work_dir).ignore();
        kept = *k;
      }
    }
    if (!c.run.ok()) {
      return Status(c.run.status().code() == StatusCode::kNotFound ? StatusCode::kUnavailable : c.run.status().code(),
                    c.action + ": " + c.run.status().message() + "; source kept at " + kept);
    }
    std::string how = c.run->signalled ? "was killed by signal " + std::to_string(c.run->term_signal)
                                       : "exited with status " + std::to_string(c.run->exit_code);
    return invalid_argument_error(c.action + " with " + compiler + " failed (it " + how + "); source kept at " + kept +
                                  "\n" + c.run->output);
  }
  return object_path;
}

}  // namespace kiln::cpu
