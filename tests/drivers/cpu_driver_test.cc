// CPU driver specifics: the on-disk compile cache (hits without a compiler, corrupt entries,
// unwritable locations), compiler diagnostics, worker threads and KILN_CPU_THREADS.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/scoped_env.h"
#include "common/wait_limit.h"
#include "kiln/base/log.h"
#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"
#include "kiln/hal/driver.h"
#include "kiln/hal/queue.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;

using test::kWaitMs;
constexpr const char* kMissingCompiler = "/nonexistent/kiln-cts/no-such-cc";

// out[linear] = linear * 3 + constants[0]; `tag` makes the source (and its cache key) unique.
std::string kernel_source(const std::string& tag) {
  return "/* " + tag + " */\n" + R"C(
int fill_ids(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  uint32_t* out = (uint32_t*)s->bindings[0];
  size_t i = id->x + s->workgroup_count[0] * (id->y + s->workgroup_count[1] * id->z);
  if ((i + 1) * sizeof(uint32_t) > s->binding_lengths[0]) return 3;
  out[i] = (uint32_t)i * 3u + s->constants[0];
  return 0;
}
)C";
}

hal::ExecutableSource make_source(const std::string& text) {
  hal::ExecutableSource source;
  source.format = "c";
  source.source = text;
  source.exports = {{"fill_ids", 1, 1}};
  source.label = "cpu_driver_test";
  return source;
}

std::vector<fs::path> files_with_suffix(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return found;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found.push_back(it->path());
    }
  }
  return found;
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces a file by a new one (a new inode), so a copy that is still mapped stays intact.
void replace_file(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path;
  tmp += ".cts-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  fs::rename(tmp, path);
}

class CpuDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "kiln-cpu-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    tag_ = dir_.string() + " " + std::to_string(now_ns());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A compiler of our own: a script that runs the real one ($KILN_CC or cc). Hiding it later
  // makes its path one that does not exist, so a device using it cannot run a compiler.
  std::string make_compiler_wrapper() {
    fs::create_directories(dir_ / "bin");
    fs::path wrapper = dir_ / "bin" / "kiln-cts-cc";
    const char* real = getenv("KILN_CC");
    std::string real_cc = real && *real ? real : "cc";
    {
      std::ofstream out(wrapper);
      out << "#!/bin/sh\nexec " << real_cc << " \"$@\"\n";
    }
    fs::permissions(wrapper, fs::perms::owner_all);
    return wrapper.string();
  }
  void hide_compiler(const std::string& wrapper) { fs::rename(wrapper, wrapper + ".hidden"); }
  void restore_compiler(const std::string& wrapper) { fs::rename(wrapper + ".hidden", wrapper); }

  hal::DeviceOptions options(const fs::path& cache_dir) {
    hal::DeviceOptions options;
    options.cache_dir = cache_dir.string();
    return options;
  }

  Result<hal::DeviceRef> create(const hal::DeviceOptions& options) {
    return drivers::builtin_registry().create_device("cpu", options);
  }

  // Dispatches fill_ids over `groups` workgroups and checks every element.
  void expect_dispatch_works(const hal::DeviceRef& device, const hal::ExecutableRef& executable,
                             std::array<uint32_t, 3> groups, uint32_t constant) {
    size_t n = size_t(groups[0]) * groups[1] * groups[2];
    auto buffer = device->allocator().allocate({}, n * 4);
    ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
    auto queue = device->create_queue("cpu-test");
    ASSERT_TRUE(queue.ok()) << queue.status().to_string();
    hal::DispatchCommand dispatch;
    dispatch.executable = executable;
    dispatch.workgroups = groups;
    dispatch.constants = {constant};
    dispatch.bindings = {{*buffer}};
    auto done = device->create_semaphore();
    ASSERT_TRUE((*queue)->dispatch({}, {{done, 1}}, std::move(dispatch)).ok());
    Status waited = done->wait(1, Timeout::after_ms(kWaitMs));
    ASSERT_TRUE(waited.ok()) << waited.to_string();
    std::vector<uint32_t> values(n);
    ASSERT_TRUE((*buffer)->read_data(0, values.data(), n * 4).ok());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(values[i], uint32_t(i) * 3 + constant) << i;
  }

  // Compiles `text` on a fresh device with `opts` and checks a dispatch.
  void compile_and_run(const hal::DeviceOptions& opts, const std::string& text) {
    auto device = create(opts);
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    auto executable = (*device)->compile_executable(make_source(text));
    ASSERT_TRUE(executable.ok()) << executable.status().to_string();
    expect_dispatch_works(*device, *executable, {8, 2, 1}, 5);
  }

  fs::path dir_;
  std::string tag_;
};

TEST_F(CpuDriverTest, CompileStoresSharedObjectInCacheDir) {
  fs::path cache = dir_ / "cache";
  compile_and_run(options(cache), kernel_source(tag_));
  EXPECT_FALSE(files_with_suffix(cache, ".so").empty()) << "no .so entry under " << cache;
}

// Two objects loaded one after the other and both kept each resolve their own export. dlopen()
// knows a loaded library by its path, and objects are loaded through /proc/self/fd/N: with the
// descriptor closed after loading, the second object reused N and was handed the first's handle.
TEST_F(CpuDriverTest, ObjectsLoadedInTurnKeepTheirOwnExports) {
  auto device = create(options(dir_ / "cache"));
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  auto first = (*device)->compile_executable(make_source(kernel_source(tag_)));
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  std::string text = kernel_source(tag_ + " second");
  text.replace(text.find("fill_ids("), 9, "fill_ids_second(");
  hal::ExecutableSource source = make_source(text);
  source.exports = {{"fill_ids_second", 1, 1}};
  auto second = (*device)->compile_executable(source);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  expect_dispatch_works(*device, *first, {4, 1, 1}, 1);
  expect_dispatch_works(*device, *second, {4, 1, 1}, 2);
}

TEST_F(CpuDriverTest, DiskCacheHitNeedsNoCompiler) {
  fs::path cache = dir_ / "cache";
  std::string text = kernel_source(tag_);
  hal::DeviceOptions opts = options(cache);
  opts.c_compiler = make_compiler_wrapper();
  ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, text));
  ASSERT_FALSE(files_with_suffix(cache, ".so").empty());

  // A new device whose compiler path no longer exists still loads the cached entry: the disk
  // cache is hit without running a compiler.
  hide_compiler(*opts.c_compiler);
  ASSERT_FALSE(fs::exists(*opts.c_compiler));
  ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, text));

  // A source that is not cached needs the compiler, and the error names it.
  auto device = create(opts);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  auto other = (*device)->compile_executable(make_source(kernel_source(tag_ + " other")));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find(*opts.c_compiler), std::string::npos)
      << other.status().to_string();
}

TEST_F(CpuDriverTest, MissingCompilerIsNamed) {
  hal::DeviceOptions opts = options(dir_ / "cache");
  opts.c_compiler = kMissingCompiler;
  auto device = create(opts);
  if (!device.ok()) {
    // Refusing the device outright is fine too, if the message names the compiler.
    EXPECT_NE(device.status().message().find(kMissingCompiler), std::string::npos)
        << device.status().to_string();
    return;
  }
  auto result = (*device)->compile_executable(make_source(kernel_source(tag_)));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(kMissingCompiler), std::string::npos)
      << result.status().to_string();
}

TEST_F(CpuDriverTest, CorruptEntriesAreRebuilt) {
  std::string wrapper = make_compiler_wrapper();
  for (int mode = 0; mode < 2; ++mode) {
    SCOPED_TRACE(mode == 0 ? "truncated" : "overwritten");
    fs::path cache = dir_ / ("cache" + std::to_string(mode));
    hal::DeviceOptions opts = options(cache);
    opts.c_compiler = wrapper;
    std::string text = kernel_source(tag_ + " corrupt " + std::to_string(mode));
    ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, text));
    std::vector<fs::path> entries = files_with_suffix(cache, ".so");
    ASSERT_FALSE(entries.empty());
    for (const fs::path& entry : entries) {
      std::string bytes = read_whole(entry);
      ASSERT_GT(bytes.size(), 256u);
      if (mode == 0) {
        bytes.resize(bytes.size() / 2);
      } else {
        for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x5A;
      }
      replace_file(entry, bytes);
    }
    // The next device rebuilds the entry and runs correctly ...
    ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, text));
    // ... and stored it again, so a device that cannot run the compiler loads it.
    hide_compiler(wrapper);
    ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, text));
    restore_compiler(wrapper);
  }
}

// Runs `body` in a forked child (gtest death-test style) and expects it to finish without a
// failure within 60 seconds; a hang ends the child with SIGALRM.
#define EXPECT_CHILD_PASSES(body)                                          \
  EXPECT_EXIT(                                                             \
      {                                                                    \
        alarm(60);                                                         \
        body;                                                              \
        _exit(::testing::Test::HasFailure() ? 1 : 0);                      \
      },                                                                   \
      ::testing::ExitedWithCode(0), "")

// Drops the capabilities that let root ignore file permissions, so that a read-only directory is
// read-only for this process too (a no-op for other users).
void drop_permission_override() {
  if (geteuid() != 0) return;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  ASSERT_EQ(syscall(SYS_capget, &header, data), 0);
  for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
    data[cap / 32].effective &= ~(1u << (cap % 32));
  }
  ASSERT_EQ(syscall(SYS_capset, &header, data), 0);
}

// The .so entries of `cache` (the compiler identity records end in .cc).
fs::path only_entry(const fs::path& cache) {
  std::vector<fs::path> entries = files_with_suffix(cache, ".so");
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? fs::path() : entries[0];
}

TEST_F(CpuDriverTest, EntryOfAnotherProgramIsNotLoaded) {
  // Another kernel whose results differ (x7 instead of x3): its valid entry put in the place of
  // ours must be rebuilt, not run.
  std::string ours = kernel_source(tag_ + " ours");
  std::string theirs = kernel_source(tag_ + " theirs");
  theirs.replace(theirs.find("* 3u"), 4, "* 7u");
  fs::path cache = dir_ / "cache", other = dir_ / "other";
  ASSERT_NO_FATAL_FAILURE(compile_and_run(options(cache), ours));
  {
    auto device = create(options(other));
    ASSERT_TRUE(device.ok());
    ASSERT_TRUE((*device)->compile_executable(make_source(theirs)).ok());
  }
  fs::path entry = only_entry(cache);
  replace_file(entry, read_whole(only_entry(other)));
  ASSERT_NO_FATAL_FAILURE(compile_and_run(options(cache), ours));
  EXPECT_NE(read_whole(entry), read_whole(only_entry(other))) << "the entry was not replaced";
}

TEST_F(CpuDriverTest, EntriesThatAreNotFilesAreRebuilt) {
  for (int mode = 0; mode < 2; ++mode) {
    SCOPED_TRACE(mode == 0 ? "fifo" : "symlink to /dev/zero");
    fs::path cache = dir_ / ("cache" + std::to_string(mode));
    std::string text = kernel_source(tag_ + " special " + std::to_string(mode));
    ASSERT_NO_FATAL_FAILURE(compile_and_run(options(cache), text));
    fs::path entry = only_entry(cache);
    fs::remove(entry);
    if (mode == 0) {
      ASSERT_EQ(mkfifo(entry.c_str(), 0644), 0);
    } else {
      fs::create_symlink("/dev/zero", entry);
    }
    EXPECT_CHILD_PASSES(compile_and_run(options(cache), text));
  }
}

TEST_F(CpuDriverTest, ReadOnlyCacheWithCorruptEntryStillCompiles) {
  fs::path cache = dir_ / "cache";
  std::string text = kernel_source(tag_ + " read-only");
  ASSERT_NO_FATAL_FAILURE(compile_and_run(options(cache), text));
  fs::path entry = only_entry(cache);
  std::string bytes = read_whole(entry);
  bytes[bytes.size() / 2] ^= 0x5A;
  replace_file(entry, bytes);
  EXPECT_CHILD_PASSES({
    drop_permission_override();
    fs::permissions(cache, fs::perms::owner_read | fs::perms::owner_exec);
    compile_and_run(options(cache), text);
  });
  fs::permissions(cache, fs::perms::owner_all);
}

TEST_F(CpuDriverTest, BuildErrorNamesTheSourceFile) {
  auto device = create(options(dir_ / "cache"));
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  std::string text = "/* " + tag_ +
                     " */\nint fill_ids(const kiln_dispatch_state_t* s, "
                     "const kiln_workgroup_id_t* id) { return cts_undeclared_name }\n";
  auto result = (*device)->compile_executable(make_source(text));
  ASSERT_FALSE(result.ok());
  const std::string& message = result.status().message();
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("cts_undeclared_name"), std::string::npos) << message;
  // A path ending in ".c" that exists on disk, so the user can look at what was compiled.
  std::regex path_pattern(R"((/[^\s'"`:()]+\.c)(?![A-Za-z0-9_]))");
  bool found_existing = false;
  std::vector<std::string> paths;
  for (auto it = std::sregex_iterator(message.begin(), message.end(), path_pattern);
       it != std::sregex_iterator(); ++it) {
    paths.push_back((*it)[1].str());
    std::error_code ec;
    if (fs::exists(paths.back(), ec)) found_existing = true;
  }
  EXPECT_FALSE(paths.empty()) << "no .c path in: " << message;
  EXPECT_TRUE(found_existing) << "no .c path in the message exists: " << message;
}

TEST_F(CpuDriverTest, UnwritableCacheStillCompiles) {
  fs::path file = dir_ / "regular-file";
  { std::ofstream(file) << "not a directory"; }
  // The cache is an optimization: failing to store must not fail the compile.
  ASSERT_NO_FATAL_FAILURE(compile_and_run(options(file / "sub"), kernel_source(tag_)));
  EXPECT_TRUE(fs::is_regular_file(file));
}

TEST_F(CpuDriverTest, DisabledCacheCompiles) {
  hal::DeviceOptions opts;
  opts.cache_dir = "";
  ASSERT_NO_FATAL_FAILURE(compile_and_run(opts, kernel_source(tag_)));
}

TEST_F(CpuDriverTest, WorkerThreads) {
  for (uint32_t threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    hal::DeviceOptions opts = options(dir_ / "cache");
    opts.worker_threads = threads;
    auto device = create(opts);
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    auto executable = (*device)->compile_executable(make_source(kernel_source(tag_)));
    ASSERT_TRUE(executable.ok()) << executable.status().to_string();
    expect_dispatch_works(*device, *executable, {64, 1, 1}, threads);
    expect_dispatch_works(*device, *executable, {4, 4, 4}, 100 + threads);
  }
}

TEST_F(CpuDriverTest, BadThreadsVariableIsInvalidArgument) {
  {
    ScopedEnv env("KILN_CPU_THREADS", "abc");
    auto device = create(options(dir_ / "cache"));
    ASSERT_FALSE(device.ok());
    EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument) << device.status().to_string();
    EXPECT_NE(device.status().message().find("KILN_CPU_THREADS"), std::string::npos)
        << device.status().to_string();
  }
  {
    ScopedEnv env("KILN_CPU_THREADS", "2");
    auto device = create(options(dir_ / "cache"));
    ASSERT_TRUE(device.ok()) << device.status().to_string();
  }
  // The cpu and interp drivers say they are unavailable while the setting is malformed (so
  // kiln.devices() does not list a device that cannot be created), and why.
  for (const char* name : {"cpu", "interp"}) {
    Result<hal::DriverRef> driver = drivers::builtin_registry().find(name);
    ASSERT_TRUE(driver.ok()) << driver.status();
    ScopedEnv env("KILN_CPU_THREADS", "abc");
    Status available = (*driver)->availability();
    EXPECT_EQ(available.code(), StatusCode::kInvalidArgument) << name << ": " << available;
    EXPECT_NE(available.message().find("KILN_CPU_THREADS='abc'"), std::string::npos) << available;
  }
}

TEST_F(CpuDriverTest, BadLogLevelIsInvalidArgument) {
  // Through the registry, as every caller creates devices; an unknown level is not a default.
  ScopedEnv env("KILN_LOG", "verbose");
  auto device = drivers::builtin_registry().create_device("cpu");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument) << device.status().to_string();
  EXPECT_NE(device.status().message().find("KILN_LOG='verbose'"), std::string::npos)
      << device.status().to_string();
  ScopedEnv upper("KILN_LOG", "DEBUG");  // any case
  EXPECT_TRUE(log_level_from_env().ok());
  EXPECT_EQ(*log_level_from_env(), LogLevel::kDebug);
}

}  // namespace
}  // namespace kiln
