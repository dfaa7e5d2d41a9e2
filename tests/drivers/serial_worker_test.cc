// SerialWorker: tasks run one at a time in the order pushed, from any number of threads, whether
// the worker is asleep or spinning for the next task, and stop() runs everything pushed before it.
#include "drivers/serial_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>


namespace kiln::drivers {
namespace {

// Pushes `count` tasks from each of `threads` threads; each appends its (thread, index) pair.
// Per thread the pairs must come out in order, and no two tasks may overlap.
void run_tasks_in_order(SerialWorker& worker, int threads, int count) {
  std::vector<std::pair<int, int>> ran;  // written by the worker's tasks only
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> pushers;
  for (int t = 0; t < threads; ++t) {
    pushers.emplace_back([&, t] {
      for (int i = 0; i < count; ++i) {
        worker.push([&, t, i] {
          if (running.fetch_add(1) != 0) overlaps.fetch_add(1);
          ran.emplace_back(t, i);
          running.fetch_sub(1);
        });
      }
    });
  }
  for (std::thread& p : pushers) p.join();
  worker.stop();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(ran.size(), size_t(threads) * count);
  std::vector<int> next(threads, 0);
  for (auto [t, i] : ran) EXPECT_EQ(i, next[t]++) << "thread " << t;
}

TEST(SerialWorkerTest, RunsTasksInOrderOneAtATime) {
  SerialWorker worker;
  run_tasks_in_order(worker, 4, 500);
}

TEST(SerialWorkerTest, ASpinningWorkerRunsTasksInOrderOneAtATime) {
  SerialWorker worker(int64_t{1000000});  // a millisecond: most pushes find it spinning
  run_tasks_in_order(worker, 4, 500);
}

// A task pushed while the worker spins, and one pushed after it slept again, both run; each
// push waits for the task before (a chain of hand-offs, as between a queue and its waiter).
TEST(SerialWorkerTest, ASpinningWorkerPicksUpTasksWhileSpinningAndAfterSleeping) {
  for (int64_t spin : {int64_t{0}, int64_t{1000}, int64_t{100000000}}) {
    SerialWorker worker(spin);
    std::atomic<int> done{0};
    for (int i = 0; i < 200; ++i) {
      worker.push([&] { done.fetch_add(1); });
      while (done.load() != i + 1) std::this_thread::yield();
    }
    worker.stop();
    EXPECT_EQ(done.load(), 200) << "spin " << spin;
  }
}

// stop() of a worker in its spin returns, having run everything pushed.
TEST(SerialWorkerTest, StopEndsTheSpin) {
  SerialWorker worker(int64_t{3600} * 1000000000);  // an hour
  std::atomic<int> done{0};
  worker.push([&] { done.fetch_add(1); });
  worker.stop();
  EXPECT_EQ(done.load(), 1);
}

}  // namespace
}  // namespace kiln::drivers
