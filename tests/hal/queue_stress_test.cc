// CTS: many submissions — long chains across two queues, and many threads submitting at once.
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

class QueueStressTest : public CtsTest {};
KILN_CTS_INSTANTIATE(QueueStressTest);

// Action i waits for timeline value i and signals i + 1; the host calls check they run in order.
// `counter` is a plain integer: the semaphores alone must order the accesses (TSan checks it).
void submit_chain(hal::Queue& q0, hal::Queue& q1, const SemaphoreRef& timeline, uint64_t first,
                  int count, std::shared_ptr<uint64_t> counter,
                  std::shared_ptr<std::atomic<int>> errors) {
  for (int i = 0; i < count; ++i) {
    uint64_t wait_value = first + i;
    hal::Queue& queue = (i % 2) ? q1 : q0;
    Status status = queue.host_call({{timeline, wait_value}}, {{timeline, wait_value + 1}},
                                    [counter, errors, expected = uint64_t(i)](const auto&) {
                                      if (*counter != expected) errors->fetch_add(1);
                                      *counter = expected + 1;
                                      return Status();
                                    });
    if (!status.ok()) {
      ADD_FAILURE() << "submit " << i << ": " << status.to_string();
      return;
    }
  }
}

TEST_P(QueueStressTest, ChainedSubmitsWhileRunning) {
  constexpr int kCount = 500;
  SemaphoreRef timeline = semaphore(1);
  auto counter = std::make_shared<uint64_t>(0);
  auto errors = std::make_shared<std::atomic<int>>(0);
  submit_chain(*queue_, *queue2_, timeline, 1, kCount, counter, errors);
  CTS_ASSERT_OK(wait(timeline, kCount + 1));
  EXPECT_EQ(errors->load(), 0);
  EXPECT_EQ(*counter, uint64_t(kCount));
}

TEST_P(QueueStressTest, ChainedSubmitsAllPending) {
  constexpr int kCount = 500;
  SemaphoreRef timeline = semaphore();
  auto counter = std::make_shared<uint64_t>(0);
  auto errors = std::make_shared<std::atomic<int>>(0);
  submit_chain(*queue_, *queue2_, timeline, 1, kCount, counter, errors);
  grace_sleep();
  EXPECT_EQ(value_of(timeline), 0u);
  CTS_ASSERT_OK(timeline->signal(1));
  CTS_ASSERT_OK(wait(timeline, kCount + 1));
  EXPECT_EQ(errors->load(), 0);
  EXPECT_EQ(*counter, uint64_t(kCount));
}

TEST_P(QueueStressTest, ChainedTransfers) {
  // 300 copies bounce a block between two buffers, alternating queues.
  constexpr int kCount = 300;
  std::vector<uint8_t> bytes = pattern_bytes(4096, 11);
  BufferRef a = make_buffer(bytes), b = make_buffer(4096, 0);
  SemaphoreRef timeline = semaphore();
  for (int i = 0; i < kCount; ++i) {
    hal::Queue& queue = (i % 2) ? *queue2_ : *queue_;
    const BufferRef& from = (i % 2) ? b : a;
    const BufferRef& to = (i % 2) ? a : b;
    CTS_ASSERT_OK(
        queue.copy({{timeline, uint64_t(i)}}, {{timeline, uint64_t(i + 1)}}, from, 0, to, 0, 4096));
  }
  CTS_ASSERT_OK(wait(timeline, kCount));
  EXPECT_EQ(read_bytes(a), bytes);
  EXPECT_EQ(read_bytes(b), bytes);
}

TEST_P(QueueStressTest, ChainedDispatches) {
  CTS_REQUIRE_KERNELS();
  // More than 256 per queue: OpenCL's status slots (256 per queue) are reused under the gates of
  // device-side waits that read them.
  constexpr int kCount = 600;
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(1024, 0));
  hal::ExecutableRef executable = kernels();
  SemaphoreRef timeline = semaphore();
  for (int i = 0; i < kCount; ++i) {
    hal::Queue& queue = (i % 2) ? *queue2_ : *queue_;
    CTS_ASSERT_OK(
        queue.dispatch({{timeline, uint64_t(i)}}, {{timeline, uint64_t(i + 1)}},
                       make_dispatch(kAddConstant, {16, 1, 1}, {uint32_t(i), 64}, {{data}})));
  }
  CTS_ASSERT_OK(wait(timeline, kCount));
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(1024, kCount * (kCount - 1) / 2));
}

TEST_P(QueueStressTest, ManyThreadsSubmitting) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::vector<SemaphoreRef> timelines(kThreads);
  std::vector<std::shared_ptr<uint64_t>> counters(kThreads);
  auto errors = std::make_shared<std::atomic<int>>(0);
  for (int t = 0; t < kThreads; ++t) {
    timelines[t] = semaphore(1);
    counters[t] = std::make_shared<uint64_t>(0);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      hal::Queue& q0 = (t % 2) ? *queue2_ : *queue_;
      hal::Queue& q1 = (t % 2) ? *queue_ : *queue2_;
      submit_chain(q0, q1, timelines[t], 1, kPerThread, counters[t], errors);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CTS_EXPECT_OK(wait(timelines[t], kPerThread + 1));
    EXPECT_EQ(*counters[t], uint64_t(kPerThread)) << "thread " << t;
  }
  EXPECT_EQ(errors->load(), 0);
}

TEST_P(QueueStressTest, ManyIndependentActions) {
  // 1000 independent barriers, each with its own signal value on its own semaphore.
  constexpr int kCount = 1000;
  std::vector<SemaphoreRef> done(kCount);
  SemaphoreRef gate = semaphore();
  for (int i = 0; i < kCount; ++i) {
    done[i] = semaphore();
    hal::Queue& queue = (i % 2) ? *queue2_ : *queue_;
    CTS_ASSERT_OK(queue.barrier({{gate, uint64_t(1 + i % 3)}}, {{done[i], 1}}));
  }
  for (uint64_t v = 1; v <= 3; ++v) CTS_ASSERT_OK(gate->signal(v));
  for (int i = 0; i < kCount; ++i) CTS_ASSERT_OK(wait(done[i], 1));
}

TEST_P(QueueStressTest, QueueDestroyedWithPendingActions) {
  // Dropping a queue with actions still waiting fails (cancels) their signals; it never hangs.
  SemaphoreRef gate = semaphore(), done = semaphore();
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto queue = must(device().create_queue("doomed"), "create_queue");
  for (int i = 0; i < 10; ++i) {
    CTS_ASSERT_OK(queue->host_call({{gate, 1}}, {{done, uint64_t(i + 1)}}, [runs](const auto&) {
      runs->fetch_add(1);
      return Status();
    }));
  }
  queue.reset();
  Status result = wait(done, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  CTS_ASSERT_OK(gate->signal(1));
  grace_sleep();
  EXPECT_EQ(runs->load(), 0);
}

}  // namespace
}  // namespace kiln::cts
