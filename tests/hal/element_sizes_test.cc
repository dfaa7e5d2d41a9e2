// CTS: buffers of elements of every size the element types have (1 byte: bool, i8, u8; 2: i16,
// u16, f16, bf16; 4: i32, u32, f32; 8: i64, u64, f64). Fills repeat one element (the HAL's
// patterns are 1, 2 or 4 bytes: an 8-byte one is refused, so 8-byte values go through updates,
// or a 4-byte pattern where both halves are alike); updates, copies, reads and writes move runs
// of elements at offsets that are odd multiples of 1 and 2 bytes, so that 2, 4 and 8-byte
// elements sit off their alignment, through the queue and through a command buffer. Every case
// pre-fills the buffer with a sentinel and checks that the bytes around the target are untouched.
#include <cstring>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

constexpr uint8_t kSentinel = 0xCD;

class ElementSizesTest : public CtsTest {
 protected:
  // Waits for nothing: the caller has waited. The buffer must be sentinel but `expected` at
  // `offset`.
  void expect_region(const BufferRef& buffer, size_t offset, const std::vector<uint8_t>& expected) {
    std::vector<uint8_t> whole(buffer->byte_length(), kSentinel);
    std::copy(expected.begin(), expected.end(), whole.begin() + static_cast<std::ptrdiff_t>(offset));
    EXPECT_TRUE(bytes_equal(read_bytes(buffer), whole));
  }
};
KILN_CTS_INSTANTIATE(ElementSizesTest);

// One element value of each size, as its bytes in memory (little-endian host).
struct Element {
  const char* type;
  std::vector<uint8_t> bytes;
};

template <typename T>
std::vector<uint8_t> bytes_of(T value) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

std::vector<Element> pattern_elements() {
  return {
      {"bool true", {0x01}},
      {"i8 -1", bytes_of<int8_t>(-1)},
      {"u8 128", bytes_of<uint8_t>(128)},
      {"f16 1.0", bytes_of<uint16_t>(0x3C00)},
      {"bf16 -2.0", bytes_of<uint16_t>(0xC000)},
      {"i16 -2", bytes_of<int16_t>(-2)},
      {"f32 0.1", bytes_of<float>(0.1f)},
      {"i32 least", bytes_of<int32_t>(INT32_MIN)},
      {"u32 0xDEADBEEF", bytes_of<uint32_t>(0xDEADBEEFu)},
  };
}

std::vector<uint8_t> repeated(const std::vector<uint8_t>& element, size_t count) {
  std::vector<uint8_t> out;
  out.reserve(element.size() * count);
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), element.begin(), element.end());
  return out;
}

TEST_P(ElementSizesTest, FillsRepeatElementsOfOneTwoAndFourBytes) {
  for (const Element& element : pattern_elements()) {
    const size_t size = element.bytes.size();
    // The first element written is element 1, 3 or 5 of the buffer: an odd multiple of its size.
    for (size_t first : {size_t{1}, size_t{3}, size_t{5}}) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{1001}}) {
        SCOPED_TRACE(testing::Message() << element.type << ", elements [" << first << ", " << first + count << ")");
        BufferRef buffer = make_buffer((first + count + 3) * size, kSentinel);
        SemaphoreRef done = semaphore();
        CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, first * size, count * size, element.bytes.data(), size));
        CTS_ASSERT_OK(wait(done, 1));
        expect_region(buffer, first * size, repeated(element.bytes, count));
      }
    }
  }
}

TEST_P(ElementSizesTest, EightByteElementsAreFilledByFourByteHalvesAndWrittenByUpdates) {
  const size_t count = 257;
  BufferRef buffer = make_buffer((count + 4) * 8, kSentinel);
  // No 8-byte pattern: INVALID_ARGUMENT, nothing written.
  const std::vector<uint8_t> f64 = bytes_of<double>(-0.1);
  CTS_EXPECT_CODE(kInvalidArgument, queue_->fill({}, {}, buffer, 8, count * 8, f64.data(), 8));
  auto bad = hal::make_fill(buffer, 8, count * 8, f64.data(), 8);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().to_string();
  EXPECT_EQ(read_bytes(buffer), std::vector<uint8_t>(buffer->byte_length(), kSentinel));
  // An i64 of -1 (and any value whose halves are alike) is a 4-byte pattern, from element 1;
  // then arbitrary u64 values by an update from element 3.
  const std::vector<uint8_t> minus_one = bytes_of<int64_t>(-1);
  const uint32_t half = 0xFFFFFFFFu;
  std::vector<uint64_t> values(count - 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0x0123456789ABCDEFull * (i + 1);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->fill({}, {{done, 1}}, buffer, 8, count * 8, &half, 4));
  CTS_ASSERT_OK(queue_->update({{done, 1}}, {{done, 2}}, values.data(), buffer, 3 * 8, values.size() * 8));
  CTS_ASSERT_OK(wait(done, 2));
  std::vector<uint8_t> expected = repeated(minus_one, 2);
  const std::vector<uint8_t> moved(reinterpret_cast<const uint8_t*>(values.data()),
                                   reinterpret_cast<const uint8_t*>(values.data() + values.size()));
  expected.insert(expected.end(), moved.begin(), moved.end());
  expect_region(buffer, 8, expected);
}

// Runs of elements of each size at offsets that are odd multiples of 1 and 2 bytes (off the
// alignment of 2, 4 and 8-byte elements): update into a buffer, copy to another, read back and
// write again, chained on one timeline.
TEST_P(ElementSizesTest, UpdatesCopiesReadsAndWritesAtOddOffsets) {
  for (size_t size : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{17}, size_t{4099}}) {
      for (size_t offset : {size_t{1}, size_t{3}, size_t{2}, size_t{6}}) {
        SCOPED_TRACE(testing::Message() << count << " elements of " << size << " bytes at byte " << offset);
        const size_t length = count * size;
        const std::vector<uint8_t> data = pattern_bytes(length, static_cast<uint32_t>(size * 131 + count + offset));
        BufferRef a = make_buffer(offset + length + 5, kSentinel);
        BufferRef b = make_buffer(2 * offset + length + 5, kSentinel);
        BufferRef c = make_buffer(offset + length + 5, kSentinel);
        std::vector<uint8_t> host(length + 1, 0);
        SemaphoreRef done = semaphore();
        CTS_ASSERT_OK(queue_->update({}, {{done, 1}}, data.data(), a, offset, length));
        CTS_ASSERT_OK(queue_->copy({{done, 1}}, {{done, 2}}, a, offset, b, 2 * offset, length));
        CTS_ASSERT_OK(queue2_->read({{done, 2}}, {{done, 3}}, b, 2 * offset, host.data() + 1, length));
        CTS_ASSERT_OK(queue_->write({{done, 3}}, {{done, 4}}, host.data() + 1, c, offset, length));
        CTS_ASSERT_OK(wait(done, 4));
        expect_region(a, offset, data);
        expect_region(b, 2 * offset, data);
        expect_region(c, offset, data);
        EXPECT_TRUE(bytes_equal(std::vector<uint8_t>(host.begin() + 1, host.end()), data));
      }
    }
  }
}

// The same moves recorded in one command buffer: a fill of 2-byte elements at an odd multiple of
// 2 bytes, an update of 8-byte elements at an odd byte, a copy of 4-byte elements between odd
// offsets, each after a barrier.
TEST_P(ElementSizesTest, CommandBufferMovesElementsAtOddOffsets) {
  const size_t count = 301;
  BufferRef a = make_buffer(8 * count + 16, kSentinel);
  BufferRef b = make_buffer(8 * count + 16, kSentinel);
  const uint16_t bf16_one = 0x3F80;
  const std::vector<uint8_t> data = pattern_bytes(8 * count, 77);
  auto commands = device().create_command_buffer();
  CTS_ASSERT_OK(commands->fill(a, 2, 2 * count, &bf16_one, 2));
  CTS_ASSERT_OK(commands->barrier());
  CTS_ASSERT_OK(commands->update(data.data(), a, 2 * count + 3, 8 * (count / 4)));
  CTS_ASSERT_OK(commands->barrier());
  CTS_ASSERT_OK(commands->copy(a, 1, b, 3, 4 * count));
  CTS_ASSERT_OK(commands->finalize());
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->execute({}, {{done, 1}}, commands));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint8_t> expected_a(a->byte_length(), kSentinel);
  for (size_t i = 0; i < count; ++i) std::memcpy(&expected_a[2 + 2 * i], &bf16_one, 2);
  std::copy(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(8 * (count / 4)),
            expected_a.begin() + static_cast<std::ptrdiff_t>(2 * count + 3));
  EXPECT_TRUE(bytes_equal(read_bytes(a), expected_a));
  std::vector<uint8_t> expected_b(b->byte_length(), kSentinel);
  std::copy(expected_a.begin() + 1, expected_a.begin() + 1 + static_cast<std::ptrdiff_t>(4 * count), expected_b.begin() + 3);
  EXPECT_TRUE(bytes_equal(read_bytes(b), expected_b));
}

}  // namespace
}  // namespace kiln::cts
