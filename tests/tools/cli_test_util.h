// What the command-line tests share: running the `kiln` binary as a separate process with an
// explicit environment (`env -i`, its own KILN_CACHE_DIR), temporary directories, the example
// programs and small .npy helpers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "base/process.h"
#include "common/sanitized.h"
#include "common/temp_dir.h"
#include "kiln/drivers/drivers.h"
#include "tools/npy.h"

#ifndef KILN_CLI_PATH
#error "KILN_CLI_PATH must name the kiln binary (tests/CMakeLists.txt defines it)"
#endif
#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::tools {

constexpr int64_t kTimeoutMs = 300000;

// A fresh directory per test (kiln-cli-XXXXXX), removed whatever its permissions.
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("kiln-cli") {}
};

inline std::string example(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/examples/kiln/" + name + ".kiln";
}

inline std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/examples/kiln")) {
    if (entry.path().extension() == ".kiln") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

using Env = std::map<std::string, std::string>;

// Which of kiln's output streams a run captures.
enum class Captured { kBoth, kStdout, kStderr };

// Runs `kiln ARGS...` with exactly the environment `env` (plus PATH, TMPDIR and sanitizer options
// taken from this process, so that the C compiler is found and sanitized builds behave).
// With kStdout or kStderr, the other stream goes to the file `discard` (not /dev/null: should
// anything have removed /dev/null, a shell's redirection would create it as a regular file).
// `ulimits`, when given, are arguments of the shell's `ulimit` applied to kiln alone ("-v 8000000").
// A run past `timeout_ms` is killed and fails the test (DEADLINE_EXCEEDED).
inline ProcessResult kiln(const std::vector<std::string>& args, const Env& env,
                          Captured captured = Captured::kBoth, const std::string& discard = "",
                          const std::string& ulimits = "", int64_t timeout_ms = kTimeoutMs) {
  std::vector<std::string> argv;
  if (captured == Captured::kStdout) argv = {"/bin/sh", "-c", "d=$1; shift; exec \"$@\" 2>\"$d\"", "sh", discard};
  if (captured == Captured::kStderr) argv = {"/bin/sh", "-c", "d=$1; shift; exec \"$@\" >\"$d\"", "sh", discard};
  if (!ulimits.empty()) argv.insert(argv.end(), {"/bin/sh", "-c", "ulimit " + ulimits + " && exec \"$@\"", "sh"});
  argv.insert(argv.end(), {"/usr/bin/env", "-i"});
  Env full = env;
  for (const char* name : {"PATH", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS"}) {
    const char* value = std::getenv(name);
    if (value && !full.count(name)) full[name] = value;
  }
  if (!full.count("PATH")) full["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [k, v] : full) argv.push_back(k + "=" + v);
  argv.push_back(KILN_CLI_PATH);
  argv.insert(argv.end(), args.begin(), args.end());
  Result<ProcessResult> result = run_process(argv, timeout_ms);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return ProcessResult{};
  EXPECT_FALSE(result->signalled) << "kiln was killed by signal " << result->term_signal << "\n" << result->output;
  return *result;
}

inline std::string describe_run(const std::vector<std::string>& args, const ProcessResult& r) {
  std::string out = "kiln";
  for (const std::string& a : args) out += " " + a;
  return out + "\nexit " + std::to_string(r.exit_code) + ", output:\n" + r.output;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(std::filesystem::exists(KILN_CLI_PATH)) << KILN_CLI_PATH;
    ASSERT_TRUE(std::filesystem::exists("/usr/bin/env"));
  }
  // The environment of an ordinary run: this test's own cache directory.
  Env env() const { return {{"KILN_CACHE_DIR", dir_.file("cache")}}; }
  ProcessResult run(const std::vector<std::string>& args) { return kiln(args, env()); }

  TempDir dir_;
};

inline NpyArray f32_array(std::vector<int64_t> shape, const std::vector<float>& values) {
  NpyArray a{ir::DType::kF32, std::move(shape), std::string(values.size() * 4, '\0')};
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

inline std::vector<float> f32_values(const NpyArray& a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// Whether `name` is a driver with a device here (the OpenCL tests run only with a platform).
inline bool device_present(const std::string& name) {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find(name);
  return driver.ok() && (*driver)->availability().ok();
}

inline Status write_bytes(const std::string& path, const std::string& bytes) { return write_file_atomic(path, bytes); }

}  // namespace kiln::tools
