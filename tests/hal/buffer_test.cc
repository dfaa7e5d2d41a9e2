// CTS: buffers — what they report, mapping, subspans, zero-length buffers and imported host
// memory.
#include <cstring>
#include <limits>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

using hal::Buffer;
using hal::BufferParams;
using hal::MapAccess;

class BufferTest : public CtsTest {};
KILN_CTS_INSTANTIATE(BufferTest);

constexpr size_t kHuge = std::numeric_limits<size_t>::max();

TEST_P(BufferTest, ReportsSizeTypeAndUsage) {
  for (uint32_t usage : {uint32_t{hal::kUsageDefault}, uint32_t{hal::kUsageTransfer},
                         uint32_t{hal::kUsageDispatchStorage | hal::kUsageMapping}}) {
    SCOPED_TRACE(hal::buffer_usage_string(usage));
    BufferParams params;
    params.usage = usage;
    BufferRef buffer = must(allocator().allocate(params, 1000), "allocate");
    EXPECT_EQ(buffer->byte_length(), 1000u);
    EXPECT_EQ(buffer->byte_offset(), 0u);
    EXPECT_GE(buffer->allocation_size(), 1000u);
    EXPECT_EQ(buffer->usage(), usage);
    EXPECT_EQ(buffer->memory_type() & params.memory_type, params.memory_type)
        << hal::memory_type_string(buffer->memory_type());
    EXPECT_EQ(buffer->device_tag(), device().tag());
    EXPECT_NE(buffer->storage(), nullptr);
  }
  EXPECT_FALSE(hal::memory_type_string(hal::kMemoryHostVisible).empty());
  EXPECT_FALSE(hal::buffer_usage_string(hal::kUsageDefault).empty());
}

TEST_P(BufferTest, MapRoundTrip) {
  BufferRef buffer = must(allocator().allocate({}, 4096), "allocate");
  std::vector<uint8_t> bytes = pattern_bytes(4096, 21);
  {
    hal::Mapping mapping = must(buffer->map(MapAccess::kDiscardWrite), "map for writing");
    ASSERT_EQ(mapping.size(), 4096u);
    ASSERT_NE(mapping.data(), nullptr);
    std::memcpy(mapping.data(), bytes.data(), bytes.size());
  }
  {
    hal::Mapping mapping = must(buffer->map(MapAccess::kRead, 100, 50), "map a range");
    ASSERT_EQ(mapping.size(), 50u);
    EXPECT_EQ(std::memcmp(mapping.data(), bytes.data() + 100, 50), 0);
    EXPECT_EQ(mapping.bytes().size(), 50u);
  }
  {
    hal::Mapping mapping = must(buffer->map(MapAccess::kReadWrite, 4000), "map to the end");
    ASSERT_EQ(mapping.size(), 96u);
    static_cast<uint8_t*>(mapping.data())[0] ^= 0xFF;
    bytes[4000] ^= 0xFF;
    // A moved mapping unmaps once, from its new owner.
    hal::Mapping moved = std::move(mapping);
    EXPECT_EQ(moved.size(), 96u);
  }
  std::vector<uint8_t> back(4096);
  CTS_ASSERT_OK(buffer->read_data(0, back.data(), back.size()));
  EXPECT_TRUE(bytes_equal(back, bytes));
  // The queue sees what was written through mappings.
  std::vector<uint8_t> host(4096);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->read({}, {{done, 1}}, buffer, 0, host.data(), 4096));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_TRUE(bytes_equal(host, bytes));
}

// kWrite is not kDiscardWrite: the bytes of a mapped range that the host does not write keep
// their values when it is unmapped (a driver that stages the range must read it first).
TEST_P(BufferTest, MapForWriteKeepsTheBytesNotWritten) {
  BufferRef buffer = must(allocator().allocate({}, 256), "allocate");
  std::vector<uint8_t> bytes = pattern_bytes(256, 23);
  CTS_ASSERT_OK(buffer->write_data(0, bytes.data(), bytes.size()));
  {
    hal::Mapping mapping = must(buffer->map(MapAccess::kWrite, 64, 128), "map a range for writing");
    ASSERT_EQ(mapping.size(), 128u);
    std::memset(static_cast<uint8_t*>(mapping.data()) + 32, 0x5A, 16);
  }
  std::memset(bytes.data() + 64 + 32, 0x5A, 16);
  std::vector<uint8_t> back(256);
  CTS_ASSERT_OK(buffer->read_data(0, back.data(), back.size()));
  EXPECT_TRUE(bytes_equal(back, bytes));
}

TEST_P(BufferTest, ReadWriteData) {
  BufferRef buffer = make_buffer(64, 0);
  std::vector<uint8_t> bytes = pattern_bytes(13, 22);
  CTS_ASSERT_OK(buffer->write_data(17, bytes.data(), 13));
  std::vector<uint8_t> back(13);
  CTS_ASSERT_OK(buffer->read_data(17, back.data(), 13));
  EXPECT_EQ(back, bytes);
  CTS_EXPECT_CODE(kInvalidArgument, buffer->write_data(60, bytes.data(), 5));
  CTS_EXPECT_CODE(kInvalidArgument, buffer->read_data(kHuge, back.data(), 2));
  CTS_EXPECT_OK(buffer->write_data(64, bytes.data(), 0));
}

TEST_P(BufferTest, MapOutOfRange) {
  BufferRef buffer = must(allocator().allocate({}, 64), "allocate");
  auto past_end = buffer->map(MapAccess::kRead, 60, 8);
  EXPECT_EQ(past_end.status().code(), StatusCode::kInvalidArgument)
      << past_end.status().to_string();
  auto offset_past_end = buffer->map(MapAccess::kRead, 65, 0);
  EXPECT_EQ(offset_past_end.status().code(), StatusCode::kInvalidArgument);
  auto overflow = buffer->map(MapAccess::kRead, kHuge - 1, 4);
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
  auto long_length = buffer->map(MapAccess::kRead, 0, 65);
  EXPECT_EQ(long_length.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(buffer->map(MapAccess::kRead, 64, 0).ok());
}

TEST_P(BufferTest, MapNeedsMappingUsage) {
  BufferParams params;
  params.usage = hal::kUsageTransfer | hal::kUsageDispatchStorage;
  BufferRef buffer = must(allocator().allocate(params, 64), "allocate");
  EXPECT_FALSE(buffer->map(MapAccess::kRead).ok());
  EXPECT_FALSE(buffer->map(MapAccess::kWrite, 0, 8).ok());
  uint8_t byte = 0;
  CTS_EXPECT_NOT_OK(buffer->write_data(0, &byte, 1));
  CTS_EXPECT_NOT_OK(buffer->read_data(0, &byte, 1));
  // The queue can still move its bytes.
  std::vector<uint8_t> bytes = pattern_bytes(64, 23);
  std::vector<uint8_t> back(64);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->update({}, {{done, 1}}, bytes.data(), buffer, 0, 64));
  CTS_ASSERT_OK(queue_->read({{done, 1}}, {{done, 2}}, buffer, 0, back.data(), 64));
  CTS_ASSERT_OK(wait(done, 2));
  EXPECT_EQ(back, bytes);
}

TEST_P(BufferTest, MapNeedsHostVisibleMemory) {
  BufferParams params;
  params.memory_type = hal::kMemoryDeviceLocal;
  auto buffer = allocator().allocate(params, 64);
  if (!buffer.ok()) {
    // A device may refuse the type outright; that is an error status, not a crash.
    EXPECT_NE(buffer.status().code(), StatusCode::kOk);
    return;
  }
  if ((*buffer)->memory_type() & hal::kMemoryHostVisible) {
    GTEST_SKIP() << "the device made device-local memory host-visible";
  }
  EXPECT_FALSE((*buffer)->map(MapAccess::kRead).ok());
}

TEST_P(BufferTest, SubspanOffsetsAdd) {
  BufferRef parent = make_buffer(100, 0);
  BufferRef first = must(parent->subspan(10, 50), "subspan");
  EXPECT_EQ(first->byte_offset(), 10u);
  EXPECT_EQ(first->byte_length(), 50u);
  BufferRef second = must(first->subspan(5, 20), "subspan of subspan");
  EXPECT_EQ(second->byte_offset(), 15u);
  EXPECT_EQ(second->byte_length(), 20u);
  EXPECT_EQ(second->allocation_size(), parent->allocation_size());
  EXPECT_EQ(second->storage(), parent->storage());
  EXPECT_EQ(second->usage(), parent->usage());
  EXPECT_EQ(second->device_tag(), parent->device_tag());
  BufferRef rest = must(parent->subspan(10, Buffer::kWholeBuffer), "subspan to the end");
  EXPECT_EQ(rest->byte_length(), 90u);
  BufferRef empty = must(parent->subspan(100, 0), "empty subspan at the end");
  EXPECT_EQ(empty->byte_length(), 0u);

  // Writes through the inner view land at offset 15 of the parent.
  std::vector<uint8_t> bytes = pattern_bytes(20, 24);
  CTS_ASSERT_OK(second->write_data(0, bytes.data(), 20));
  std::vector<uint8_t> expected(100, 0);
  std::copy(bytes.begin(), bytes.end(), expected.begin() + 15);
  EXPECT_EQ(read_bytes(parent), expected);
  EXPECT_EQ(read_bytes(first, 5, 20), bytes);
}

TEST_P(BufferTest, SubspanOutOfRange) {
  BufferRef parent = make_buffer(100, 0);
  BufferRef first = must(parent->subspan(10, 50), "subspan");
  EXPECT_EQ(parent->subspan(90, 20).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parent->subspan(101, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parent->subspan(kHuge, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parent->subspan(2, kHuge - 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first->subspan(40, 11).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first->subspan(51, Buffer::kWholeBuffer).status().code(), StatusCode::kInvalidArgument);
  auto range = parent->check_range(99, 2, "test range");
  EXPECT_EQ(range.status().code(), StatusCode::kInvalidArgument);
  auto whole = first->check_range(20, Buffer::kWholeBuffer, "test range");
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(*whole, 30u);
}

TEST_P(BufferTest, SubspanKeepsAllocationAlive) {
  BufferRef parent = make_buffer(64, 0x31);
  BufferRef view = must(parent->subspan(32, 32), "subspan");
  std::weak_ptr<Buffer> weak_parent = parent;
  parent.reset();
  EXPECT_EQ(read_bytes(view), std::vector<uint8_t>(32, 0x31));
  uint8_t pattern = 0x32;
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, view, 0, 32, &pattern, 1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(read_bytes(view), std::vector<uint8_t>(32, 0x32));
}

TEST_P(BufferTest, ZeroLengthBuffer) {
  BufferRef buffer = must(allocator().allocate({}, 0), "allocate 0 bytes");
  EXPECT_EQ(buffer->byte_length(), 0u);
  auto mapping = buffer->map(MapAccess::kReadWrite);
  ASSERT_TRUE(mapping.ok()) << mapping.status().to_string();
  EXPECT_EQ(mapping->size(), 0u);
  CTS_EXPECT_OK(buffer->write_data(0, nullptr, 0));
  EXPECT_EQ(buffer->subspan(0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(buffer->subspan(0, 0).ok());
  SemaphoreRef done = semaphore();
  uint8_t pattern = 1;
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, 0, 0, &pattern, 1));
  CTS_ASSERT_OK(wait(done, 1));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill({}, {}, buffer, 0, 1, &pattern, 1));
}

TEST_P(BufferTest, ManyAllocations) {
  std::vector<BufferRef> buffers;
  for (int i = 0; i < 256; ++i) {
    buffers.push_back(make_buffer(size_t(i) * 17 + 1, uint8_t(i)));
  }
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(read_bytes(buffers[i]), std::vector<uint8_t>(size_t(i) * 17 + 1, uint8_t(i)));
  }
}

// ---------------------------------------------------------------------------------------------
// Imported host memory.

struct ReleaseRecord {
  std::atomic<int> calls{0};
  std::atomic<void*> pointer{nullptr};
};

TEST_P(BufferTest, ImportHostWritesAreVisible) {
  std::vector<uint8_t> host(256, 0);
  auto record = std::make_shared<ReleaseRecord>();
  {
    BufferRef buffer = must(allocator().import_host({}, host.data(), host.size(),
                                                    [record](void* ptr) {
                                                      record->pointer = ptr;
                                                      record->calls.fetch_add(1);
                                                    }),
                            "import_host");
    EXPECT_EQ(buffer->byte_length(), 256u);
    uint32_t pattern = 0xA5A5A5A5;
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, 64, 128, &pattern, 4));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint8_t> expected(256, 0);
    std::fill(expected.begin() + 64, expected.begin() + 192, 0xA5);
    EXPECT_EQ(host, expected);
    // ... and host writes are visible to the queue.
    host[0] = 0x42;
    std::vector<uint8_t> back(1);
    CTS_ASSERT_OK(queue_->read({}, {{done, 2}}, buffer, 0, back.data(), 1));
    CTS_ASSERT_OK(wait(done, 2));
    EXPECT_EQ(back[0], 0x42);
    EXPECT_EQ(record->calls.load(), 0);
  }
  EXPECT_TRUE(eventually([&] { return record->calls.load() == 1; }));
  EXPECT_EQ(record->pointer.load(), host.data());
  grace_sleep();
  EXPECT_EQ(record->calls.load(), 1);
}

TEST_P(BufferTest, ImportHostReleasedAfterLastUse) {
  std::vector<uint8_t> host(128, 0);
  auto record = std::make_shared<ReleaseRecord>();
  BufferRef buffer = must(allocator().import_host({}, host.data(), host.size(),
                                                  [record](void*) { record->calls.fetch_add(1); }),
                          "import_host");
  BufferRef view = must(buffer->subspan(16, 64), "subspan");
  SemaphoreRef gate = semaphore(), done = semaphore();
  uint8_t pattern = 0x77;
  CTS_ASSERT_OK(queue_->fill({{gate, 1}}, {{done, 1}}, view, 0, 64, &pattern, 1));
  buffer.reset();
  view.reset();
  grace_sleep();
  // The pending fill still uses the memory.
  EXPECT_EQ(record->calls.load(), 0);
  CTS_ASSERT_OK(gate->signal(1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_TRUE(eventually([&] { return record->calls.load() == 1; }));
  std::vector<uint8_t> expected(128, 0);
  std::fill(expected.begin() + 16, expected.begin() + 80, 0x77);
  EXPECT_EQ(host, expected);
  grace_sleep();
  EXPECT_EQ(record->calls.load(), 1);
}

TEST_P(BufferTest, ImportHostWithoutReleaseFunction) {
  std::vector<uint8_t> host(32, 0);
  BufferRef buffer =
      must(allocator().import_host({}, host.data(), host.size(), nullptr), "import_host");
  uint8_t pattern = 3;
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, 0, 32, &pattern, 1));
  CTS_ASSERT_OK(wait(done, 1));
  EXPECT_EQ(host, std::vector<uint8_t>(32, 3));
}

}  // namespace
}  // namespace kiln::cts
