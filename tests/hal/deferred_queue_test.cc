// The device-independent DeferredQueue every driver reuses: hand-over when waits are met, on
// which thread, no head-of-line blocking, failure propagation and abort. Not parameterized.
#include "hal/deferred_queue.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

using hal::Action;
using hal::DeferredQueue;
using hal::Semaphore;

// Collects the actions a DeferredQueue hands over, with the thread that handed each over.
struct Collector {
  std::mutex mutex;
  std::vector<std::unique_ptr<Action>> actions;
  std::vector<std::thread::id> threads;

  DeferredQueue::ReadyFn fn() {
    return [this](std::unique_ptr<Action> action) {
      std::lock_guard<std::mutex> lock(mutex);
      actions.push_back(std::move(action));
      threads.push_back(std::this_thread::get_id());
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return actions.size();
  }
};

std::unique_ptr<Action> make_action(SemaphoreList waits, SemaphoreList signals) {
  auto action = std::make_unique<Action>();
  action->command = hal::BarrierCommand{};
  action->waits = std::move(waits);
  action->signals = std::move(signals);
  return action;
}

uint64_t value_or_max(const SemaphoreRef& s) {
  auto value = s->query();
  return value.ok() ? *value : ~uint64_t{0};
}

TEST(DeferredQueueTest, ReadyActionIsHandedOverAtOnceOnTheSubmittingThread) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef met = Semaphore::create(5);
  queue.submit(make_action({{met, 3}, {met, 5}}, {}));
  queue.submit(make_action({}, {}));
  ASSERT_EQ(collector.count(), 2u);
  EXPECT_EQ(collector.threads[0], std::this_thread::get_id());
  EXPECT_EQ(queue.pending_count(), 0u);
}

TEST(DeferredQueueTest, HandedOverOnTheThreadThatMeetsTheLastWait) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef a = Semaphore::create(), b = Semaphore::create();
  queue.submit(make_action({{a, 1}, {b, 2}}, {}));
  EXPECT_EQ(collector.count(), 0u);
  EXPECT_EQ(queue.pending_count(), 1u);
  CTS_ASSERT_OK(a->signal(1));
  CTS_ASSERT_OK(b->signal(1));
  EXPECT_EQ(collector.count(), 0u);
  std::thread::id signaller;
  std::thread thread([&] {
    signaller = std::this_thread::get_id();
    b->signal(2).ignore();
  });
  thread.join();
  ASSERT_EQ(collector.count(), 1u);
  EXPECT_EQ(collector.threads[0], signaller);
  EXPECT_EQ(queue.pending_count(), 0u);
}

TEST(DeferredQueueTest, NoHeadOfLineBlocking) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef gate = Semaphore::create();
  SemaphoreRef first = Semaphore::create(), second = Semaphore::create();
  queue.submit(make_action({{gate, 1}}, {{first, 1}}));
  queue.submit(make_action({}, {{second, 1}}));
  ASSERT_EQ(collector.count(), 1u);
  EXPECT_EQ(collector.actions[0]->signals[0].semaphore, second);
  CTS_ASSERT_OK(gate->signal(1));
  ASSERT_EQ(collector.count(), 2u);
  EXPECT_EQ(collector.actions[1]->signals[0].semaphore, first);
}

TEST(DeferredQueueTest, ManyWaitsReleaseOnce) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  std::vector<SemaphoreRef> semaphores;
  SemaphoreList waits;
  for (int i = 0; i < 10; ++i) {
    semaphores.push_back(Semaphore::create());
    waits.push_back({semaphores.back(), uint64_t(i + 1)});
  }
  queue.submit(make_action(waits, {}));
  // Signal in a scrambled order, each in steps.
  for (int i : {7, 2, 9, 0, 4, 1, 8, 3, 6, 5}) {
    for (uint64_t v = 1; v <= uint64_t(i + 1); ++v) {
      EXPECT_EQ(collector.count(), 0u) << "released before semaphore " << i << " reached " << v;
      CTS_ASSERT_OK(semaphores[i]->signal(v));
    }
  }
  EXPECT_EQ(collector.count(), 1u);
  EXPECT_EQ(queue.pending_count(), 0u);
}

TEST(DeferredQueueTest, FailedWaitFailsSignalsImmediately) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef a = Semaphore::create(), never = Semaphore::create();
  SemaphoreRef x = Semaphore::create(), y = Semaphore::create(2);
  queue.submit(make_action({{a, 1}, {never, 1}}, {{x, 1}, {y, 3}}));
  Status failure = aborted_error("a failed");
  a->fail(failure);
  EXPECT_EQ(x->query().status(), failure);
  EXPECT_EQ(y->query().status(), failure);
  EXPECT_EQ(collector.count(), 0u);
  EXPECT_EQ(queue.pending_count(), 0u);
  CTS_ASSERT_OK(never->signal(1));
  EXPECT_EQ(collector.count(), 0u);
}

TEST(DeferredQueueTest, AlreadyFailedWaitFailsSignalsAtSubmit) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef failed = Semaphore::create(), x = Semaphore::create();
  Status failure = data_loss_error("failed before submit");
  failed->fail(failure);
  queue.submit(make_action({{failed, 0}}, {{x, 1}}));
  EXPECT_EQ(x->query().status(), failure);
  EXPECT_EQ(collector.count(), 0u);
}

TEST(DeferredQueueTest, AbortAllFailsPendingActions) {
  Collector collector;
  DeferredQueue queue(collector.fn());
  SemaphoreRef gate = Semaphore::create();
  std::vector<SemaphoreRef> signals;
  for (int i = 0; i < 5; ++i) {
    signals.push_back(Semaphore::create());
    queue.submit(make_action({{gate, uint64_t(i + 1)}}, {{signals.back(), 1}}));
  }
  EXPECT_EQ(queue.pending_count(), 5u);
  Status reason = cancelled_error("shutting down");
  queue.abort_all(reason);
  EXPECT_EQ(queue.pending_count(), 0u);
  for (const SemaphoreRef& s : signals) EXPECT_EQ(s->query().status(), reason);
  CTS_ASSERT_OK(gate->signal(10));
  EXPECT_EQ(collector.count(), 0u);
}

TEST(DeferredQueueTest, DestructorCancelsPendingActions) {
  SemaphoreRef gate = Semaphore::create(), signal = Semaphore::create();
  auto handed_over = std::make_shared<std::atomic<int>>(0);
  {
    DeferredQueue queue([handed_over](std::unique_ptr<Action>) { handed_over->fetch_add(1); });
    queue.submit(make_action({{gate, 1}}, {{signal, 1}}));
  }
  auto value = signal->query();
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kCancelled) << value.status().to_string();
  CTS_ASSERT_OK(gate->signal(1));
  EXPECT_EQ(handed_over->load(), 0);
}

TEST(DeferredQueueTest, ConcurrentSignallersReleaseEachActionOnce) {
  // 200 actions, each waiting on 3 of 8 semaphores that 8 threads signal concurrently.
  constexpr int kActions = 200;
  constexpr int kSemaphores = 8;
  Collector collector;
  DeferredQueue queue(collector.fn());
  std::vector<SemaphoreRef> semaphores;
  for (int i = 0; i < kSemaphores; ++i) semaphores.push_back(Semaphore::create());
  for (int a = 0; a < kActions; ++a) {
    SemaphoreList waits;
    for (int k = 0; k < 3; ++k) {
      waits.push_back({semaphores[(a + k * 3) % kSemaphores], uint64_t(1 + (a * 7 + k) % 50)});
    }
    queue.submit(make_action(waits, {}));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kSemaphores; ++i) {
    threads.emplace_back([&, i] {
      for (uint64_t v = 1; v <= 50; ++v) semaphores[i]->signal(v).ignore();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(collector.count(), size_t(kActions));
  EXPECT_EQ(queue.pending_count(), 0u);
  for (const SemaphoreRef& s : semaphores) EXPECT_EQ(value_or_max(s), 50u);
}

}  // namespace
}  // namespace kiln::cts
