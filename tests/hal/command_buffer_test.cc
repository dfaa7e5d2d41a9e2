// CTS: command buffers — recording, validation at record time, finalize, in-order execution,
// and executing one buffer many times on both queues.
#include <cstring>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

class CommandBufferTest : public CtsTest {};
KILN_CTS_INSTANTIATE(CommandBufferTest);

TEST_P(CommandBufferTest, RecordsInOrder) {
  BufferRef a = make_buffer(64, 0), b = make_buffer(64, 0);
  auto cb = device().create_command_buffer();
  EXPECT_FALSE(cb->finalized());
  EXPECT_EQ(cb->device_tag(), device().tag());
  uint8_t pattern = 1;
  std::vector<uint8_t> bytes = pattern_bytes(8, 31);
  CTS_ASSERT_OK(cb->fill(a, 0, 64, &pattern, 1));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->update(bytes.data(), a, 8, 8));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->copy(a, 0, b, 0, 64));
  CTS_ASSERT_OK(cb->finalize());
  EXPECT_TRUE(cb->finalized());
  ASSERT_EQ(cb->commands().size(), 5u);
  EXPECT_STREQ(hal::command_name(cb->commands()[0]), "fill");
  EXPECT_STREQ(hal::command_name(cb->commands()[2]), "update");
  EXPECT_STREQ(hal::command_name(cb->commands()[4]), "copy");

  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(64, 1);
  std::copy(bytes.begin(), bytes.end(), expected.begin() + 8);
  EXPECT_EQ(read_bytes(b), expected);
}

TEST_P(CommandBufferTest, FillDispatchCopyRunInOrder) {
  CTS_REQUIRE_KERNELS();
  // fill (x = 5) → add 7 (reads the fill) → copy to out.
  BufferRef data = make_buffer(256 * 4, 0);
  BufferRef out = make_buffer(256 * 4, 0);
  auto cb = device().create_command_buffer();
  uint32_t five = 5;
  CTS_ASSERT_OK(cb->fill(data, 0, 256 * 4, &five, 4));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->dispatch(make_dispatch(kAddConstant, {32, 1, 1}, {7, 8}, {{data}})));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->copy(data, 0, out, 0, 256 * 4));
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_u32(out), std::vector<uint32_t>(256, 12));
}

TEST_P(CommandBufferTest, ExecuteTwiceOnTwoQueues) {
  CTS_REQUIRE_KERNELS();
  // Not idempotent: each execution adds 3 and appends a copy, so both runs must happen in order.
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(64, 100));
  BufferRef snapshot = make_buffer(64 * 4, 0);
  auto cb = device().create_command_buffer();
  CTS_ASSERT_OK(cb->dispatch(make_dispatch(kAddConstant, {4, 1, 1}, {3, 16}, {{data}})));
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->copy(data, 0, snapshot, 0, 64 * 4));
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef t = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{t, 1}}, cb));
  CTS_ASSERT_OK(queue2_->execute({{t, 1}}, {{t, 2}}, cb));
  CTS_ASSERT_OK(wait(t, 2));
  EXPECT_EQ(read_u32(data), std::vector<uint32_t>(64, 106));
  EXPECT_EQ(read_u32(snapshot), std::vector<uint32_t>(64, 106));
  // And once more, much later.
  CTS_ASSERT_OK(queue_->execute({}, {{t, 3}}, cb));
  CTS_ASSERT_OK(wait(t, 3));
  EXPECT_EQ(read_u32(snapshot), std::vector<uint32_t>(64, 109));
}

TEST_P(CommandBufferTest, ExecuteConcurrently) {
  // One finalized buffer, executed many times on both queues at once. Its commands only read
  // shared memory (a kernel without bindings, barriers), so concurrent runs do not race.
  auto cb = device().create_command_buffer();
  if (has_kernels()) {
    CTS_ASSERT_OK(cb->dispatch(make_dispatch(kReturnConstant, {4, 2, 1}, {0}, {})));
  }
  CTS_ASSERT_OK(cb->barrier());
  if (has_kernels()) {
    CTS_ASSERT_OK(cb->dispatch(make_dispatch(kReturnConstant, {1, 1, 1}, {0}, {})));
  }
  CTS_ASSERT_OK(cb->finalize());
  std::vector<SemaphoreRef> independent(20);
  SemaphoreRef chain = semaphore();
  for (uint64_t i = 0; i < 20; ++i) {
    independent[i] = semaphore();
    CTS_ASSERT_OK(queue_->execute({}, {{independent[i], 1}}, cb));
    CTS_ASSERT_OK(queue2_->execute({{chain, i}}, {{chain, i + 1}}, cb));
  }
  CTS_ASSERT_OK(wait(chain, 20));
  for (const SemaphoreRef& s : independent) CTS_EXPECT_OK(wait(s, 1));
}

TEST_P(CommandBufferTest, UpdateCapturesBytesAtRecording) {
  std::vector<uint8_t> original = pattern_bytes(40, 33);
  std::vector<uint8_t> source = original;
  BufferRef target = make_buffer(48, 0xEE);
  auto cb = device().create_command_buffer();
  CTS_ASSERT_OK(cb->update(source.data(), target, 4, 40));
  std::fill(source.begin(), source.end(), 0);
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected(48, 0xEE);
  std::copy(original.begin(), original.end(), expected.begin() + 4);
  EXPECT_EQ(read_bytes(target), expected);
}

TEST_P(CommandBufferTest, EmptyCommandBuffer) {
  auto cb = device().create_command_buffer();
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
}

TEST_P(CommandBufferTest, RecordingAfterFinalizeFails) {
  BufferRef a = make_buffer(16, 0), b = make_buffer(16, 0);
  auto cb = device().create_command_buffer();
  uint8_t pattern = 1;
  CTS_ASSERT_OK(cb->fill(a, 0, 16, &pattern, 1));
  CTS_ASSERT_OK(cb->finalize());
  CTS_EXPECT_CODE(kFailedPrecondition, cb->fill(a, 0, 16, &pattern, 1));
  CTS_EXPECT_CODE(kFailedPrecondition, cb->copy(a, 0, b, 0, 16));
  CTS_EXPECT_CODE(kFailedPrecondition, cb->update(&pattern, a, 0, 1));
  CTS_EXPECT_CODE(kFailedPrecondition, cb->barrier());
  if (has_kernels()) {
    CTS_EXPECT_CODE(kFailedPrecondition,
                    cb->dispatch(make_dispatch(kAddConstant, {1, 1, 1}, {1, 1}, {{a}})));
  }
  EXPECT_EQ(cb->commands().size(), 1u);
}

TEST_P(CommandBufferTest, InvalidRecordingLeavesBufferUnchanged) {
  BufferRef a = make_buffer(64, 0), b = make_buffer(64, 0);
  auto cb = device().create_command_buffer();
  uint8_t pattern[4] = {9, 9, 9, 9};
  CTS_ASSERT_OK(cb->fill(a, 0, 64, pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument, cb->fill(a, 0, 12, pattern, 3));
  CTS_EXPECT_CODE(kInvalidArgument, cb->fill(a, 2, 8, pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, cb->fill(a, 60, 8, pattern, 1));
  CTS_EXPECT_CODE(kInvalidArgument, cb->copy(a, 0, b, 32, 33));
  CTS_EXPECT_CODE(kInvalidArgument, cb->copy(nullptr, 0, b, 0, 1));
  CTS_EXPECT_CODE(kInvalidArgument, cb->update(pattern, b, 63, 2));
  if (has_kernels()) {
    CTS_EXPECT_CODE(kInvalidArgument,
                    cb->dispatch(make_dispatch(kAddConstant, {1, 1, 1}, {1}, {{b}})));
    CTS_EXPECT_CODE(kInvalidArgument,
                    cb->dispatch(make_dispatch(kAddConstant, {1, 1, 1}, {1, 1}, {})));
  }
  EXPECT_EQ(cb->commands().size(), 1u);
  CTS_ASSERT_OK(cb->copy(a, 0, b, 0, 64));
  CTS_ASSERT_OK(cb->finalize());
  EXPECT_EQ(cb->commands().size(), 2u);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_bytes(b), std::vector<uint8_t>(64, 9));
}

TEST_P(CommandBufferTest, FailingDispatchFailsExecution) {
  CTS_REQUIRE_KERNELS();
  auto cb = device().create_command_buffer();
  CTS_ASSERT_OK(cb->dispatch(make_dispatch(kReturnConstant, {2, 1, 1}, {1}, {})));
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore(), after = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(queue2_->barrier({{done, 1}}, {{after, 1}}));
  Status result = wait(done, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_EQ(wait(after, 1), result);
}

TEST_P(CommandBufferTest, ManyCommands) {
  // 200 updates of 4 bytes each, then a copy: the copy sees them all.
  BufferRef a = make_buffer(800, 0), b = make_buffer(800, 0);
  auto cb = device().create_command_buffer();
  std::vector<uint8_t> expected(800);
  for (uint32_t i = 0; i < 200; ++i) {
    uint32_t value = i * 7 + 1;
    std::memcpy(&expected[i * 4], &value, 4);
    CTS_ASSERT_OK(cb->update(&value, a, i * 4, 4));
  }
  CTS_ASSERT_OK(cb->barrier());
  CTS_ASSERT_OK(cb->copy(a, 0, b, 0, 800));
  CTS_ASSERT_OK(cb->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, cb));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_bytes(b), expected);
}

}  // namespace
}  // namespace kiln::cts
