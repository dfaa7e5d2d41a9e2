// CTS: fills, updates, copies, reads and writes over sizes from 1 byte to 1 MiB, odd offsets and
// subspans. Every case pre-fills the whole buffer with a sentinel and checks that bytes outside
// the target range are untouched.
#include <algorithm>
#include <cstring>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

class TransferTest : public CtsTest {
 protected:
  static constexpr uint8_t kSentinel = 0xCD;
  static constexpr size_t kTail = 29;

  // Waits for `done` (at 1) and checks the buffer is sentinel except `expected` at `offset`.
  void expect_region(const BufferRef& buffer, size_t offset, const std::vector<uint8_t>& expected,
                     uint8_t sentinel = kSentinel) {
    std::vector<uint8_t> whole(buffer->byte_length(), sentinel);
    std::copy(expected.begin(), expected.end(), whole.begin() + offset);
    EXPECT_TRUE(bytes_equal(read_bytes(buffer), whole));
  }
};
KILN_CTS_INSTANTIATE(TransferTest);

constexpr size_t kSizes[] = {1, 2, 3, 7, 64, 1000, 4096, 65537, size_t{1} << 20};

std::vector<uint8_t> fill_bytes(size_t length, const uint8_t* pattern, size_t pattern_size) {
  std::vector<uint8_t> bytes(length);
  for (size_t i = 0; i < length; ++i) bytes[i] = pattern[i % pattern_size];
  return bytes;
}

TEST_P(TransferTest, Fill) {
  const uint8_t pattern[4] = {0xA1, 0xB2, 0xC3, 0xD4};
  for (size_t pattern_size : {1, 2, 4}) {
    // Odd for 1-byte patterns; aligned to the pattern but not to 8 otherwise.
    const size_t offset = pattern_size == 1 ? 37 : pattern_size == 2 ? 38 : 36;
    for (size_t size : kSizes) {
      size_t length = size / pattern_size * pattern_size;
      if (length == 0) continue;
      SCOPED_TRACE(testing::Message() << "pattern " << pattern_size << " length " << length);
      BufferRef buffer = make_buffer(offset + length + kTail, kSentinel);
      SemaphoreRef done = semaphore();
      CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, offset, length, pattern, pattern_size));
      CTS_ASSERT_OK(wait(done, 1));
      expect_region(buffer, offset, fill_bytes(length, pattern, pattern_size));
    }
  }
}

TEST_P(TransferTest, Update) {
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> bytes = pattern_bytes(size, uint32_t(size));
    BufferRef buffer = make_buffer(37 + size + kTail, kSentinel);
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->update({}, {{done, 1}}, bytes.data(), buffer, 37, size));
    CTS_ASSERT_OK(wait(done, 1));
    expect_region(buffer, 37, bytes);
  }
}

TEST_P(TransferTest, CopyBetweenBuffers) {
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> source_bytes = pattern_bytes(13 + size + 5, uint32_t(size) + 1);
    BufferRef source = make_buffer(source_bytes);
    BufferRef target = make_buffer(37 + size + kTail, kSentinel);
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->copy({}, {{done, 1}}, source, 13, target, 37, size));
    CTS_ASSERT_OK(wait(done, 1));
    expect_region(
        target, 37,
        std::vector<uint8_t>(source_bytes.begin() + 13, source_bytes.begin() + 13 + size));
    EXPECT_TRUE(bytes_equal(read_bytes(source), source_bytes));
  }
}

TEST_P(TransferTest, CopyWithinOneBuffer) {
  for (size_t size : {size_t{1}, size_t{7}, size_t{4096}, size_t{65537}}) {
    SCOPED_TRACE(size);
    // [0, size) is the source; [size + 3, 2 * size + 3) the target; 3 + kTail sentinel bytes.
    std::vector<uint8_t> bytes = pattern_bytes(size, 99);
    std::vector<uint8_t> initial(2 * size + 3 + kTail, kSentinel);
    std::copy(bytes.begin(), bytes.end(), initial.begin());
    BufferRef buffer = make_buffer(initial);
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->copy({}, {{done, 1}}, buffer, 0, buffer, size + 3, size));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint8_t> expected = initial;
    std::copy(bytes.begin(), bytes.end(), expected.begin() + size + 3);
    EXPECT_TRUE(bytes_equal(read_bytes(buffer), expected));
  }
}

TEST_P(TransferTest, Read) {
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> bytes = pattern_bytes(11 + size + 3, uint32_t(size) + 2);
    BufferRef buffer = make_buffer(bytes);
    std::vector<uint8_t> host(5 + size + 7, kSentinel);
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->read({}, {{done, 1}}, buffer, 11, host.data() + 5, size));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint8_t> expected(host.size(), kSentinel);
    std::copy(bytes.begin() + 11, bytes.begin() + 11 + size, expected.begin() + 5);
    EXPECT_TRUE(bytes_equal(host, expected));
  }
}

TEST_P(TransferTest, Write) {
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> host = pattern_bytes(size + 9, uint32_t(size) + 3);
    BufferRef buffer = make_buffer(37 + size + kTail, kSentinel);
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->write({}, {{done, 1}}, host.data() + 9, buffer, 37, size));
    CTS_ASSERT_OK(wait(done, 1));
    expect_region(buffer, 37, std::vector<uint8_t>(host.begin() + 9, host.end()));
  }
}

// Past what a driver stages (CUDA: 16 MiB, above which the driver's own copy moves the caller's
// memory), a write and a read still move every byte, at odd offsets, each waiting for the other
// through the semaphore.
TEST_P(TransferTest, TransfersLongerThanTheStagingRing) {
  const size_t size = (size_t{80} << 20) + 13;
  std::vector<uint8_t> host = pattern_bytes(size, 0x5EED);
  BufferRef buffer = make_buffer(7 + size + kTail, kSentinel);
  std::vector<uint8_t> back(size + 3, kSentinel);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->write({}, {{done, 1}}, host.data(), buffer, 7, size));
  CTS_ASSERT_OK(queue_->read({{done, 1}}, {{done, 2}}, buffer, 7, back.data() + 3, size));
  CTS_ASSERT_OK(wait(done, 2));
  EXPECT_TRUE(std::equal(host.begin(), host.end(), back.begin() + 3));
  EXPECT_EQ(back[0], kSentinel);
}

TEST_P(TransferTest, Subspans) {
  // A parent of 256 sentinel bytes; views at [8, 8 + 200) and, inside it, [8 + 40, 8 + 40 + 100).
  BufferRef parent = make_buffer(256, kSentinel);
  BufferRef outer = must(parent->subspan(8, 200), "subspan");
  BufferRef inner = must(outer->subspan(40, 100), "subspan of subspan");
  std::vector<uint8_t> expected(256, kSentinel);

  const uint32_t pattern = 0x01020304;
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, inner, 4, 20, &pattern, 4));  // [52, 72)
  for (size_t i = 0; i < 20; ++i)
    expected[52 + i] = reinterpret_cast<const uint8_t*>(&pattern)[i % 4];
  std::vector<uint8_t> bytes = pattern_bytes(33, 12);
  CTS_ASSERT_OK(
      queue_->update({{done, 1}}, {{done, 2}}, bytes.data(), inner, 67, 33));  // [115, 148)
  std::copy(bytes.begin(), bytes.end(), expected.begin() + 115);
  CTS_ASSERT_OK(
      queue_->copy({{done, 2}}, {{done, 3}}, inner, 63, outer, 1, 37));  // [111,148) → [9,46)
  CTS_ASSERT_OK(wait(done, 3));
  std::vector<uint8_t> moved(expected.begin() + 111, expected.begin() + 148);
  std::copy(moved.begin(), moved.end(), expected.begin() + 9);
  EXPECT_TRUE(bytes_equal(read_bytes(parent), expected));

  std::vector<uint8_t> host(100, 0);
  CTS_ASSERT_OK(queue_->read({}, {{done, 4}}, inner, 0, host.data(), 100));
  CTS_ASSERT_OK(wait(done, 4));
  EXPECT_TRUE(
      bytes_equal(host, std::vector<uint8_t>(expected.begin() + 48, expected.begin() + 148)));
  // Ranges are checked against the view, not the allocation.
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill({}, {}, inner, 0, 104, &pattern, 4));
  CTS_EXPECT_CODE(kInvalidArgument, queue_->copy({}, {}, outer, 0, inner, 90, 11));
}

TEST_P(TransferTest, WholeBufferLengthMeansToTheEnd) {
  // kWholeBuffer is "to the end" for every command that takes a length, measured on the view.
  constexpr size_t W = hal::Buffer::kWholeBuffer;
  BufferRef parent = make_buffer(96, kSentinel);
  BufferRef view = must(parent->subspan(16, 64), "subspan");  // [16, 80)
  BufferRef other = make_buffer(64, kSentinel);
  std::vector<uint8_t> expected(96, kSentinel);
  SemaphoreRef done = semaphore();

  const uint16_t pattern = 0xA1B2;
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, view, 8, W, &pattern, 2));  // [24, 80)
  for (size_t i = 24; i < 80; ++i)
    expected[i] = reinterpret_cast<const uint8_t*>(&pattern)[(i - 24) % 2];
  std::vector<uint8_t> host = pattern_bytes(64, 5);
  CTS_ASSERT_OK(queue_->write({{done, 1}}, {{done, 2}}, host.data(), view, 60, W));  // [76, 80)
  std::copy(host.begin(), host.begin() + 4, expected.begin() + 76);
  // The rest of the source from offset 40 (24 bytes) into `other` at 8.
  CTS_ASSERT_OK(queue_->copy({{done, 2}}, {{done, 3}}, view, 40, other, 8, W));
  std::vector<uint8_t> read_back(64, 0);
  CTS_ASSERT_OK(queue_->read({{done, 3}}, {{done, 4}}, view, 0, read_back.data(), W));
  CTS_ASSERT_OK(wait(done, 4));
  EXPECT_TRUE(bytes_equal(read_bytes(parent), expected));
  EXPECT_TRUE(bytes_equal(read_back, std::vector<uint8_t>(expected.begin() + 16,
                                                          expected.begin() + 80)));
  std::vector<uint8_t> other_expected(64, kSentinel);
  std::copy(expected.begin() + 56, expected.begin() + 80, other_expected.begin() + 8);
  EXPECT_TRUE(bytes_equal(read_bytes(other), other_expected));

  // Refusals name the real problem: a fill to the end that is not a whole number of patterns,
  // and a copy whose rest of the source does not fit in the target.
  const uint32_t wide = 0x01020304;
  CTS_ASSERT_OK(queue_->fill({}, {{done, 5}}, view, 4, W, &wide, 4));  // 60 bytes: fine
  CTS_ASSERT_OK(wait(done, 5));
  BufferRef odd = must(parent->subspan(0, 30), "subspan");
  Status misaligned = queue_->fill({}, {}, odd, 0, W, &wide, 4);  // 30 bytes
  CTS_EXPECT_CODE(kInvalidArgument, misaligned);
  EXPECT_NE(misaligned.message().find("length 30"), std::string::npos) << misaligned.to_string();
  Status too_big = queue_->copy({}, {}, parent, 0, other, 0, W);  // 96 bytes into 64
  CTS_EXPECT_CODE(kInvalidArgument, too_big);
  EXPECT_NE(too_big.message().find("copy target"), std::string::npos) << too_big.to_string();
}

TEST_P(TransferTest, OddSubspanByteFill) {
  BufferRef parent = make_buffer(64, kSentinel);
  BufferRef view = must(parent->subspan(7, 21), "subspan");
  uint8_t pattern = 0x5A;
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, view, 3, 17, &pattern, 1));
  CTS_ASSERT_OK(wait(done, 1));
  expect_region(parent, 10, std::vector<uint8_t>(17, 0x5A));
}

TEST_P(TransferTest, ZeroLengthOperationsSignal) {
  BufferRef buffer = make_buffer(64, kSentinel);
  BufferRef other = make_buffer(64, kSentinel);
  BufferRef empty = must(allocator().allocate({}, 0), "allocate 0");
  std::vector<uint8_t> host(8, 0x11);
  const uint32_t pattern = 0xFFFFFFFF;
  SemaphoreRef done = semaphore();
  uint64_t v = 0;
  // A chain on one timeline: each operation waits for the previous one's value.
  auto step = [&]() -> std::pair<SemaphoreList, SemaphoreList> {
    ++v;
    return {{{done, v - 1}}, {{done, v}}};
  };
  for (size_t offset : {size_t{0}, size_t{64}}) {
    auto [w1, s1] = step();
    CTS_ASSERT_OK(queue_->fill(w1, s1, buffer, offset, 0, &pattern, 4));
    auto [w2, s2] = step();
    CTS_ASSERT_OK(queue_->fill(w2, s2, buffer, offset, 0, &pattern, 1));
    auto [w3, s3] = step();
    CTS_ASSERT_OK(queue_->update(w3, s3, host.data(), buffer, offset, 0));
    auto [w4, s4] = step();
    CTS_ASSERT_OK(queue_->copy(w4, s4, buffer, offset, other, offset, 0));
    auto [w5, s5] = step();
    CTS_ASSERT_OK(queue_->read(w5, s5, buffer, offset, host.data(), 0));
    auto [w6, s6] = step();
    CTS_ASSERT_OK(queue_->write(w6, s6, host.data(), buffer, offset, 0));
  }
  auto [w7, s7] = step();
  CTS_ASSERT_OK(queue_->fill(w7, s7, empty, 0, 0, &pattern, 1));
  auto [w8, s8] = step();
  CTS_ASSERT_OK(queue_->copy(w8, s8, empty, 0, empty, 0, 0));
  CTS_ASSERT_OK(wait(done, v));
  EXPECT_EQ(value_of(done), v);
  EXPECT_EQ(read_bytes(buffer), std::vector<uint8_t>(64, kSentinel));
  EXPECT_EQ(read_bytes(other), std::vector<uint8_t>(64, kSentinel));
  EXPECT_EQ(host, std::vector<uint8_t>(8, 0x11));
}

TEST_P(TransferTest, ChainedTransfersWithoutHostWaits) {
  // fill → update (overwrites a part) → copy to a second buffer → read back, all chained.
  const size_t size = 4096 + 3;
  BufferRef a = make_buffer(size, kSentinel);
  BufferRef b = make_buffer(size, kSentinel);
  std::vector<uint8_t> bytes = pattern_bytes(500, 13);
  std::vector<uint8_t> host(size, 0);
  uint16_t pattern = 0x4321;
  SemaphoreRef t = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{t, 1}}, a, 2, 4000, &pattern, 2));
  CTS_ASSERT_OK(queue2_->update({{t, 1}}, {{t, 2}}, bytes.data(), a, 1001, 500));
  CTS_ASSERT_OK(queue_->copy({{t, 2}}, {{t, 3}}, a, 0, b, 0, size));
  CTS_ASSERT_OK(queue2_->read({{t, 3}}, {{t, 4}}, b, 0, host.data(), size));
  CTS_ASSERT_OK(wait(t, 4));
  std::vector<uint8_t> expected(size, kSentinel);
  for (size_t i = 2; i < 4002; i += 2) std::memcpy(&expected[i], &pattern, 2);
  std::copy(bytes.begin(), bytes.end(), expected.begin() + 1001);
  EXPECT_TRUE(bytes_equal(host, expected));
  EXPECT_TRUE(bytes_equal(read_bytes(b), expected));
}

}  // namespace
}  // namespace kiln::cts
