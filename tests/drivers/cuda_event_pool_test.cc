// The CUDA event pool with counting EventOps (no GPU): events made up front and in batches,
// reused rather than remade, counted references, failed batches, shutdown with events out, and
// no event held by two acquirers at once under contention.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "drivers/cuda/cu_event_pool.h"
#include "drivers/cuda_test_events.h"

namespace kiln {
namespace {

using cuda::EventPool;
using cuda::EventRef;
using test::CountingEvents;

class CudaEventPoolTest : public ::testing::Test {
 protected:
  // Makes pool_ over counter_'s ops; false (and a failure) if it cannot.
  bool make(size_t initial, size_t batch) {
    Result<std::unique_ptr<EventPool>> pool = EventPool::create(counter_.ops(), initial, batch);
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (pool.ok()) pool_ = std::move(*pool);
    return pool.ok();
  }
  EventRef acquire() {
    Result<EventRef> event = pool_->acquire();
    EXPECT_TRUE(event.ok()) << event.status();
    return event.ok() ? std::move(*event) : EventRef();
  }
  // Every event made was destroyed exactly once, `made` of them.
  void expect_all_destroyed(uint64_t made) {
    EXPECT_EQ(counter_.created(), made);
    EXPECT_EQ(counter_.destroyed(), made);
    EXPECT_EQ(counter_.bad_destroys, 0u);
  }

  CountingEvents counter_;
  std::unique_ptr<EventPool> pool_;
};

TEST_F(CudaEventPoolTest, PrefilledEventsAreReused) {
  ASSERT_TRUE(make(4, 2));
  EXPECT_EQ(counter_.created(), 4u);
  EXPECT_EQ(pool_->created(), 4u);
  EXPECT_EQ(pool_->available(), 4u);
  std::set<cuda::CUevent> first;
  for (int round = 0; round < 10; ++round) {
    std::vector<EventRef> held;
    for (int i = 0; i < 4; ++i) held.push_back(acquire());
    std::set<cuda::CUevent> seen;
    for (const EventRef& e : held) seen.insert(e.get());
    EXPECT_EQ(seen.size(), 4u) << "an event was handed out twice";
    if (round == 0) first = seen;
    EXPECT_EQ(seen, first) << "round " << round << " got events the pool did not make up front";
    EXPECT_EQ(pool_->outstanding(), 4u);
  }
  EXPECT_EQ(counter_.created(), 4u);
  EXPECT_EQ(counter_.destroyed(), 0u);
  EXPECT_EQ(pool_->available(), 4u);
}

TEST_F(CudaEventPoolTest, EmptyPoolGrowsByABatch) {
  ASSERT_TRUE(make(1, 3));
  EventRef a = acquire();
  EXPECT_EQ(counter_.created(), 1u);
  EventRef b = acquire();
  EXPECT_EQ(counter_.created(), 4u);
  EXPECT_EQ(pool_->created(), 4u);
  EXPECT_EQ(pool_->available(), 2u);
  EXPECT_NE(a.get(), b.get());
}

TEST_F(CudaEventPoolTest, LastReferenceReturnsTheEvent) {
  ASSERT_TRUE(make(2, 2));
  EventRef a = acquire();
  cuda::CUevent event = a.get();
  EventRef copy = a;
  EventRef assigned;
  assigned = copy;
  EXPECT_EQ(copy.get(), event);
  EXPECT_EQ(assigned.get(), event);
  a.reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(pool_->outstanding(), 1u);
  copy = EventRef();
  EXPECT_EQ(pool_->outstanding(), 1u);
  EventRef moved = std::move(assigned);
  EXPECT_FALSE(assigned);  // NOLINT(bugprone-use-after-move): a moved-from ref is empty
  EXPECT_EQ(pool_->outstanding(), 1u);
  moved.reset();
  EXPECT_EQ(pool_->outstanding(), 0u);
  EXPECT_EQ(pool_->available(), 2u);
}

TEST_F(CudaEventPoolTest, FailedBatchMakesNothing) {
  counter_.fail_at = 3;  // the second event of the first growth
  ASSERT_TRUE(make(2, 4));
  EventRef a = acquire(), b = acquire();
  Result<EventRef> c = pool_->acquire();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cuEventCreate"), std::string::npos) << c.status();
  EXPECT_EQ(counter_.created(), 3u);
  EXPECT_EQ(counter_.destroyed(), 1u) << "the batch's first event must be destroyed again";
  EXPECT_EQ(pool_->created(), 2u);
  // The next try makes a whole batch.
  EventRef d = acquire();
  EXPECT_TRUE(d);
  EXPECT_EQ(pool_->created(), 6u);
}

TEST_F(CudaEventPoolTest, FailedPrefillDestroysWhatItMade) {
  counter_.fail_at = 2;
  Result<std::unique_ptr<EventPool>> pool = EventPool::create(counter_.ops(), 5, 5);
  ASSERT_FALSE(pool.ok());
  expect_all_destroyed(2);
  cuda::EventOps none;
  EXPECT_EQ(EventPool::create(none, 1, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CudaEventPoolTest, ShutdownWaitsForEveryReference) {
  ASSERT_TRUE(make(3, 1));
  EventRef held = acquire();
  Status early = pool_->shutdown();
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition) << early;
  EXPECT_NE(early.message().find("1 of 3 events are still referenced"), std::string::npos) << early;
  EXPECT_EQ(counter_.destroyed(), 0u);
  EventRef again = acquire();  // still open
  held.reset();
  again.reset();
  EXPECT_TRUE(pool_->shutdown().ok());
  EXPECT_EQ(counter_.destroyed(), 3u);
  EXPECT_EQ(pool_->acquire().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(pool_->shutdown().ok());
  pool_.reset();  // the destructor destroys nothing twice
  expect_all_destroyed(3);
}

TEST_F(CudaEventPoolTest, DestructorDestroysEveryEvent) {
  ASSERT_TRUE(make(2, 2));
  for (int i = 0; i < 5; ++i) acquire();  // dropped at once
  {
    std::vector<EventRef> held;
    for (int i = 0; i < 5; ++i) held.push_back(acquire());
  }
  pool_.reset();
  expect_all_destroyed(6);
}

TEST_F(CudaEventPoolTest, ConcurrentHoldersNeverShareAnEvent) {
  ASSERT_TRUE(make(4, 4));
  // One flag per fake handle: set while some thread holds the event through its first reference.
  constexpr size_t kMaxEvents = 4096;
  std::vector<std::atomic<int>> holders(kMaxEvents);
  std::atomic<int> doubles{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Result<EventRef> event = pool_->acquire();
        if (!event.ok()) {
          failures.fetch_add(1);
          continue;
        }
        auto handle = reinterpret_cast<uintptr_t>(event->get());
        if (handle >= kMaxEvents) {
          failures.fetch_add(1);
          continue;
        }
        // Held from acquire until the last reference (a copy outliving the first) goes.
        if (holders[handle].fetch_add(1) != 0) doubles.fetch_add(1);
        EventRef copy = *event;
        event->reset();
        holders[handle].fetch_sub(1);
        copy.reset();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(doubles.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(pool_->outstanding(), 0u);
  EXPECT_LE(pool_->created(), 8u) << "four threads hold at most four events at once";
  EXPECT_TRUE(pool_->shutdown().ok());
  EXPECT_EQ(counter_.destroyed(), counter_.created());
}

}  // namespace
}  // namespace kiln
