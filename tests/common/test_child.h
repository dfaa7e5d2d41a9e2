// Running this test binary again as a child process, for what must start from a fresh process: a
// library loaded once per process (the CUDA driver, OpenBLAS), an environment read at load, a
// fault that ends the device for the process. The child runs only the tests `filter` selects,
// with the variables `env` ("NAME=VALUE") added; a child test skips unless its variable is set.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/process.h"

namespace kiln::test {

// The child's combined output; a failed test where it could not run, was killed or failed.
inline std::string run_test_child(const std::vector<std::string>& env, const std::string& filter,
                                  int64_t timeout_ms = 120000) {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  EXPECT_GT(n, 0);
  if (n <= 0) return "";
  self[n] = '\0';
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {self, "--gtest_filter=" + filter});
  Result<ProcessResult> run = run_process(argv, timeout_ms);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return "";
  EXPECT_FALSE(run->signalled) << run->output;
  EXPECT_EQ(run->exit_code, 0) << run->output;
  return run->output;
}

}  // namespace kiln::test
