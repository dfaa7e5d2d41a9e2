// ThreadPool::move_workers_off_this_core: a worker leaves the caller's core until its next job,
// then has its own cores back. Ordered by the jobs themselves (each part waits for the other to
// start, so the worker must take one), never by time.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "drivers/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

cpu_set_t cores_of(pid_t tid) {
  cpu_set_t cores;
  CPU_ZERO(&cores);
  EXPECT_EQ(::sched_getaffinity(tid, sizeof cores, &cores), 0);
  return cores;
}

// Runs two parts that each wait until both have started, so that the pool's one worker runs one
// of them; returns the worker's thread id.
pid_t run_with_the_worker(ThreadPool& pool) {
  std::atomic<int> started{0};
  std::atomic<pid_t> threads[2] = {0, 0};
  const pid_t caller = this_thread_id();
  pool.run_parts(2, [&](uint64_t i) {
    threads[i] = this_thread_id();
    started.fetch_add(1);
    while (started.load() < 2) sched_yield();
  });
  EXPECT_NE(threads[0].load(), threads[1].load());
  return threads[0].load() == caller ? threads[1].load() : threads[0].load();
}

TEST(CpuThreadPoolTest, AMovedWorkerLeavesTheCallersCoreUntilItsNextJob) {
  const cpu_set_t allowed = cores_of(0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two cores to move a worker between";
  Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const pid_t worker = run_with_the_worker(**pool);
  const cpu_set_t before = cores_of(worker);

  // Keep this thread on one core, so that the core the pool reads is the one it ran on.
  const int core = ::sched_getcpu();
  ASSERT_GE(core, 0);
  cpu_set_t here;
  CPU_ZERO(&here);
  CPU_SET(core, &here);
  ASSERT_EQ(::sched_setaffinity(0, sizeof here, &here), 0);
  (*pool)->move_workers_off_this_core();
  const cpu_set_t moved = cores_of(worker);
  cpu_set_t expected = before;
  CPU_CLR(core, &expected);
  EXPECT_FALSE(CPU_ISSET(core, &moved));
  EXPECT_TRUE(CPU_EQUAL(&moved, &expected));

  // Its next job gives it its own cores back.
  EXPECT_EQ(run_with_the_worker(**pool), worker);
  const cpu_set_t after = cores_of(worker);
  EXPECT_TRUE(CPU_EQUAL(&after, &before));
  ASSERT_EQ(::sched_setaffinity(0, sizeof allowed, &allowed), 0);
}

// A pool of one thread has no worker to move, and moving none is harmless.
TEST(CpuThreadPoolTest, APoolWithoutWorkersMovesNothing) {
  Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  (*pool)->move_workers_off_this_core();
  int runs = 0;
  (*pool)->run_parts(3, [&](uint64_t) { ++runs; });
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace kiln::cpu
