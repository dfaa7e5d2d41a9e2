// The CPU device's workgroup threads when the system refuses some of them: device creation
// returns RESOURCE_EXHAUSTED naming the setting, and the process goes on (no std::terminate).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>

#include "kiln/drivers/drivers.h"

namespace kiln {
namespace {

// Under an address-space limit that 1024 thread stacks exceed, creating a device with 1024
// threads fails with a status; exit code 0 when it did so as documented.
[[noreturn, maybe_unused]] void create_under_address_space_limit(const char* driver) {
  rlimit limit{size_t{2} << 30, size_t{2} << 30};
  if (::setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
  hal::DeviceOptions options;
  options.worker_threads = 1024;
  options.cache_dir = "";
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device(driver, options);
  if (device.ok()) std::_Exit(1);  // the limit did not bite: nothing was tested
  std::fprintf(stderr, "%s\n", device.status().to_string().c_str());
  std::_Exit(device.status().code() == StatusCode::kResourceExhausted ? 0 : 2);
}

TEST(CpuThreadsDeathTest, RefusedThreadsAreAStatusNotATermination) {
#ifdef KILN_SANITIZED
  GTEST_SKIP() << "sanitizers reserve far more address space than the limit this test sets";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* driver : {"cpu", "interp"}) {
    SCOPED_TRACE(driver);
    EXPECT_EXIT(create_under_address_space_limit(driver), ::testing::ExitedWithCode(0),
                "RESOURCE_EXHAUSTED: .*worker_threads.*could start only [0-9]+ of 1023 worker threads "
                "\\(1024 threads, the caller among them\\)");
  }
#endif
}

}  // namespace
}  // namespace kiln
