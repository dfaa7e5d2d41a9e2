// Host mappings of OpenCL buffers from several threads at once, as two streams' library calls
// map one shared parameter: every mapping must see the buffer's bytes, and ending one mapping
// must not end another's. (PoCL gives every mapping of a cl_mem the same host address and ends
// the first one it finds at that address; a map still waiting in clFinish then returned a
// pointer read from the record another thread's unmap had freed.) Every test skips without
// OpenCL.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "opencl_test_device.h"

namespace kiln {
namespace {

// The words 0, 1, 2, ... of a buffer of `count` u32.
hal::BufferRef counting_buffer(hal::Device& device, uint32_t count) {
  hal::BufferRef buffer = *device.allocator().allocate({}, count * sizeof(uint32_t));
  std::vector<uint32_t> words(count);
  for (uint32_t i = 0; i < count; ++i) words[i] = i;
  EXPECT_TRUE(buffer->write_data(0, words.data(), words.size() * sizeof(uint32_t)).ok());
  return buffer;
}

// Whether `mapping` holds the words first, first + 1, ...
bool holds_counting(const hal::Mapping& mapping, uint32_t first) {
  const auto* words = static_cast<const uint32_t*>(mapping.data());
  for (size_t i = 0; i < mapping.size() / sizeof(uint32_t); ++i) {
    if (words[i] != first + i) return false;
  }
  return true;
}

// `kThreads` threads each map `shared` with `access` and their own buffer for reading and
// writing `kRounds` times, as gemm over mapped buffers maps its operands and its result, and
// check what they read (they never write to `shared`); the number of bad rounds per thread.
std::vector<int> map_from_threads(hal::Device& device, hal::Buffer& shared, hal::MapAccess access) {
  constexpr int kThreads = 2, kRounds = 3000;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      hal::BufferRef own = *device.allocator().allocate({}, shared.byte_length());
      for (int round = 0; round < kRounds; ++round) {
        Result<hal::Mapping> in = shared.map(access);
        Result<hal::Mapping> out = own->map(hal::MapAccess::kReadWrite);
        if (!in.ok() || !out.ok() || !holds_counting(*in, 0)) {
          ++bad[t];
          continue;
        }
        std::memcpy(out->data(), in->data(), in->size());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return bad;
}

// Small buffers, as a layer's weights: PoCL's own memory, mapped in place.
constexpr uint32_t kWords = 32;

TEST(OpenCLMappingTest, ThreadsMapOneBufferForReadingAtOnce) {
  hal::DeviceRef device = open_opencl();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  hal::BufferRef shared = counting_buffer(*device, kWords);
  std::vector<int> bad = map_from_threads(*device, *shared, hal::MapAccess::kRead);
  for (size_t t = 0; t < bad.size(); ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
  // Still readable and unchanged once every mapping has ended.
  Result<hal::Mapping> after = shared->map(hal::MapAccess::kRead);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(holds_counting(*after, 0));
}

// Mappings that may write are not shared (each is unmapped, its bytes made visible, when it
// ends), but two threads still never map and unmap one cl_mem at the same time.
TEST(OpenCLMappingTest, ThreadsMapOneBufferForWritingAtOnce) {
  hal::DeviceRef device = open_opencl();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  hal::BufferRef shared = counting_buffer(*device, kWords);
  std::vector<int> bad = map_from_threads(*device, *shared, hal::MapAccess::kReadWrite);
  for (size_t t = 0; t < bad.size(); ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// A mapping for reading inside one already held shares it: the same bytes at the same place,
// and it stays valid when the outer mapping ends first.
TEST(OpenCLMappingTest, ReadingMappingsOfOneRangeShareIt) {
  hal::DeviceRef device = open_opencl();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  hal::BufferRef buffer = counting_buffer(*device, kWords);
  Result<hal::Mapping> whole = buffer->map(hal::MapAccess::kRead);
  ASSERT_TRUE(whole.ok()) << whole.status();
  Result<hal::Mapping> part = buffer->map(hal::MapAccess::kRead, 8 * sizeof(uint32_t), 4 * sizeof(uint32_t));
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->data(), static_cast<char*>(whole->data()) + 8 * sizeof(uint32_t));
  *whole = hal::Mapping();
  EXPECT_TRUE(holds_counting(*part, 8));
  *part = hal::Mapping();
  // A write after both ended reaches the device, and a new reading mapping sees it.
  const uint32_t word = 7;
  ASSERT_TRUE(buffer->write_data(8 * sizeof(uint32_t), &word, sizeof word).ok());
  uint32_t read = 0;
  ASSERT_TRUE(buffer->read_data(8 * sizeof(uint32_t), &read, sizeof read).ok());
  EXPECT_EQ(read, word);
}

// A mapping that writes, taken while a reading one of the same range is held, is its own: its
// bytes reach the device when it ends, before the reading mapping does.
TEST(OpenCLMappingTest, WritingMappingEndsOnItsOwn) {
  hal::DeviceRef device = open_opencl();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  hal::BufferRef buffer = counting_buffer(*device, kWords);
  hal::BufferRef copy = *device->allocator().allocate({}, kWords * sizeof(uint32_t));
  hal::QueueRef queue = *device->create_queue();
  Result<hal::Mapping> reading = buffer->map(hal::MapAccess::kRead);
  ASSERT_TRUE(reading.ok()) << reading.status();
  {
    Result<hal::Mapping> writing = buffer->map(hal::MapAccess::kWrite, 0, sizeof(uint32_t));
    ASSERT_TRUE(writing.ok()) << writing.status();
    const uint32_t word = 99;
    std::memcpy(writing->data(), &word, sizeof word);
  }
  // Device work after the writing mapping ended sees the write (the reading one is still held).
  auto done = device->create_semaphore(0);
  ASSERT_TRUE(queue->copy({}, {{done, 1}}, buffer, 0, copy, 0, kWords * sizeof(uint32_t)).ok());
  ASSERT_TRUE(done->wait(1, Timeout::after_ms(60000)).ok());
  uint32_t first = 0;
  ASSERT_TRUE(copy->read_data(0, &first, sizeof first).ok());
  EXPECT_EQ(first, 99u);
}

}  // namespace
}  // namespace kiln
