// OpenBLAS, loaded when the first host gemm runs (ral/library/openblas.h): KILN_CPU_THREADS bounds
// its threads as it bounds kiln's own, so a gemm under KILN_CPU_THREADS=1 uses one core.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/scoped_env.h"
#include "common/test_child.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/openblas.h"

namespace kiln::ral {
namespace {

double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Child mode: in a fresh process under KILN_CPU_THREADS=1, a 512³ product on this thread, and
// the CPU time the process spent outside this thread meanwhile (CPU time, not wall time, so a
// loaded machine changes nothing). A fresh process, since OpenBLAS's threads keep spinning a while
// after work they did for an earlier gemm of the same process.
TEST(OpenBlasChild, OneThreadUsesOneCore) {
  if (!std::getenv("KILN_OPENBLAS_TEST_CHILD")) GTEST_SKIP() << "runs only as a child process";
  Result<int> threads = library::openblas_threads();
  ASSERT_TRUE(threads.ok()) << threads.status();
  const int64_t n = 512;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  const double thread_before = cpu_seconds(CLOCK_THREAD_CPUTIME_ID), process_before = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(library::openblas_gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n)
                    .ok());
  }
  const double on_thread = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread_before;
  const double elsewhere = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_before - on_thread;
  std::printf("threads %d, c[0] %g, elsewhere/on_thread %.3f\n", *threads, c[0], elsewhere / on_thread);
}

TEST(OpenBlasTest, KilnCpuThreadsBoundsItsThreads) {
  if (Result<int> loaded = library::openblas_threads(); !loaded.ok()) GTEST_SKIP() << loaded.status();
  const std::string out = test::run_test_child({"KILN_CPU_THREADS=1", "KILN_OPENBLAS_TEST_CHILD=1"},
                                               "OpenBlasChild.OneThreadUsesOneCore");
  double ratio = 1;
  int threads = 0;
  float first = 0;
  const size_t at = out.find("threads ");
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "threads %d, c[0] %g, elsewhere/on_thread %lf", &threads, &first, &ratio), 3)
      << out;
  EXPECT_EQ(threads, 1);
  EXPECT_EQ(first, 256.0f);
  EXPECT_LT(ratio, 0.25) << "other threads worked beside the gemm's: " << out;

  // A changed setting applies to the next call.
  test::ScopedEnv two("KILN_CPU_THREADS", "2");
  Result<int> now = library::openblas_threads();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(*now, 2);
}

// Child mode: the kernels OpenBLAS runs, as kiln loaded it.
TEST(OpenBlasChild, NamesItsKernels) {
  if (!std::getenv("KILN_OPENBLAS_TEST_CHILD")) GTEST_SKIP() << "runs only as a child process";
  Result<std::string> core = library::openblas_core();
  ASSERT_TRUE(core.ok()) << core.status();
  std::printf("kernels %s\n", core->c_str());
}

// On an Intel processor OpenBLAS runs the kernels of the processor's features (OpenBLAS 0.3.21
// alone falls back to SSE3 on models newer than itself); OPENBLAS_CORETYPE, when set, is kept.
TEST(OpenBlasTest, KernelsOfTheProcessorsFeatures) {
  if (Result<std::string> core = library::openblas_core(); !core.ok()) GTEST_SKIP() << core.status();
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const std::string out =
      test::run_test_child({"-u", "OPENBLAS_CORETYPE", "KILN_OPENBLAS_TEST_CHILD=1"}, "OpenBlasChild.NamesItsKernels");
  ASSERT_NE(out.find("kernels "), std::string::npos) << out;
  if (__builtin_cpu_is("intel") && avx512) {
    EXPECT_NE(out.find("kernels SkylakeX"), std::string::npos) << out;
  } else if (__builtin_cpu_is("intel") && avx2) {
    EXPECT_NE(out.find("kernels Haswell"), std::string::npos) << out;
  }
  if (avx2) {  // the user's choice (Haswell's kernels need AVX2 and FMA)
    const std::string chosen = test::run_test_child({"OPENBLAS_CORETYPE=Haswell", "KILN_OPENBLAS_TEST_CHILD=1"},
                                                    "OpenBlasChild.NamesItsKernels");
    EXPECT_NE(chosen.find("kernels Haswell"), std::string::npos) << chosen;
  }
}

TEST(OpenBlasTest, AMalformedSettingIsAnError) {
  test::ScopedEnv bad("KILN_CPU_THREADS", "abc");
  std::vector<float> a(1, 1.0f), b(1, 1.0f), c(1, 0.0f);
  Status status = library::openblas_gemm<float>(false, false, 1, 1, 1, 1.0f, a.data(), 1, b.data(), 1, 0.0f, c.data(), 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("KILN_CPU_THREADS"), std::string::npos) << status;
}

}  // namespace
}  // namespace kiln::ral
