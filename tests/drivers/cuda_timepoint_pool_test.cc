// The CUDA timepoint pool with real hal::Semaphores and counting EventOps (no GPU): records come
// back and are reused, host waits fire in value order and get a semaphore's failure, device
// records hold their pooled event until the value is reached, cancel returns a record exactly
// once (also racing a signal, and through a handle whose record was reused), and shutdown reports
// records still registered.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "drivers/cuda/cu_timepoint_pool.h"
#include "drivers/cuda_test_events.h"

namespace kiln {
namespace {

using cuda::EventPool;
using cuda::EventRef;
using cuda::TimepointHandle;
using cuda::TimepointPool;
using hal::Semaphore;

// What host-wait callbacks saw.
struct Fired {
  std::mutex mutex;
  std::vector<uint64_t> values;  // the `user` tag of each callback, in order
  std::vector<Status> statuses;

  static void record(void* user, const Status& status);
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return values.size();
  }
};

// The tag and the Fired it reports to; lives as long as the test.
struct Tag {
  Fired* fired;
  uint64_t value;
};

void Fired::record(void* user, const Status& status) {
  auto* tag = static_cast<Tag*>(user);
  std::lock_guard<std::mutex> lock(tag->fired->mutex);
  tag->fired->values.push_back(tag->value);
  tag->fired->statuses.push_back(status);
}

TimepointHandle must(Result<TimepointHandle> handle) {
  EXPECT_TRUE(handle.ok()) << handle.status();
  return handle.ok() ? *handle : TimepointHandle();
}

class CudaTimepointPoolTest : public ::testing::Test {
 protected:
  // A host wait on s_ at `value` that reports `tag` to fired_.
  Result<TimepointHandle> try_wait(TimepointPool& pool, uint64_t value, uint64_t tag) {
    tags_.push_back(Tag{&fired_, tag});
    return pool.add_host_wait(s_, value, Fired::record, &tags_.back());
  }
  TimepointHandle wait(TimepointPool& pool, uint64_t value, uint64_t tag = 0) {
    return must(try_wait(pool, value, tag));
  }
  void signal(uint64_t value) {
    Status status = s_->signal(value);
    EXPECT_TRUE(status.ok()) << status;
  }

  std::shared_ptr<Semaphore> s_ = Semaphore::create(0);
  Fired fired_;
  std::deque<Tag> tags_;  // deque: the callbacks keep pointers to its elements
};

TEST_F(CudaTimepointPoolTest, HostWaitFiresAtItsValueAndReturnsTheRecord) {
  TimepointPool pool(2, 2);
  wait(pool, 2, 7);
  EXPECT_EQ(pool.outstanding(), 1u);
  signal(1);
  EXPECT_EQ(fired_.count(), 0u);
  signal(2);
  ASSERT_EQ(fired_.count(), 1u);
  EXPECT_EQ(fired_.values[0], 7u);
  EXPECT_TRUE(fired_.statuses[0].ok()) << fired_.statuses[0];
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(pool.available(), 2u);
  signal(3);
  EXPECT_EQ(fired_.count(), 1u) << "fired twice";
}

TEST_F(CudaTimepointPoolTest, RecordsAreReusedWithoutGrowing) {
  TimepointPool pool(2, 2);
  Tag tag{&fired_, 0};
  for (uint64_t v = 1; v <= 100; ++v) {
    // Straight to the pool: the fixture's wait() would grow tags_ each time.
    must(pool.add_host_wait(s_, v, Fired::record, &tag));
    must(pool.add_host_wait(s_, v, Fired::record, &tag));
    signal(v);
  }
  EXPECT_EQ(fired_.count(), 200u);
  EXPECT_EQ(pool.capacity(), 2u);
  EXPECT_EQ(pool.available(), 2u);
}

TEST_F(CudaTimepointPoolTest, EmptyPoolGrowsByABatch) {
  TimepointPool pool(1, 4);
  wait(pool, 1);
  EXPECT_EQ(pool.capacity(), 1u);
  wait(pool, 1);
  EXPECT_EQ(pool.capacity(), 5u);
  EXPECT_EQ(pool.outstanding(), 2u);
  signal(1);
  EXPECT_EQ(pool.available(), 5u);
}

TEST_F(CudaTimepointPoolTest, HostWaitsFireInValueOrder) {
  TimepointPool pool(0, 1);
  for (uint64_t v : {3, 1, 5, 2, 4}) wait(pool, v, v);
  for (uint64_t v = 1; v <= 5; ++v) {
    signal(v);
    EXPECT_EQ(fired_.count(), v);
  }
  EXPECT_EQ(fired_.values, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST_F(CudaTimepointPoolTest, ReachedValueFiresInline) {
  TimepointPool pool(1, 1);
  signal(5);
  TimepointHandle handle = wait(pool, 5);
  EXPECT_EQ(fired_.count(), 1u);
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_FALSE(pool.cancel(handle));
  EXPECT_EQ(pool.available(), 1u);
}

TEST_F(CudaTimepointPoolTest, FailureReachesTheHostWaitOnce) {
  TimepointPool pool(2, 2);
  TimepointHandle first = wait(pool, 1);
  wait(pool, 2);
  s_->fail(data_loss_error("device lost"));
  ASSERT_EQ(fired_.count(), 2u);
  for (const Status& status : fired_.statuses) {
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
    EXPECT_EQ(status.message(), "device lost");
  }
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(pool.available(), 2u) << "each record returns exactly once";
  EXPECT_FALSE(pool.cancel(first));
  EXPECT_EQ(pool.available(), 2u);
  // A wait added after the failure gets it at once.
  wait(pool, 3);
  ASSERT_EQ(fired_.count(), 3u);
  EXPECT_EQ(fired_.statuses[2].code(), StatusCode::kDataLoss);
  EXPECT_EQ(pool.available(), 2u);
}

TEST_F(CudaTimepointPoolTest, CancelReturnsAnUnfiredRecordOnce) {
  TimepointPool pool(1, 1);
  TimepointHandle handle = wait(pool, 4);
  EXPECT_EQ(pool.outstanding(), 1u);
  EXPECT_TRUE(pool.cancel(handle));
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_FALSE(pool.cancel(handle));
  EXPECT_EQ(pool.available(), 1u);
  signal(4);
  EXPECT_EQ(fired_.count(), 0u) << "a cancelled wait ran";
  EXPECT_FALSE(pool.cancel(TimepointHandle()));
}

TEST_F(CudaTimepointPoolTest, StaleHandleDoesNotCancelTheRecordsNextUse) {
  TimepointPool pool(1, 1);
  TimepointHandle old = wait(pool, 1, 1);
  signal(1);
  TimepointHandle current = wait(pool, 5, 5);
  ASSERT_EQ(current.record, old.record) << "the one record is reused";
  EXPECT_FALSE(pool.cancel(old));
  EXPECT_EQ(pool.outstanding(), 1u);
  signal(5);
  EXPECT_EQ(fired_.values, (std::vector<uint64_t>{1, 5}));
}

TEST_F(CudaTimepointPoolTest, DeviceRecordsHoldTheirEventUntilTheValue) {
  test::CountingEvents counter;
  Result<std::unique_ptr<EventPool>> events = EventPool::create(counter.ops(), 2, 2);
  ASSERT_TRUE(events.ok()) << events.status();
  TimepointPool pool(2, 2);
  {
    Result<EventRef> event = (*events)->acquire();
    ASSERT_TRUE(event.ok());
    // A signal at 3, and a wait for 2 on another stream sharing the signal's event.
    TimepointHandle signaller = must(pool.add_device_signal(s_, 3, *event));
    TimepointHandle waiter = must(pool.add_device_wait(s_, 2, *event));
    EXPECT_EQ(signaller.record->kind, cuda::TimepointKind::kDeviceSignal);
    EXPECT_EQ(waiter.record->kind, cuda::TimepointKind::kDeviceWait);
    EXPECT_EQ(signaller.record->event.get(), event->get());
    EXPECT_EQ(signaller.record->value(), 3u);
  }
  EXPECT_EQ((*events)->outstanding(), 1u);
  signal(2);
  EXPECT_EQ(pool.outstanding(), 1u);
  EXPECT_EQ((*events)->outstanding(), 1u) << "the signal's record still holds the event";
  signal(3);
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ((*events)->outstanding(), 0u);
  // A failure returns device records and their events too.
  Result<EventRef> event = (*events)->acquire();
  ASSERT_TRUE(event.ok());
  must(pool.add_device_signal(s_, 10, std::move(*event)));
  s_->fail(internal_error("stream failed"));
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ((*events)->outstanding(), 0u);
  EXPECT_EQ(counter.created(), 2u);
}

TEST_F(CudaTimepointPoolTest, RefusesIncompleteRequests) {
  TimepointPool pool(1, 1);
  Tag tag{&fired_, 0};
  EXPECT_EQ(pool.add_host_wait(nullptr, 1, Fired::record, &tag).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_host_wait(s_, 1, nullptr, &tag).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_device_signal(s_, 1, EventRef()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_device_wait(s_, 1, EventRef()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST_F(CudaTimepointPoolTest, ShutdownReportsRegisteredRecords) {
  TimepointPool pool(2, 2);
  TimepointHandle handle = wait(pool, 1);
  Status early = pool.shutdown();
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition) << early;
  EXPECT_NE(early.message().find("1 timepoints are still registered"), std::string::npos) << early;
  wait(pool, 1);  // still open
  ASSERT_TRUE(pool.cancel(handle));
  signal(1);
  EXPECT_TRUE(pool.shutdown().ok());
  EXPECT_EQ(try_wait(pool, 2, 0).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fired_.count(), 1u);
}

TEST_F(CudaTimepointPoolTest, CancelRacingSignalsReturnsEachRecordOnce) {
  // Adders register waits at values just ahead of a signalling thread and cancel half of them at
  // once: every wait either ran its callback or was cancelled, never both, never neither.
  TimepointPool pool(8, 8);
  std::atomic<uint64_t> ran{0}, cancelled{0}, added{0};
  std::atomic<bool> adders_done{false};
  auto count_ran = [](void* user, const Status&) {
    static_cast<std::atomic<uint64_t>*>(user)->fetch_add(1);
  };
  std::thread signaller([&] {
    uint64_t value = 0;
    while (!adders_done.load()) {
      if (!s_->signal(++value).ok()) return;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> adders;
  for (int t = 0; t < 3; ++t) {
    adders.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        Result<uint64_t> now = s_->query();
        if (!now.ok()) return;
        Result<TimepointHandle> handle = pool.add_host_wait(s_, *now + 1 + (i % 3), count_ran, &ran);
        if (!handle.ok()) return;
        added.fetch_add(1);
        if ((i + t) % 2 == 0 && pool.cancel(*handle)) cancelled.fetch_add(1);
      }
    });
  }
  for (std::thread& t : adders) t.join();
  adders_done.store(true);
  signaller.join();
  Result<uint64_t> last = s_->query();
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(s_->signal(*last + 10).ok());  // reaches every wait still registered
  EXPECT_EQ(added.load(), 9000u);
  EXPECT_EQ(ran.load() + cancelled.load(), added.load());
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_TRUE(pool.shutdown().ok());
}

}  // namespace
}  // namespace kiln
