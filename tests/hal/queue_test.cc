// CTS: queue operations with wait and signal lists, ordering by semaphores, dependencies across
// queues, no head-of-line blocking, host calls (also deferred) and what the queue keeps alive.
#include <cstring>
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

using hal::Buffer;

class QueueTest : public CtsTest {};
KILN_CTS_INSTANTIATE(QueueTest);

// ---------------------------------------------------------------------------------------------
// Each operation waits for its wait list and signals its signal list.

TEST_P(QueueTest, CopyWaitsAndSignals) {
  std::vector<uint8_t> bytes = pattern_bytes(256, 1);
  BufferRef source = make_buffer(bytes);
  BufferRef target = make_buffer(256, 0xEE);
  SemaphoreRef gate = semaphore(), done = semaphore(2);
  CTS_ASSERT_OK(queue_->copy({{gate, 1}}, {{done, 5}}, source, 0, target, 0, 256));
  grace_sleep();
  EXPECT_EQ(value_of(done), 2u);
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(256, 0xEE));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 5));
  EXPECT_EQ(value_of(done), 5u);
  EXPECT_EQ(read_bytes(target), bytes);
}

TEST_P(QueueTest, FillWaitsAndSignals) {
  const uint8_t pattern[4] = {0xA1, 0xB2, 0xC3, 0xD4};
  for (size_t pattern_size : {1, 2, 4}) {
    SCOPED_TRACE(pattern_size);
    BufferRef target = make_buffer(64, 0xEE);
    SemaphoreRef gate = semaphore(), done = semaphore();
    CTS_ASSERT_OK(queue_->fill({{gate, 1}}, {{done, 1}}, target, 8, 48, pattern, pattern_size));
    grace_sleep();
    EXPECT_EQ(value_of(done), 0u);
    EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(64, 0xEE));
    CTS_ASSERT_OK(gate->signal(1));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint8_t> expected(64, 0xEE);
    for (size_t i = 0; i < 48; ++i) expected[8 + i] = pattern[i % pattern_size];
    EXPECT_EQ(read_bytes(target), expected);
  }
}

TEST_P(QueueTest, UpdateCapturesHostBytesAtTheCall) {
  std::vector<uint8_t> original = pattern_bytes(100, 2);
  std::vector<uint8_t> source = original;
  BufferRef target = make_buffer(128, 0xEE);
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->update({{gate, 1}}, {{done, 1}}, source.data(), target, 3, 100));
  // The caller may reuse its memory at once.
  std::fill(source.begin(), source.end(), 0x55);
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(128, 0xEE));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(128, 0xEE);
  std::copy(original.begin(), original.end(), expected.begin() + 3);
  EXPECT_EQ(read_bytes(target), expected);
}

TEST_P(QueueTest, ReadWaitsAndSignals) {
  std::vector<uint8_t> bytes = pattern_bytes(200, 3);
  BufferRef source = make_buffer(bytes);
  std::vector<uint8_t> host(64, 0xEE);
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->read({{gate, 1}}, {{done, 1}}, source, 17, host.data() + 4, 50));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(host, std::vector<uint8_t>(64, 0xEE));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(64, 0xEE);
  std::copy(bytes.begin() + 17, bytes.begin() + 67, expected.begin() + 4);
  EXPECT_EQ(host, expected);
}

TEST_P(QueueTest, WriteReadsHostBytesWhenItRuns) {
  std::vector<uint8_t> host = pattern_bytes(80, 4);
  BufferRef target = make_buffer(96, 0xEE);
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->write({{gate, 1}}, {{done, 1}}, host.data(), target, 16, 80));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(96, 0xEE));
  // Unlike update, write reads the host memory when it runs: this change is what lands.
  std::vector<uint8_t> changed = pattern_bytes(80, 5);
  host = changed;
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(96, 0xEE);
  std::copy(changed.begin(), changed.end(), expected.begin() + 16);
  EXPECT_EQ(read_bytes(target), expected);
}

TEST_P(QueueTest, DispatchWaitsAndSignals) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(64, 7));
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({{gate, 1}}, {{done, 1}},
                                 make_dispatch(kAddConstant, {8, 1, 1}, {3, 8}, {{data}})));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 7));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 10));
}

TEST_P(QueueTest, ExecuteWaitsAndSignals) {
  BufferRef target = make_buffer(32, 0xEE);
  auto command_buffer = device().create_command_buffer();
  uint8_t pattern = 0x42;
  CTS_ASSERT_OK(command_buffer->fill(target, 0, 16, &pattern, 1));
  CTS_ASSERT_OK(command_buffer->finalize());
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->execute({{gate, 1}}, {{done, 1}}, command_buffer));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(32, 0xEE));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(32, 0xEE);
  std::fill(expected.begin(), expected.begin() + 16, 0x42);
  EXPECT_EQ(read_bytes(target), expected);
}

TEST_P(QueueTest, HostCallWaitsAndSignals) {
  SemaphoreRef gate = semaphore(), done = semaphore(), other = semaphore(10);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto seen = std::make_shared<SemaphoreList>();
  CTS_ASSERT_OK(queue_->host_call({{gate, 1}}, {{done, 1}, {other, 12}},
                                  [runs, seen](const SemaphoreList& signals) {
                                    *seen = signals;
                                    runs->fetch_add(1);
                                    return Status();
                                  }));
  grace_sleep();
  EXPECT_EQ(runs->load(), 0);
  EXPECT_EQ(value_of(done), 0u);
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  CTS_ASSERT_OK(wait(other, 12));
  EXPECT_EQ(runs->load(), 1);
  ASSERT_EQ(seen->size(), 2u);
  EXPECT_EQ((*seen)[0].semaphore, done);
  EXPECT_EQ((*seen)[0].value, 1u);
  EXPECT_EQ((*seen)[1].semaphore, other);
  EXPECT_EQ((*seen)[1].value, 12u);
}

TEST_P(QueueTest, BarrierWaitsAndSignals) {
  SemaphoreRef a = semaphore(), b = semaphore(), done = semaphore(), done2 = semaphore();
  CTS_ASSERT_OK(queue_->barrier({{a, 1}, {b, 2}}, {{done, 1}, {done2, 3}}));
  CTS_ASSERT_OK(b->signal(2));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  CTS_ASSERT_OK(a->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  CTS_ASSERT_OK(wait(done2, 3));
}

TEST_P(QueueTest, EmptyListsRunAtOnce) {
  BufferRef target = make_buffer(8, 0);
  uint8_t pattern = 9;
  CTS_ASSERT_OK(queue_->fill({}, {}, target, 0, 8, &pattern, 1));
  CTS_ASSERT_OK(queue_->barrier({}, {}));
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->barrier({}, {{done, 1}}));
  CTS_ASSERT_OK(wait(done, 1));
  // Waits already met at submission.
  SemaphoreRef reached = semaphore(3);
  CTS_ASSERT_OK(queue_->barrier({{reached, 2}, {reached, 3}}, {{done, 2}}));
  CTS_ASSERT_OK(wait(done, 2));
}

TEST_P(QueueTest, GenericSubmit) {
  BufferRef target = make_buffer(16, 0);
  uint16_t pattern = 0xBEEF;
  auto fill = hal::make_fill(target, 4, 8, &pattern, 2);
  ASSERT_TRUE(fill.ok()) << fill.status().to_string();
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->submit(*fill, {}, {{done, 1}}));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(16, 0);
  for (size_t i = 4; i < 12; i += 2) std::memcpy(&expected[i], &pattern, 2);
  EXPECT_EQ(read_bytes(target), expected);
}

// ---------------------------------------------------------------------------------------------
// Ordering and dependencies.

TEST_P(QueueTest, WaitsOnSeveralHostSignals) {
  SemaphoreRef a = semaphore(), b = semaphore(), c = semaphore(), done = semaphore();
  auto log = std::make_shared<OrderLog>();
  CTS_ASSERT_OK(queue_->host_call({{a, 1}, {b, 1}, {c, 4}}, {{done, 1}}, [log](const auto&) {
    log->add(1);
    return Status();
  }));
  CTS_ASSERT_OK(c->signal(4));
  CTS_ASSERT_OK(a->signal(1));
  grace_sleep();
  EXPECT_EQ(log->size(), 0u);
  CTS_ASSERT_OK(b->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(log->entries(), std::vector<int>{1});
}

TEST_P(QueueTest, HostCallsRunInSemaphoreOrder) {
  constexpr int kCount = 20;
  SemaphoreRef timeline = semaphore();
  auto log = std::make_shared<OrderLog>();
  // Submitted last-first on alternating queues; the timeline alone orders them.
  for (int i = kCount - 1; i >= 0; --i) {
    hal::Queue& queue = (i % 2) ? *queue2_ : *queue_;
    CTS_ASSERT_OK(queue.host_call({{timeline, uint64_t(i + 1)}}, {{timeline, uint64_t(i + 2)}},
                                  [log, i](const auto&) {
                                    log->add(i);
                                    return Status();
                                  }));
  }
  grace_sleep();
  EXPECT_EQ(log->size(), 0u);
  CTS_ASSERT_OK(timeline->signal(1));
  CTS_ASSERT_OK(wait(timeline, kCount + 1));
  std::vector<int> expected(kCount);
  for (int i = 0; i < kCount; ++i) expected[i] = i;
  EXPECT_EQ(log->entries(), expected);
}

TEST_P(QueueTest, ChainOfTransfersAcrossQueues) {
  std::vector<uint8_t> bytes = pattern_bytes(1024, 6);
  BufferRef a = make_buffer(1024, 0), b = make_buffer(1024, 0), c = make_buffer(1024, 0);
  std::vector<uint8_t> host(1024, 0);
  SemaphoreRef gate = semaphore(), s1 = semaphore(), s2 = semaphore(), s3 = semaphore(),
               s4 = semaphore();
  // Submitted in reverse order, alternating queues.
  CTS_ASSERT_OK(queue2_->read({{s3, 1}}, {{s4, 1}}, c, 0, host.data(), 1024));
  CTS_ASSERT_OK(queue_->copy({{s2, 1}}, {{s3, 1}}, b, 0, c, 0, 1024));
  CTS_ASSERT_OK(queue2_->copy({{s1, 1}}, {{s2, 1}}, a, 0, b, 0, 1024));
  CTS_ASSERT_OK(queue_->update({{gate, 1}}, {{s1, 1}}, bytes.data(), a, 0, 1024));
  grace_sleep();
  EXPECT_EQ(value_of(s4), 0u);
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(s4, 1));
  EXPECT_EQ(host, bytes);
  EXPECT_EQ(read_bytes(b), bytes);
}

TEST_P(QueueTest, DagSubmittedInReverseTopologicalOrder) {
  // gate → F(fill A) → C1(copy A[0,128)→B), C2(copy A[128,256)→C)
  // C1 → U(update B[0,16)), C2 → G(fill C[64,128) with 2-byte pattern)
  // {U, G} → J1(copy B→out[0,128)), {G, J1} → J2(copy C→out[128,256)), {J1, J2} → H(host call)
  BufferRef a = make_buffer(256, 0), b = make_buffer(128, 0), c = make_buffer(128, 0);
  BufferRef out = make_buffer(256, 0xEE);
  std::vector<uint8_t> update_bytes = pattern_bytes(16, 7);
  uint32_t fill_pattern = 0x11223344;
  uint16_t fill2_pattern = 0x6677;
  SemaphoreRef gate = semaphore(), f = semaphore(), c1 = semaphore(), c2 = semaphore(),
               u = semaphore(), g = semaphore(), j1 = semaphore(), j2 = semaphore(),
               h = semaphore();
  auto log = std::make_shared<OrderLog>();
  CTS_ASSERT_OK(queue_->host_call({{j1, 1}, {j2, 1}}, {{h, 1}}, [log](const auto&) {
    log->add(1);
    return Status();
  }));
  CTS_ASSERT_OK(queue2_->copy({{g, 1}, {j1, 1}}, {{j2, 1}}, c, 0, out, 128, 128));
  CTS_ASSERT_OK(queue_->copy({{u, 1}, {g, 1}}, {{j1, 1}}, b, 0, out, 0, 128));
  CTS_ASSERT_OK(queue2_->fill({{c2, 1}}, {{g, 1}}, c, 64, 64, &fill2_pattern, 2));
  CTS_ASSERT_OK(queue_->update({{c1, 1}}, {{u, 1}}, update_bytes.data(), b, 0, 16));
  CTS_ASSERT_OK(queue2_->copy({{f, 1}}, {{c2, 1}}, a, 128, c, 0, 128));
  CTS_ASSERT_OK(queue_->copy({{f, 1}}, {{c1, 1}}, a, 0, b, 0, 128));
  CTS_ASSERT_OK(queue2_->fill({{gate, 1}}, {{f, 1}}, a, 0, 256, &fill_pattern, 4));
  grace_sleep();
  EXPECT_EQ(log->size(), 0u);
  EXPECT_EQ(read_bytes(out), std::vector<uint8_t>(256, 0xEE));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(h, 1));
  EXPECT_EQ(log->size(), 1u);

  std::vector<uint8_t> expected(256);
  for (size_t i = 0; i < 256; i += 4) std::memcpy(&expected[i], &fill_pattern, 4);
  std::copy(update_bytes.begin(), update_bytes.end(), expected.begin());
  for (size_t i = 128 + 64; i < 256; i += 2) std::memcpy(&expected[i], &fill2_pattern, 2);
  EXPECT_EQ(read_bytes(out), expected);
}

TEST_P(QueueTest, HostCallDagOrder) {
  // Node i waits on the nodes listed in deps[i]; every node signals its own semaphore.
  const std::vector<std::vector<int>> deps = {
      {}, {0}, {0}, {1, 2}, {1}, {3, 4}, {2}, {5, 6}, {0, 7}, {8, 3},
  };
  const int n = static_cast<int>(deps.size());
  SemaphoreRef gate = semaphore();
  std::vector<SemaphoreRef> done(n);
  for (auto& s : done) s = semaphore();
  auto log = std::make_shared<OrderLog>();
  for (int i = n - 1; i >= 0; --i) {
    SemaphoreList waits = {{gate, 1}};
    for (int d : deps[i]) waits.push_back({done[d], 1});
    hal::Queue& queue = (i % 3 == 0) ? *queue2_ : *queue_;
    CTS_ASSERT_OK(queue.host_call(waits, {{done[i], 1}}, [log, i](const auto&) {
      log->add(i);
      return Status();
    }));
  }
  CTS_ASSERT_OK(gate->signal(1));
  for (int i = 0; i < n; ++i) CTS_ASSERT_OK(wait(done[i], 1));
  std::vector<int> order = log->entries();
  ASSERT_EQ(order.size(), size_t(n));
  std::vector<int> position(n, -1);
  for (int k = 0; k < n; ++k) position[order[k]] = k;
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(position[i], 0) << "node " << i << " did not run";
    for (int d : deps[i]) EXPECT_LT(position[d], position[i]) << d << " -> " << i;
  }
}

TEST_P(QueueTest, CrossQueueWait) {
  std::vector<uint8_t> bytes = pattern_bytes(64, 8);
  BufferRef a = make_buffer(64, 0), b = make_buffer(64, 0);
  SemaphoreRef gate = semaphore(), on_a = semaphore(), on_b = semaphore();
  // The waiter on queue 2 is submitted before the action on queue 1 that it waits on.
  CTS_ASSERT_OK(queue2_->copy({{on_a, 1}}, {{on_b, 1}}, a, 0, b, 0, 64));
  CTS_ASSERT_OK(queue_->update({{gate, 1}}, {{on_a, 1}}, bytes.data(), a, 0, 64));
  grace_sleep();
  EXPECT_EQ(value_of(on_b), 0u);
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(on_b, 1));
  EXPECT_EQ(read_bytes(b), bytes);
}

TEST_P(QueueTest, NoHeadOfLineBlocking) {
  constexpr int kBlocked = 4;
  SemaphoreRef blocker = semaphore(), ready_done = semaphore();
  std::vector<SemaphoreRef> blocked_done(kBlocked);
  auto runs = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < kBlocked; ++i) {
    blocked_done[i] = semaphore();
    CTS_ASSERT_OK(queue_->host_call({{blocker, 1}}, {{blocked_done[i], 1}}, [runs](const auto&) {
      runs->fetch_add(1);
      return Status();
    }));
  }
  BufferRef target = make_buffer(16, 0);
  uint8_t pattern = 0x3C;
  // Same queue, submitted later, no waits: must complete while the first ones are blocked.
  CTS_ASSERT_OK(queue_->fill({}, {{ready_done, 1}}, target, 0, 16, &pattern, 1));
  CTS_ASSERT_OK(queue_->barrier({{ready_done, 1}}, {{ready_done, 2}}));
  CTS_ASSERT_OK(wait(ready_done, 2));
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(16, 0x3C));
  EXPECT_EQ(runs->load(), 0);
  for (const SemaphoreRef& s : blocked_done) EXPECT_EQ(value_of(s), 0u);
  CTS_ASSERT_OK(blocker->signal(1));
  for (const SemaphoreRef& s : blocked_done) CTS_EXPECT_OK(wait(s, 1));
  EXPECT_EQ(runs->load(), kBlocked);
}

// ---------------------------------------------------------------------------------------------
// Deferred host calls: the function takes over the signal list and completes it later.

TEST_P(QueueTest, DeferredHostCallSignalsLater) {
  SemaphoreRef done = semaphore(), after = semaphore();
  auto taken = std::make_shared<SemaphoreList>();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [taken, ran](const SemaphoreList& signals) {
    *taken = signals;
    ran->store(true);
    return Status(StatusCode::kDeferred, "");
  }));
  auto log = std::make_shared<OrderLog>();
  CTS_ASSERT_OK(queue2_->host_call({{done, 1}}, {{after, 1}}, [log](const auto&) {
    log->add(2);
    return Status();
  }));
  ASSERT_TRUE(eventually([&] { return ran->load(); }));
  grace_sleep();
  // The queue must not signal a deferred call's list itself.
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(log->size(), 0u);
  ASSERT_EQ(taken->size(), 1u);
  CTS_ASSERT_OK(hal::signal_semaphores(*taken));  // from this thread, not the queue's
  CTS_ASSERT_OK(wait(after, 1));
  EXPECT_EQ(log->entries(), std::vector<int>{2});
}

TEST_P(QueueTest, DeferredHostCallFailsLater) {
  SemaphoreRef done = semaphore(), after = semaphore();
  auto taken = std::make_shared<SemaphoreList>();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [taken, ran](const SemaphoreList& signals) {
    *taken = signals;
    ran->store(true);
    return Status(StatusCode::kDeferred, "completes later");
  }));
  CTS_ASSERT_OK(queue2_->barrier({{done, 1}}, {{after, 1}}));
  ASSERT_TRUE(eventually([&] { return ran->load(); }));
  Status failure = unavailable_error("deferred work failed");
  std::thread completer([&] { hal::fail_semaphores(*taken, failure); });
  completer.join();
  EXPECT_EQ(wait(done, 1), failure);
  EXPECT_EQ(wait(after, 1), failure);
}

// ---------------------------------------------------------------------------------------------
// The queue keeps what an action uses alive until it completes.

TEST_P(QueueTest, RetainsBuffersAndSemaphores) {
  std::vector<uint8_t> bytes = pattern_bytes(4096, 9);
  BufferRef source = make_buffer(bytes);
  BufferRef target = make_buffer(4096, 0);
  SemaphoreRef gate = semaphore(), middle = semaphore(), done = semaphore();
  std::weak_ptr<Buffer> weak_source = source, weak_target = target;
  std::weak_ptr<hal::Semaphore> weak_middle = middle;
  std::vector<uint8_t> host(4096, 0);
  CTS_ASSERT_OK(queue_->copy({{gate, 1}}, {{middle, 1}}, source, 0, target, 0, 4096));
  CTS_ASSERT_OK(queue2_->read({{middle, 1}}, {{done, 1}}, target, 0, host.data(), 4096));
  source.reset();
  target.reset();
  middle.reset();
  grace_sleep();
  EXPECT_FALSE(weak_source.expired());
  EXPECT_FALSE(weak_target.expired());
  EXPECT_FALSE(weak_middle.expired());
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(host, bytes);
  // ... and lets go of them afterwards.
  EXPECT_TRUE(eventually([&] { return weak_source.expired() && weak_target.expired(); }));
  EXPECT_TRUE(eventually([&] { return weak_middle.expired(); }));
}

TEST_P(QueueTest, RetainsExecutablesAndCommandBuffers) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(256, 1));
  std::vector<uint32_t> host(256, 0);
  SemaphoreRef gate = semaphore(), s1 = semaphore(), s2 = semaphore(), done = semaphore();
  std::weak_ptr<hal::Executable> weak_executable;
  std::weak_ptr<hal::CommandBuffer> weak_command_buffer;
  std::weak_ptr<Buffer> weak_data = data;
  {
    // An executable of its own (kernels() is also held by the fixture).
    hal::ExecutableRef executable =
        must(device().compile_executable(must(test_kernel_source(device().info()))), "compile");
    weak_executable = executable;
    hal::DispatchCommand dispatch = make_dispatch(kAddConstant, {4, 1, 1}, {10, 64}, {{data}});
    dispatch.executable = std::move(executable);
    CTS_ASSERT_OK(queue_->dispatch({{gate, 1}}, {{s1, 1}}, std::move(dispatch)));
    auto command_buffer = device().create_command_buffer();
    weak_command_buffer = command_buffer;
    CTS_ASSERT_OK(
        command_buffer->dispatch(make_dispatch(kAddConstant, {256, 1, 1}, {100, 1}, {{data}})));
    CTS_ASSERT_OK(command_buffer->finalize());
    CTS_ASSERT_OK(queue2_->execute({{s1, 1}}, {{s2, 1}}, command_buffer));
    CTS_ASSERT_OK(queue_->read({{s2, 1}}, {{done, 1}}, data, 0, host.data(), 1024));
  }
  data.reset();
  grace_sleep();
  EXPECT_FALSE(weak_executable.expired());
  EXPECT_FALSE(weak_command_buffer.expired());
  EXPECT_FALSE(weak_data.expired());
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(host, std::vector<uint32_t>(256, 111));
  // (The executable may stay in the device's compile cache, so only these must be let go.)
  EXPECT_TRUE(eventually([&] { return weak_command_buffer.expired() && weak_data.expired(); }));
}

}  // namespace
}  // namespace kiln::cts
