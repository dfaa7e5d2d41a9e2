#include "ral/library/philox.h"

#include <cmath>

namespace kiln::ral {

PhiloxCounter PhiloxStream::block(uint64_t b) const {
  return philox4x32_10({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), call_site, run},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

uint32_t PhiloxStream::word(uint64_t i) const { return block(i / 4)[i % 4]; }

void PhiloxStream::fill(uint64_t first_block, uint32_t* out, uint64_t count) const {
  // Lanes of kLanes blocks in structure-of-arrays form, so that the compiler vectorizes the
  // rounds across blocks (32x32->64-bit multiplies are one vector instruction).
  constexpr uint64_t kLanes = 16;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  uint64_t done = 0;
  while (done < count) {
    const uint64_t b0 = first_block + done / 4;
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (uint64_t l = 0; l < kLanes; ++l) {
      c0[l] = static_cast<uint32_t>(b0 + l);
      c1[l] = static_cast<uint32_t>((b0 + l) >> 32);
      c2[l] = call_site;
      c3[l] = run;
    }
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      for (uint64_t l = 0; l < kLanes; ++l) {
        const uint64_t p0 = uint64_t{0xD2511F53} * c0[l];
        const uint64_t p1 = uint64_t{0xCD9E8D57} * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      k0 += 0x9E3779B9;
      k1 += 0xBB67AE85;
    }
    for (uint64_t l = 0; l < kLanes && done < count; ++l) {
      const uint32_t words[4] = {c0[l], c1[l], c2[l], c3[l]};
      for (int w = 0; w < 4 && done < count; ++w) out[done++] = words[w];
    }
  }
}

float uniform_f32(uint32_t word) { return static_cast<float>(word >> 8) * 0x1.0p-24f; }

double uniform_f64(uint32_t low, uint32_t high) {
  const uint64_t bits = (static_cast<uint64_t>(high) << 32) | low;
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

float scale_uniform(float u, float lo, float hi) {
  const float v = lo + (hi - lo) * u;
  return v < hi || lo == hi ? v : std::nextafter(hi, lo);
}

double scale_uniform(double u, double lo, double hi) {
  const double v = lo + (hi - lo) * u;
  return v < hi || lo == hi ? v : std::nextafter(hi, lo);
}

}  // namespace kiln::ral
