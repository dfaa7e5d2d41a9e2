// The conversions that narrow gemm's f32 copies go through (ral/library/narrow_floats.h), vector
// paths and tails alike, against the language's scalar rules (kiln/loop/op_eval.h): every f16 and
// bf16 widened, and f32 values across the whole range (every 65521st bit pattern and the edges:
// halfway cases, the largest finite values, subnormals, infinities, NaNs with payloads) narrowed.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/loop/op_eval.h"
#include "ral/library/narrow_floats.h"

namespace kiln::ral::library {
namespace {

std::vector<float> f32_values() {
  std::vector<float> out;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 65521) out.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (const uint32_t bits : {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00008000u, 0x00018000u,
                              0x3f808000u, 0x3f818000u, 0x3f808001u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u,
                              0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u, 0x387fc000u,
                              0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu,
                              0xffe12345u, 0x7fffffffu}) {
    out.push_back(std::bit_cast<float>(bits));
  }
  return out;
}

// Lengths that leave a tail after the vectors, and one shorter than a vector.
constexpr int64_t kShort = 5;

TEST(NarrowFloatsTest, WideningIsExact) {
  std::vector<BFloat16> b(65536 + 7);
  std::vector<Half> h(b.size());
  for (size_t i = 0; i < b.size(); ++i) b[i].bits = h[i].bits = static_cast<uint16_t>(i);
  for (const int64_t count : {static_cast<int64_t>(b.size()), kShort}) {
    std::vector<float> wb(b.size() + 1, -1.0f), wh(h.size() + 1, -1.0f);
    widen(b.data(), count, wb.data());
    widen(h.data(), count, wh.data());
    for (int64_t i = 0; i < count; ++i) {
      const double want_b = ir::bf16_value(b[i].bits), want_h = ir::f16_value(h[i].bits);
      if (std::isnan(want_b)) {
        EXPECT_TRUE(std::isnan(wb[i])) << i;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(wb[i]), std::bit_cast<uint32_t>(static_cast<float>(want_b))) << i;
      }
      if (std::isnan(want_h)) {
        EXPECT_TRUE(std::isnan(wh[i])) << i;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(wh[i]), std::bit_cast<uint32_t>(static_cast<float>(want_h))) << i;
      }
    }
    EXPECT_EQ(wb[count], -1.0f) << "wrote past count";
    EXPECT_EQ(wh[count], -1.0f) << "wrote past count";
  }
}

TEST(NarrowFloatsTest, NarrowingRoundsAsTheLanguageDoes) {
  const std::vector<float> values = f32_values();
  for (const int64_t count : {static_cast<int64_t>(values.size()), kShort}) {
    std::vector<BFloat16> b(values.size() + 1, BFloat16{0x1234});
    std::vector<Half> h(values.size() + 1, Half{0x1234});
    narrow(values.data(), count, b.data());
    narrow(values.data(), count, h.data());
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
      EXPECT_EQ(b[i].bits, ir::bf16_bits(values[i])) << std::hex << bits;
      EXPECT_EQ(h[i].bits, ir::f16_bits(values[i])) << std::hex << bits;
    }
    EXPECT_EQ(b[count].bits, 0x1234) << "wrote past count";
    EXPECT_EQ(h[count].bits, 0x1234) << "wrote past count";
  }
}

}  // namespace
}  // namespace kiln::ral::library
