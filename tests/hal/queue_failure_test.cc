// CTS: failure propagation through queues, failed actions, and argument validation (which
// submits nothing and signals nothing).
#include <limits>
#include <stdexcept>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

class QueueFailureTest : public CtsTest {};
KILN_CTS_INSTANTIATE(QueueFailureTest);

// ---------------------------------------------------------------------------------------------
// Failures travel along semaphores.

TEST_P(QueueFailureTest, HostFailurePropagatesAlongChain) {
  BufferRef a = make_buffer(64, 1), b = make_buffer(64, 0xEE);
  SemaphoreRef s0 = semaphore(), s1 = semaphore(), s2 = semaphore(), s3 = semaphore();
  auto runs = std::make_shared<std::atomic<int>>(0);
  CTS_ASSERT_OK(queue_->host_call({{s0, 1}}, {{s1, 1}}, [runs](const auto&) {
    runs->fetch_add(1);
    return Status();
  }));
  CTS_ASSERT_OK(queue2_->copy({{s1, 1}}, {{s2, 1}}, a, 0, b, 0, 64));
  CTS_ASSERT_OK(queue_->barrier({{s2, 1}}, {{s3, 1}}));
  Status failure = aborted_error("the host gave up on s0");
  s0->fail(failure);
  EXPECT_EQ(wait(s3, 1), failure);  // same code and message
  EXPECT_EQ(wait(s2, 1), failure);
  EXPECT_EQ(wait(s1, 1), failure);
  EXPECT_EQ(runs->load(), 0);
  EXPECT_EQ(read_bytes(b), std::vector<uint8_t>(64, 0xEE));
}

TEST_P(QueueFailureTest, WaitOnAlreadyFailedSemaphore) {
  Status failure = data_loss_error("failed before anything was submitted");
  SemaphoreRef s0 = semaphore(), s1 = semaphore(), s2 = semaphore();
  s0->fail(failure);
  auto runs = std::make_shared<std::atomic<int>>(0);
  CTS_ASSERT_OK(queue_->host_call({{s0, 1}}, {{s1, 1}}, [runs](const auto&) {
    runs->fetch_add(1);
    return Status();
  }));
  CTS_ASSERT_OK(queue2_->barrier({{s1, 1}}, {{s2, 1}}));
  EXPECT_EQ(wait(s2, 1), failure);
  EXPECT_EQ(wait(s1, 1), failure);
  EXPECT_EQ(runs->load(), 0);
}

TEST_P(QueueFailureTest, FailedWaitFailsEverySignalAtOnce) {
  // One wait fails while another is still unmet: the signals fail now, not when the other is met.
  SemaphoreRef a = semaphore(), never = semaphore(), x = semaphore(), y = semaphore(3);
  CTS_ASSERT_OK(queue_->barrier({{a, 1}, {never, 1}}, {{x, 1}, {y, 4}}));
  Status failure = cancelled_error("a was cancelled");
  a->fail(failure);
  EXPECT_EQ(wait(x, 1), failure);
  EXPECT_EQ(wait(y, 4), failure);
  EXPECT_EQ(value_of(never), 0u);
}

TEST_P(QueueFailureTest, FailedHostCallFailsItsSignals) {
  SemaphoreRef done = semaphore(), other = semaphore(), after = semaphore();
  auto after_runs = std::make_shared<std::atomic<int>>(0);
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}, {other, 2}}, [](const auto&) {
    return data_loss_error("the host call broke");
  }));
  CTS_ASSERT_OK(queue2_->host_call({{done, 1}}, {{after, 1}}, [after_runs](const auto&) {
    after_runs->fetch_add(1);
    return Status();
  }));
  Status result = wait(done, 1);
  EXPECT_EQ(result.code(), StatusCode::kDataLoss) << result.to_string();
  EXPECT_NE(result.message().find("the host call broke"), std::string::npos) << result.to_string();
  EXPECT_EQ(wait(other, 2), result);
  EXPECT_EQ(wait(after, 1), result);
  EXPECT_EQ(after_runs->load(), 0);
}

TEST_P(QueueFailureTest, ThrowingHostCallFailsItsSignals) {
  SemaphoreRef done = semaphore(), later = semaphore();
  CTS_ASSERT_OK(queue_->host_call({}, {{done, 1}}, [](const auto&) -> Status {
    throw std::runtime_error("boom");
  }));
  Status result = wait(done, 1);
  EXPECT_EQ(result.code(), StatusCode::kInternal) << result.to_string();
  EXPECT_NE(result.message().find("boom"), std::string::npos) << result.to_string();
  // The queue survives and runs what comes next.
  CTS_ASSERT_OK(queue_->barrier({}, {{later, 1}}));
  CTS_EXPECT_OK(wait(later, 1));
}

TEST_P(QueueFailureTest, FailedDispatchFailsDependents) {
  CTS_REQUIRE_KERNELS();
  BufferRef target = make_buffer(64, 0xEE);
  BufferRef source = make_buffer(64, 1);
  SemaphoreRef s1 = semaphore(), s2 = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{s1, 1}}, make_dispatch(kReturnConstant, {2, 1, 1}, {5}, {})));
  CTS_ASSERT_OK(queue2_->copy({{s1, 1}}, {{s2, 1}}, source, 0, target, 0, 64));
  Status result = wait(s1, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_EQ(wait(s2, 1), result);
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(64, 0xEE));
}

TEST_P(QueueFailureTest, FailedDispatchStopsDependentDispatches) {
  // Kernels waiting on a failing kernel (on OpenCL a wait handed to the device, behind the wait
  // gate) do not run, and fail with the same status.
  CTS_REQUIRE_KERNELS();
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(64, 7));
  SemaphoreRef s1 = semaphore(), s2 = semaphore(), s3 = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{s1, 1}}, make_dispatch(kReturnConstant, {1, 1, 1}, {9}, {})));
  CTS_ASSERT_OK(queue2_->dispatch({{s1, 1}}, {{s2, 1}},
                                  make_dispatch(kAddConstant, {1, 1, 1}, {1, 64}, {{data}})));
  CTS_ASSERT_OK(queue_->dispatch({{s2, 1}}, {{s3, 1}},
                                 make_dispatch(kAddConstant, {1, 1, 1}, {2, 64}, {{data}})));
  Status result = wait(s1, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_EQ(wait(s2, 1), result);
  EXPECT_EQ(wait(s3, 1), result);
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 7));
}

TEST_P(QueueFailureTest, SignalThatCannotBeAppliedFailsTheSemaphore) {
  SemaphoreRef s = semaphore(5);
  CTS_ASSERT_OK(queue_->barrier({}, {{s, 3}}));
  Status result = s->wait(6, wait_timeout());
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_FALSE(s->query().ok());
}

TEST_P(QueueFailureTest, QueueStaysUsableAfterFailures) {
  SemaphoreRef failed = semaphore(), done = semaphore();
  failed->fail(internal_error("broken"));
  CTS_ASSERT_OK(queue_->barrier({{failed, 1}}, {}));
  CTS_ASSERT_OK(queue_->host_call({}, {}, [](const auto&) { return aborted_error("no"); }));
  BufferRef target = make_buffer(8, 0);
  uint8_t pattern = 0x77;
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, target, 0, 8, &pattern, 1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(8, 0x77));
}

// ---------------------------------------------------------------------------------------------
// Validation: an invalid call returns an error at once and submits nothing, so nothing is
// signalled (or failed) and no buffer changes.

class ValidationTest : public CtsTest {
 protected:
  void SetUp() override {
    CtsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ready_ = semaphore(1);
    done_ = semaphore();
    waits_ = {{ready_, 1}};
    signals_ = {{done_, 1}};
  }
  // Nothing was signalled or failed, also a little later.
  void expect_nothing_signalled() {
    grace_sleep();
    EXPECT_EQ(value_of(done_), 0u);
  }

  SemaphoreRef ready_, done_;
  SemaphoreList waits_, signals_;
};
KILN_CTS_INSTANTIATE(ValidationTest);

constexpr size_t kHuge = std::numeric_limits<size_t>::max();

TEST_P(ValidationTest, CopyRanges) {
  BufferRef a = make_buffer(64, 1), b = make_buffer(64, 2);
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 60, b, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 0, b, 60, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 0, b, 0, 65));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 65, b, 0, 0));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, kHuge, b, 0, 2));
  // (kHuge itself is kWholeBuffer, "to the end": a valid length, see TransferTest.)
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 2, b, 0, kHuge - 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 0, b, 8, kHuge));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 0, b, kHuge - 1, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, nullptr, 0, b, 0, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, a, 0, nullptr, 0, 4));
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(b), std::vector<uint8_t>(64, 2));
}

TEST_P(ValidationTest, FillPatternsAndAlignment) {
  BufferRef target = make_buffer(64, 9);
  const uint8_t pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 12, pattern, 3));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 16, pattern, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 16, pattern, 0));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 2, 8, pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 6, pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 1, 4, pattern, 2));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 3, pattern, 2));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 60, 8, pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, target, 0, 65, pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->fill(waits_, signals_, target, kHuge - 3, 8, pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, nullptr, 0, 4, pattern, 4));
  auto bad = hal::make_fill(target, 0, 12, pattern, 3);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().to_string();
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(64, 9));
}

TEST_P(ValidationTest, UpdateReadWriteRanges) {
  BufferRef buffer = make_buffer(64, 4);
  std::vector<uint8_t> host(128, 0xAB);
  CTS_EXPECT_CODE(kInvalidArgument, queue_->update(waits_, signals_, host.data(), buffer, 32, 33));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->update(waits_, signals_, host.data(), buffer, kHuge, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->update(waits_, signals_, host.data(), nullptr, 0, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->read(waits_, signals_, buffer, 1, host.data(), 64));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->read(waits_, signals_, buffer, kHuge, host.data(), 2));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->read(waits_, signals_, nullptr, 0, host.data(), 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->write(waits_, signals_, host.data(), buffer, 0, 65));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->write(waits_, signals_, host.data(), buffer, 64, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->write(waits_, signals_, host.data(), nullptr, 0, 1));
  auto bad_update = hal::make_update(host.data(), buffer, 60, 5);
  EXPECT_EQ(bad_update.status().code(), StatusCode::kInvalidArgument);
  auto update = hal::make_update(host.data(), buffer, 60, 4);
  ASSERT_TRUE(update.ok()) << update.status().to_string();
  EXPECT_EQ(std::vector<uint8_t>(update->data.begin(), update->data.end()), std::vector<uint8_t>(4, 0xAB));
  EXPECT_EQ(update->offset, 60u);
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(buffer), std::vector<uint8_t>(64, 4));
  EXPECT_EQ(host, std::vector<uint8_t>(128, 0xAB));
}

TEST_P(ValidationTest, UsageBits) {
  // Source-only, target-only, and dispatch-only buffers.
  BufferRef source_only = make_buffer(64, 1, hal::kUsageTransferSource | hal::kUsageMapping);
  BufferRef target_only = make_buffer(64, 2, hal::kUsageTransferTarget | hal::kUsageMapping);
  BufferRef storage_only = make_buffer(64, 3, hal::kUsageDispatchStorage | hal::kUsageMapping);
  BufferRef full = make_buffer(64, 4);
  std::vector<uint8_t> host(64, 0xAB);
  uint8_t pattern = 0;
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, target_only, 0, full, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, full, 0, source_only, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy(waits_, signals_, storage_only, 0, full, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, signals_, source_only, 0, 8, &pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->fill(waits_, signals_, storage_only, 0, 8, &pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->update(waits_, signals_, host.data(), source_only, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->write(waits_, signals_, host.data(), source_only, 0, 8));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->read(waits_, signals_, target_only, 0, host.data(), 8));
  if (has_kernels()) {
    CTS_EXPECT_CODE(kInvalidArgument, queue_->dispatch(waits_, signals_,
                                                       make_dispatch(kAddConstant, {1, 1, 1},
                                                                     {1, 1}, {{source_only}})));
    auto command_buffer = device().create_command_buffer();
    CTS_EXPECT_CODE(kInvalidArgument, command_buffer->dispatch(make_dispatch(
                                          kAddConstant, {1, 1, 1}, {1, 1}, {{target_only}})));
  }
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(source_only), std::vector<uint8_t>(64, 1));
  EXPECT_EQ(read_bytes(full), std::vector<uint8_t>(64, 4));
  EXPECT_EQ(host, std::vector<uint8_t>(64, 0xAB));
}

TEST_P(ValidationTest, NullSemaphoreInLists) {
  BufferRef target = make_buffer(16, 5);
  uint8_t pattern = 0;
  SemaphoreList null_wait = {{ready_, 1}, {nullptr, 1}};
  SemaphoreList null_signal = {{done_, 1}, {nullptr, 2}};
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(null_wait, signals_, target, 0, 16, &pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill(waits_, null_signal, target, 0, 16, &pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->barrier(null_wait, signals_));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->barrier(waits_, null_signal));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->host_call(waits_, null_signal, [](const auto&) { return Status(); }));
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(16, 5));
}

TEST_P(ValidationTest, CommandBufferAndHostCallArguments) {
  BufferRef target = make_buffer(16, 5);
  auto open = device().create_command_buffer();
  uint8_t pattern = 0;
  CTS_ASSERT_OK(open->fill(target, 0, 16, &pattern, 1));
  CTS_EXPECT_CODE(kFailedPrecondition, queue_->execute(waits_, signals_, open));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->execute(waits_, signals_, nullptr));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->host_call(waits_, signals_, hal::HostCallFn()));
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(target), std::vector<uint8_t>(16, 5));
}

TEST_P(ValidationTest, ObjectsOfAnotherDevice) {
  auto other = drivers::builtin_registry().create_device(GetParam());
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  hal::DeviceRef other_device = *other;
  BufferRef foreign = must(other_device->allocator().allocate({}, 64), "allocate");
  BufferRef local = make_buffer(64, 6);
  uint8_t pattern = 0;
  CTS_EXPECT_NOT_OK(queue_->copy(waits_, signals_, foreign, 0, local, 0, 8));
  CTS_EXPECT_NOT_OK(queue_->copy(waits_, signals_, local, 0, foreign, 0, 8));
  CTS_EXPECT_NOT_OK(queue_->fill(waits_, signals_, foreign, 0, 8, &pattern, 1));
  auto foreign_commands = other_device->create_command_buffer();
  CTS_EXPECT_NOT_OK(foreign_commands->fill(local, 0, 8, &pattern, 1));
  CTS_ASSERT_OK(foreign_commands->finalize());
  CTS_EXPECT_NOT_OK(queue_->execute(waits_, signals_, foreign_commands));
  if (has_kernels()) {
    hal::ExecutableRef foreign_kernels =
        must(other_device->compile_executable(must(test_kernel_source(other_device->info()))),
             "compile on the other device");
    hal::DispatchCommand dispatch = make_dispatch(kAddConstant, {1, 1, 1}, {1, 1}, {{local}});
    dispatch.executable = foreign_kernels;
    CTS_EXPECT_NOT_OK(queue_->dispatch(waits_, signals_, std::move(dispatch)));
  }
  expect_nothing_signalled();
  EXPECT_EQ(read_bytes(local), std::vector<uint8_t>(64, 6));
}

}  // namespace
}  // namespace kiln::cts
