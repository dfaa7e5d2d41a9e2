// CTS: Placement::kCallerWhenReady. Where the device allows it (max_caller_stores > 0) an action
// whose waits are met runs on the submitting thread and has signalled when the call returns;
// otherwise, and on every device when a wait is unmet, it is queued as usual. Either way every
// ordering and failure rule of the queue holds.
#include <thread>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

using hal::Placement;

class PlacementTest : public CtsTest {
 protected:
  bool runs_on_caller() { return device().info().capabilities.max_caller_stores > 0; }
  // After a submission with met waits: where the device runs it on the caller, it is done now.
  void expect_done_at_return(const SemaphoreRef& done, uint64_t value) {
    if (runs_on_caller()) {
      EXPECT_EQ(value_of(done), value) << "not run on the submitting thread";
    }
    CTS_EXPECT_OK(wait(done, value));
  }
};
KILN_CTS_INSTANTIATE(PlacementTest);

TEST_P(PlacementTest, DispatchWithMetWaitsIsDoneWhenTheCallReturns) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(64, 1));
  SemaphoreRef ready = semaphore(3), done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({{ready, 3}}, {{done, 1}},
                                 make_dispatch(kAddConstant, {1, 1, 1}, {5, 64}, {{data}}),
                                 Placement::kCallerWhenReady));
  expect_done_at_return(done, 1);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 6));
}

TEST_P(PlacementTest, ManyWorkgroupsOnTheCaller) {
  CTS_REQUIRE_KERNELS();
  BufferRef ids = make_buffer(4 * 3 * 2 * 4, 0xFF);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}}, make_dispatch(kWriteIds, {4, 3, 2}, {}, {{ids}}),
                                 Placement::kCallerWhenReady));
  expect_done_at_return(done, 1);
  std::vector<uint32_t> expected;
  for (uint32_t z = 0; z < 2; ++z) {
    for (uint32_t y = 0; y < 3; ++y) {
      for (uint32_t x = 0; x < 4; ++x) expected.push_back(workgroup_id_value(x, y, z));
    }
  }
  EXPECT_EQ(read_u32(ids), expected);
}

TEST_P(PlacementTest, UnmetWaitIsQueuedAndRunsAfterIt) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(64, 1));
  SemaphoreRef gate = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({{gate, 1}}, {{done, 1}},
                                 make_dispatch(kAddConstant, {1, 1, 1}, {5, 64}, {{data}}),
                                 Placement::kCallerWhenReady));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 1));
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 6));
}

TEST_P(PlacementTest, ChainOfCallerActionsKeepsItsOrder) {
  // Each action waits on the one before; with met waits each runs at once, in submission order.
  CTS_REQUIRE_KERNELS();
  BufferRef a = make_u32_buffer(std::vector<uint32_t>(16, 0)), b = make_u32_buffer(std::vector<uint32_t>(16, 0));
  SemaphoreRef s = semaphore();
  for (uint32_t i = 0; i < 20; ++i) {
    const SemaphoreList waits = i ? SemaphoreList{{s, i}} : SemaphoreList{};
    // a += 1 then b = a: b ends as the last a only if the order held.
    CTS_ASSERT_OK(queue_->dispatch(waits, {{s, i + 1}}, make_dispatch(kAddConstant, {1, 1, 1}, {1, 16}, {{a}}),
                                   Placement::kCallerWhenReady));
  }
  CTS_ASSERT_OK(queue_->dispatch({{s, 20}}, {{s, 21}}, make_dispatch(kCopyOffset, {1, 1, 1}, {0, 16}, {{a}, {b}}),
                                 Placement::kCallerWhenReady));
  CTS_ASSERT_OK(wait(s, 21));
  EXPECT_EQ(read_u32(b), std::vector<uint32_t>(16, 20));
}

TEST_P(PlacementTest, FailingKernelOnTheCallerFailsItsSignalsNotTheCall) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(8, 7));
  SemaphoreRef failed = semaphore(), after = semaphore();
  // The call itself succeeds: the failure is the action's, reported through its semaphores.
  CTS_ASSERT_OK(queue_->dispatch({}, {{failed, 1}}, make_dispatch(kReturnConstant, {1, 1, 1}, {9}, {}),
                                 Placement::kCallerWhenReady));
  CTS_ASSERT_OK(queue_->dispatch({{failed, 1}}, {{after, 1}},
                                 make_dispatch(kAddConstant, {1, 1, 1}, {1, 8}, {{data}}),
                                 Placement::kCallerWhenReady));
  Status result = wait(failed, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_EQ(wait(after, 1), result);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(8, 7));
}

TEST_P(PlacementTest, FailedWaitFailsTheSignalsWithoutRunning) {
  BufferRef target = make_buffer(32, 0xEE);
  SemaphoreRef failed = semaphore(), done = semaphore();
  failed->fail(aborted_error("the producer gave up"));
  const uint8_t zero = 0;
  CTS_ASSERT_OK(queue_->fill({{failed, 1}}, {{done, 1}}, target, 0, 32, &zero, 1, Placement::kCallerWhenReady));
  EXPECT_EQ(wait(done, 1), aborted_error("the producer gave up"));
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(32, 0xEE));
}

TEST_P(PlacementTest, TransfersOnTheCaller) {
  const std::vector<uint8_t> bytes = pattern_bytes(96, 4);
  BufferRef source = make_buffer(bytes), target = make_buffer(96, 0), filled = make_buffer(32, 0);
  SemaphoreRef s = semaphore();
  CTS_ASSERT_OK(queue_->copy({}, {{s, 1}}, source, 0, target, 0, 96, Placement::kCallerWhenReady));
  expect_done_at_return(s, 1);
  EXPECT_EQ(read_bytes(target), bytes);

  std::vector<uint8_t> host(96, 0);
  CTS_ASSERT_OK(queue_->read({{s, 1}}, {{s, 2}}, target, 0, host.data(), 96, Placement::kCallerWhenReady));
  expect_done_at_return(s, 2);
  EXPECT_EQ(host, bytes);

  const std::vector<uint8_t> other = pattern_bytes(96, 5);
  CTS_ASSERT_OK(queue_->write({{s, 2}}, {{s, 3}}, other.data(), target, 0, 96, Placement::kCallerWhenReady));
  expect_done_at_return(s, 3);
  EXPECT_EQ(read_bytes(target), other);

  std::vector<uint8_t> update = pattern_bytes(16, 6);
  CTS_ASSERT_OK(queue_->update({{s, 3}}, {{s, 4}}, update.data(), target, 8, 16, Placement::kCallerWhenReady));
  std::fill(update.begin(), update.end(), 0);  // captured at the call, whatever the placement
  expect_done_at_return(s, 4);
  std::vector<uint8_t> expected = other;
  const std::vector<uint8_t> captured = pattern_bytes(16, 6);
  std::copy(captured.begin(), captured.end(), expected.begin() + 8);
  EXPECT_EQ(read_bytes(target), expected);

  const uint8_t pattern[2] = {0x12, 0x34};
  CTS_ASSERT_OK(queue_->fill({{s, 4}}, {{s, 5}}, filled, 0, 32, pattern, 2, Placement::kCallerWhenReady));
  expect_done_at_return(s, 5);
  std::vector<uint8_t> fill_expected;
  for (int i = 0; i < 16; ++i) fill_expected.insert(fill_expected.end(), {0x12, 0x34});
  EXPECT_EQ(read_bytes(filled), fill_expected);
}

TEST_P(PlacementTest, CommandBufferOnTheCaller) {
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(32, 2));
  auto cb = device().create_command_buffer();
  CTS_ASSERT_OK(cb->dispatch(make_dispatch(kAddConstant, {2, 1, 1}, {3, 16}, {{data}})));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->dispatch(make_dispatch(kAddConstant, {1, 1, 1}, {10, 32}, {{data}})));
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb, nullptr, Placement::kCallerWhenReady));
  expect_done_at_return(done, 1);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(32, 15));
}

TEST_P(PlacementTest, HostCallsAreQueuedUnlessAskedOnTheCaller) {
  // A host call may block: queued by default, it runs on the queue's thread, and the caller may
  // let it finish there (it would otherwise wait for `release` until its timeout and fail).
  SemaphoreRef release = semaphore(), done = semaphore();
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [release](const SemaphoreList&) {
    return release->wait(1, wait_timeout());
  }));
  CTS_ASSERT_OK(release->signal(1));
  CTS_EXPECT_OK(wait(done, 1));
}

TEST_P(PlacementTest, AHostCallAskedOnTheCallerRunsThereWhenItsWaitsAreMet) {
  // What a submitter knows returns soon (a collective's start: ral/mpi_collectives.h) may run on
  // its own thread, like a small dispatch.
  SemaphoreRef done = semaphore();
  std::thread::id ran_on;
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [&ran_on](const SemaphoreList&) {
    ran_on = std::this_thread::get_id();
    return Status();
  }, Placement::kCallerWhenReady));
  expect_done_at_return(done, 1);
  if (runs_on_caller()) EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_P(PlacementTest, AHostCallOnTheCallerMaySignalLater) {
  // A host call that defers its signals (kDeferred) ends when its work does, also on the caller.
  if (!runs_on_caller()) GTEST_SKIP() << "this device queues every action";
  SemaphoreRef done = semaphore();
  SemaphoreList taken;
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [&taken](const SemaphoreList& signals) {
    taken = signals;
    return Status(StatusCode::kDeferred, "ends later");
  }, Placement::kCallerWhenReady));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(value_of(done), 0u);
  hal::Queue::complete(taken, Status());
  CTS_EXPECT_OK(wait(done, 1));
}

}  // namespace
}  // namespace kiln::cts
