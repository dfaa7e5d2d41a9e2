// CTS: timeline semaphores — values, sticky failure, host waits with timeouts, multi-waits and
// timepoints.
#include <atomic>
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

using hal::SemaphoreValue;
using hal::Timepoint;
using hal::WaitMode;

class SemaphoreTest : public CtsTest {};
KILN_CTS_INSTANTIATE(SemaphoreTest);

TEST_P(SemaphoreTest, QueryInitialValue) {
  EXPECT_EQ(value_of(semaphore()), 0u);
  EXPECT_EQ(value_of(semaphore(5)), 5u);
  EXPECT_EQ(value_of(semaphore(uint64_t{1} << 40)), uint64_t{1} << 40);
}

TEST_P(SemaphoreTest, SignalIncreases) {
  SemaphoreRef s = semaphore(2);
  CTS_ASSERT_OK(s->signal(3));
  EXPECT_EQ(value_of(s), 3u);
  CTS_ASSERT_OK(s->signal(100));
  EXPECT_EQ(value_of(s), 100u);
  CTS_ASSERT_OK(s->signal(uint64_t{1} << 50));
  EXPECT_EQ(value_of(s), uint64_t{1} << 50);
}

TEST_P(SemaphoreTest, SignalNotAboveIsInvalid) {
  SemaphoreRef s = semaphore(10);
  CTS_EXPECT_CODE(kInvalidArgument, s->signal(10));
  CTS_EXPECT_CODE(kInvalidArgument, s->signal(9));
  CTS_EXPECT_CODE(kInvalidArgument, s->signal(0));
  EXPECT_EQ(value_of(s), 10u);
  // A rejected signal does not fail the semaphore.
  CTS_EXPECT_OK(s->signal(11));
  CTS_EXPECT_OK(s->wait(11, Timeout::immediate()));
}

TEST_P(SemaphoreTest, FirstFailureWinsAndSticks) {
  SemaphoreRef s = semaphore(4);
  Status first = aborted_error("first failure");
  s->fail(first);
  s->fail(internal_error("second failure"));
  auto query = s->query();
  ASSERT_FALSE(query.ok());
  EXPECT_EQ(query.status(), first);
  // Every wait returns the failure, also for values reached before it.
  EXPECT_EQ(s->wait(0, Timeout::immediate()), first);
  EXPECT_EQ(s->wait(4, Timeout::immediate()), first);
  EXPECT_EQ(s->wait(5, Timeout::immediate()), first);
  EXPECT_EQ(s->wait(1000, wait_timeout()), first);
  EXPECT_EQ(s->signal(5), first);
  EXPECT_EQ(s->query().status(), first);
}

TEST_P(SemaphoreTest, FailWithOkStatusStillFails) {
  SemaphoreRef s = semaphore();
  s->fail(Status());
  auto query = s->query();
  ASSERT_FALSE(query.ok());
  EXPECT_EQ(query.status().code(), StatusCode::kInternal) << query.status().to_string();
  EXPECT_FALSE(s->wait(0, Timeout::immediate()).ok());
  EXPECT_FALSE(s->signal(1).ok());
}

TEST_P(SemaphoreTest, ImmediateTimeout) {
  SemaphoreRef s = semaphore(3);
  CTS_EXPECT_OK(s->wait(2, Timeout::immediate()));
  CTS_EXPECT_OK(s->wait(3, Timeout::immediate()));
  CTS_EXPECT_CODE(kDeadlineExceeded, s->wait(4, Timeout::immediate()));
  // A deadline already in the past behaves the same.
  CTS_EXPECT_CODE(kDeadlineExceeded, s->wait(4, Timeout::at_ns(now_ns() - 1000)));
  CTS_EXPECT_OK(s->wait(3, Timeout::at_ns(0)));
  EXPECT_EQ(value_of(s), 3u);
}

TEST_P(SemaphoreTest, RelativeTimeoutExpires) {
  SemaphoreRef s = semaphore();
  int64_t start = now_ns();
  CTS_EXPECT_CODE(kDeadlineExceeded, s->wait(1, Timeout::after_ms(30)));
  EXPECT_GE(now_ns() - start, 30 * 1000000);
  start = now_ns();
  CTS_EXPECT_CODE(kDeadlineExceeded, s->wait(1, Timeout::after_ns(5 * 1000000)));
  EXPECT_GE(now_ns() - start, 5 * 1000000);
}

TEST_P(SemaphoreTest, AbsoluteTimeoutExpires) {
  SemaphoreRef s = semaphore();
  int64_t deadline = now_ns() + 30 * 1000000;
  CTS_EXPECT_CODE(kDeadlineExceeded, s->wait(1, Timeout::at_ns(deadline)));
  EXPECT_GE(now_ns(), deadline);
}

TEST_P(SemaphoreTest, InfiniteWaitWokenByAnotherThread) {
  SemaphoreRef s = semaphore();
  SemaphoreRef done = semaphore();
  auto result = std::make_shared<Status>(unknown_error("not set"));
  std::thread waiter([s, done, result] {
    *result = s->wait(7, Timeout::infinite());
    done->signal(1).ignore();
  });
  grace_sleep();
  CTS_EXPECT_CODE(kDeadlineExceeded, done->wait(1, Timeout::immediate()));
  CTS_EXPECT_OK(s->signal(7));
  Status finished = wait(done, 1);
  if (!finished.ok()) {
    ADD_FAILURE() << "infinite wait was not woken by signal: " << finished.to_string();
    s->fail(cancelled_error("release the waiter"));
  }
  waiter.join();
  CTS_EXPECT_OK(*result);
}

TEST_P(SemaphoreTest, ManyWaitersOnDifferentValues) {
  constexpr int kWaiters = 32;
  SemaphoreRef s = semaphore();
  std::vector<std::atomic<int>> returned(kWaiters);
  std::vector<Status> results(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    returned[i] = 0;
    threads.emplace_back([&, i] {
      results[i] = s->wait(i + 1, wait_timeout());
      returned[i] = 1;
    });
  }
  grace_sleep();
  CTS_EXPECT_OK(s->signal(kWaiters / 2));
  // The first half wakes; the second half must still be blocked.
  for (int i = 0; i < kWaiters / 2; ++i) {
    EXPECT_TRUE(eventually([&] { return returned[i].load() == 1; })) << "waiter " << i;
  }
  grace_sleep();
  for (int i = kWaiters / 2; i < kWaiters; ++i) {
    EXPECT_EQ(returned[i].load(), 0) << "waiter for " << i + 1 << " returned early";
  }
  CTS_EXPECT_OK(s->signal(kWaiters));
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kWaiters; ++i) CTS_EXPECT_OK(results[i]);
}

TEST_P(SemaphoreTest, ManyWaitersOneValue) {
  constexpr int kWaiters = 16;
  SemaphoreRef s = semaphore();
  std::vector<Status> results(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] { results[i] = s->wait(1, wait_timeout()); });
  }
  CTS_EXPECT_OK(s->signal(1));
  for (auto& thread : threads) thread.join();
  for (const Status& result : results) CTS_EXPECT_OK(result);
}

TEST_P(SemaphoreTest, ThreadPingPong) {
  constexpr uint64_t kIterations = 2000;
  SemaphoreRef ping = semaphore();
  SemaphoreRef pong = semaphore();
  Status other_status;
  std::thread other([&] {
    for (uint64_t i = 1; i <= kIterations; ++i) {
      Status s = ping->wait(i, wait_timeout());
      if (s.ok()) s = pong->signal(i);
      if (!s.ok()) {
        other_status = s;
        pong->fail(s);
        return;
      }
    }
  });
  for (uint64_t i = 1; i <= kIterations; ++i) {
    Status s = ping->signal(i);
    if (s.ok()) s = pong->wait(i, wait_timeout());
    if (!s.ok()) {
      ADD_FAILURE() << "iteration " << i << ": " << s.to_string();
      ping->fail(s);
      break;
    }
  }
  other.join();
  CTS_EXPECT_OK(other_status);
  EXPECT_EQ(value_of(ping), kIterations);
  EXPECT_EQ(value_of(pong), kIterations);
}

TEST_P(SemaphoreTest, BlockedWaitReturnsFailure) {
  SemaphoreRef s = semaphore();
  Status failure = data_loss_error("device lost");
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = s->wait(1 + i, wait_timeout()); });
  }
  grace_sleep();
  s->fail(failure);
  for (auto& thread : threads) thread.join();
  for (const Status& result : results) EXPECT_EQ(result, failure);
}

// ---------------------------------------------------------------------------------------------
// wait_semaphores.

TEST_P(SemaphoreTest, WaitAllAndAnyImmediate) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore();
  std::vector<SemaphoreValue> list = {{a, 1}, {b, 2}};
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAny, list, Timeout::immediate()));
  CTS_ASSERT_OK(a->signal(1));
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAny, list, Timeout::immediate()));
  CTS_ASSERT_OK(b->signal(1));
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
  CTS_ASSERT_OK(b->signal(2));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAny, list, Timeout::immediate()));
}

TEST_P(SemaphoreTest, WaitEmptyListIsSatisfied) {
  std::vector<SemaphoreValue> empty;
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAll, empty, Timeout::immediate()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAny, empty, Timeout::immediate()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAll, empty, wait_timeout()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAny, empty, wait_timeout()));
}

TEST_P(SemaphoreTest, WaitAllBlocksUntilEveryValue) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore();
  SemaphoreRef c = semaphore();
  std::vector<SemaphoreValue> list = {{a, 1}, {b, 1}, {c, 3}};
  std::atomic<bool> returned{false};
  Status result = unknown_error("not set");
  std::thread waiter([&] {
    result = wait_semaphores(WaitMode::kAll, list, wait_timeout());
    returned = true;
  });
  CTS_EXPECT_OK(a->signal(1));
  CTS_EXPECT_OK(c->signal(3));
  grace_sleep();
  EXPECT_FALSE(returned.load()) << "wait ALL returned before every value was reached";
  CTS_EXPECT_OK(b->signal(1));
  waiter.join();
  CTS_EXPECT_OK(result);
}

TEST_P(SemaphoreTest, WaitAnyReturnsWhenOneIsReached) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore();
  std::vector<SemaphoreValue> list = {{a, 5}, {b, 1}};
  std::atomic<bool> returned{false};
  Status result = unknown_error("not set");
  std::thread waiter([&] {
    result = wait_semaphores(WaitMode::kAny, list, wait_timeout());
    returned = true;
  });
  CTS_EXPECT_OK(a->signal(4));  // not enough
  grace_sleep();
  EXPECT_FALSE(returned.load()) << "wait ANY returned before any value was reached";
  CTS_EXPECT_OK(b->signal(1));
  waiter.join();
  CTS_EXPECT_OK(result);
  EXPECT_EQ(value_of(a), 4u);
}

TEST_P(SemaphoreTest, WaitSameSemaphoreTwice) {
  SemaphoreRef s = semaphore();
  std::vector<SemaphoreValue> list = {{s, 1}, {s, 3}};
  CTS_ASSERT_OK(s->signal(2));
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAny, list, Timeout::immediate()));
  CTS_ASSERT_OK(s->signal(3));
  CTS_EXPECT_OK(wait_semaphores(WaitMode::kAll, list, Timeout::immediate()));
}

TEST_P(SemaphoreTest, WaitMultipleTimesOut) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore(1);
  std::vector<SemaphoreValue> list = {{a, 1}, {b, 2}};
  int64_t start = now_ns();
  CTS_EXPECT_CODE(kDeadlineExceeded, wait_semaphores(WaitMode::kAny, list, Timeout::after_ms(20)));
  EXPECT_GE(now_ns() - start, 20 * 1000000);
  int64_t deadline = now_ns() + 20 * 1000000;
  CTS_EXPECT_CODE(kDeadlineExceeded,
                  wait_semaphores(WaitMode::kAll, list, Timeout::at_ns(deadline)));
  EXPECT_GE(now_ns(), deadline);
}

TEST_P(SemaphoreTest, WaitMultipleFailure) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore();
  std::vector<SemaphoreValue> list = {{a, 1}, {b, 1}};
  Status failure = aborted_error("b failed");
  b->fail(failure);
  EXPECT_EQ(wait_semaphores(WaitMode::kAll, list, Timeout::immediate()), failure);
  EXPECT_EQ(wait_semaphores(WaitMode::kAll, list, wait_timeout()), failure);
  EXPECT_EQ(wait_semaphores(WaitMode::kAny, list, wait_timeout()), failure);
}

TEST_P(SemaphoreTest, BlockedWaitMultipleReturnsFailure) {
  for (WaitMode mode : {WaitMode::kAll, WaitMode::kAny}) {
    SCOPED_TRACE(mode == WaitMode::kAll ? "all" : "any");
    SemaphoreRef a = semaphore();
    SemaphoreRef b = semaphore();
    std::vector<SemaphoreValue> list = {{a, 1}, {b, 1}};
    Status failure = internal_error("a failed while waited on");
    Status result;
    std::thread waiter([&] { result = wait_semaphores(mode, list, wait_timeout()); });
    grace_sleep();
    a->fail(failure);
    waiter.join();
    EXPECT_EQ(result, failure);
  }
}

TEST_P(SemaphoreTest, SignalAndFailLists) {
  SemaphoreRef a = semaphore();
  SemaphoreRef b = semaphore(5);
  std::vector<SemaphoreValue> list = {{a, 2}, {b, 6}};
  CTS_EXPECT_OK(hal::signal_semaphores(list));
  EXPECT_EQ(value_of(a), 2u);
  EXPECT_EQ(value_of(b), 6u);
  CTS_EXPECT_CODE(kInvalidArgument, hal::signal_semaphores(list));  // not above
  Status failure = cancelled_error("cancelled list");
  hal::fail_semaphores(list, failure);
  EXPECT_EQ(a->query().status(), failure);
  EXPECT_EQ(b->query().status(), failure);
}

// ---------------------------------------------------------------------------------------------
// Timepoints.

struct TimepointRecord {
  std::atomic<int> calls{0};
  Status status = unknown_error("not called");
};

void record_timepoint(Timepoint* tp, const Status& status) {
  auto* record = static_cast<TimepointRecord*>(tp->user);
  record->status = status;
  record->calls.fetch_add(1);
}

TEST_P(SemaphoreTest, TimepointFiresOnceAtValue) {
  SemaphoreRef s = semaphore();
  TimepointRecord record;
  Timepoint tp;
  tp.fn = record_timepoint;
  tp.value = 2;
  tp.user = &record;
  s->add_timepoint(&tp);
  EXPECT_EQ(record.calls.load(), 0);
  CTS_ASSERT_OK(s->signal(1));
  EXPECT_EQ(record.calls.load(), 0);
  CTS_ASSERT_OK(s->signal(3));
  EXPECT_EQ(record.calls.load(), 1);
  CTS_EXPECT_OK(record.status);
  CTS_ASSERT_OK(s->signal(4));
  s->fail(aborted_error("late failure"));
  EXPECT_EQ(record.calls.load(), 1);
  EXPECT_FALSE(s->cancel_timepoint(&tp));
}

TEST_P(SemaphoreTest, TimepointInlineWhenReached) {
  SemaphoreRef s = semaphore(5);
  TimepointRecord record;
  Timepoint tp;
  tp.fn = record_timepoint;
  tp.value = 5;
  tp.user = &record;
  s->add_timepoint(&tp);
  EXPECT_EQ(record.calls.load(), 1);
  CTS_EXPECT_OK(record.status);
  CTS_ASSERT_OK(s->signal(6));
  EXPECT_EQ(record.calls.load(), 1);
}

TEST_P(SemaphoreTest, TimepointInlineWhenFailed) {
  SemaphoreRef s = semaphore(5);
  Status failure = aborted_error("already failed");
  s->fail(failure);
  TimepointRecord record;
  Timepoint tp;
  tp.fn = record_timepoint;
  tp.value = 1;  // reached before the failure; the failure still wins
  tp.user = &record;
  s->add_timepoint(&tp);
  EXPECT_EQ(record.calls.load(), 1);
  EXPECT_FALSE(record.status.ok());
}

TEST_P(SemaphoreTest, TimepointRunsWithFailure) {
  SemaphoreRef s = semaphore();
  TimepointRecord records[3];
  Timepoint tps[3];
  for (int i = 0; i < 3; ++i) {
    tps[i].fn = record_timepoint;
    tps[i].value = 10 + i;
    tps[i].user = &records[i];
    s->add_timepoint(&tps[i]);
  }
  Status failure = data_loss_error("failed with pending timepoints");
  s->fail(failure);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].calls.load(), 1);
    EXPECT_EQ(records[i].status, failure);
  }
}

TEST_P(SemaphoreTest, CancelTimepointBeforeItFires) {
  SemaphoreRef s = semaphore();
  TimepointRecord cancelled, kept;
  Timepoint tp_cancelled, tp_kept;
  tp_cancelled.fn = tp_kept.fn = record_timepoint;
  tp_cancelled.value = tp_kept.value = 1;
  tp_cancelled.user = &cancelled;
  tp_kept.user = &kept;
  s->add_timepoint(&tp_cancelled);
  s->add_timepoint(&tp_kept);
  EXPECT_TRUE(s->cancel_timepoint(&tp_cancelled));
  CTS_ASSERT_OK(s->signal(1));
  s->fail(aborted_error("after"));
  EXPECT_EQ(cancelled.calls.load(), 0);
  EXPECT_EQ(kept.calls.load(), 1);
  EXPECT_FALSE(s->cancel_timepoint(&tp_kept));
}

TEST_P(SemaphoreTest, ManyTimepointsAtDifferentValues) {
  constexpr int kCount = 64;
  SemaphoreRef s = semaphore();
  std::vector<TimepointRecord> records(kCount);
  std::vector<Timepoint> tps(kCount);
  for (int i = 0; i < kCount; ++i) {
    tps[i].fn = record_timepoint;
    tps[i].value = static_cast<uint64_t>(kCount - i);  // registered in descending order
    tps[i].user = &records[i];
    s->add_timepoint(&tps[i]);
  }
  CTS_ASSERT_OK(s->signal(kCount / 2));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(records[i].calls.load(), tps[i].value <= kCount / 2 ? 1 : 0) << i;
  }
  CTS_ASSERT_OK(s->signal(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(records[i].calls.load(), 1) << i;
}

// Timepoints run outside the semaphore's lock: the callback may use the semaphore.
struct ReentrantTimepoint {
  Timepoint tp;
  SemaphoreRef semaphore;
  std::atomic<int> calls{0};
  uint64_t seen = 0;
  Status signal_status = unknown_error("not run");
};

void reenter(Timepoint* tp, const Status& status) {
  auto* self = static_cast<ReentrantTimepoint*>(tp->user);
  auto value = self->semaphore->query();
  self->seen = value.ok() ? *value : 0;
  self->signal_status = self->semaphore->signal(self->seen + 1);
  self->calls.fetch_add(1);
}

TEST_P(SemaphoreTest, TimepointCallbackMayUseTheSemaphore) {
  auto state = std::make_shared<ReentrantTimepoint>();
  state->semaphore = semaphore();
  state->tp.fn = reenter;
  state->tp.value = 1;
  state->tp.user = state.get();
  bool finished = run_bounded([state] {
    state->semaphore->add_timepoint(&state->tp);
    state->semaphore->signal(1).ignore();
  });
  ASSERT_TRUE(finished) << "signal deadlocked: the timepoint ran under the semaphore's lock";
  EXPECT_EQ(state->calls.load(), 1);
  EXPECT_EQ(state->seen, 1u);
  CTS_EXPECT_OK(state->signal_status);
  EXPECT_EQ(value_of(state->semaphore), 2u);
}

TEST_P(SemaphoreTest, TimepointsFromManyThreads) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  SemaphoreRef s = semaphore();
  std::vector<TimepointRecord> records(kThreads * kPerThread);
  std::vector<Timepoint> tps(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int k = t * kPerThread + i;
        tps[k].fn = record_timepoint;
        tps[k].value = 1 + i;
        tps[k].user = &records[k];
        s->add_timepoint(&tps[k]);
      }
    });
  }
  std::thread signaller([&] {
    for (uint64_t v = 1; v <= kPerThread; ++v) s->signal(v).ignore();
  });
  for (auto& thread : threads) thread.join();
  signaller.join();
  for (size_t k = 0; k < records.size(); ++k) {
    EXPECT_EQ(records[k].calls.load(), 1) << k;
    CTS_EXPECT_OK(records[k].status);
  }
}

}  // namespace
}  // namespace kiln::cts
