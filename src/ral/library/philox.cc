#include "ral/library/philox.h"

#include <algorithm>
#include <cmath>

#include "ral/library/philox_x86.h"

namespace kiln::ral {

PhiloxCode best_philox_code() {
  static const PhiloxCode best = [] {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return PhiloxCode::kAvx512;
    if (__builtin_cpu_supports("avx2")) return PhiloxCode::kAvx2;
#endif
    return PhiloxCode::kPortable;
  }();
  return best;
}

bool philox_code_runs(PhiloxCode code) { return code <= best_philox_code(); }

PhiloxCounter PhiloxStream::block(uint64_t b) const {
  return philox4x32_10({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), call_site, run},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

uint32_t PhiloxStream::word(uint64_t i) const { return block(i / 4)[i % 4]; }

namespace {

// The blocks one pass at a time, without vector instructions: the remainder of the vector code's
// passes, and everything where the processor has none.
void fill_portable(const PhiloxStream& stream, uint64_t first_block, uint32_t* out, uint64_t count) {
  // Lanes of kLanes blocks in structure-of-arrays form, so that the compiler vectorizes the
  // rounds across blocks (32x32->64-bit multiplies are one vector instruction).
  constexpr uint64_t kLanes = 16;
  const uint32_t key0 = static_cast<uint32_t>(stream.seed), key1 = static_cast<uint32_t>(stream.seed >> 32);
  uint64_t done = 0;
  while (done < count) {
    const uint64_t b0 = first_block + done / 4;
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (uint64_t l = 0; l < kLanes; ++l) {
      c0[l] = static_cast<uint32_t>(b0 + l);
      c1[l] = static_cast<uint32_t>((b0 + l) >> 32);
      c2[l] = stream.call_site;
      c3[l] = stream.run;
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

// The whole passes of the vector code among `count` words, as blocks (none for kPortable).
uint64_t vector_blocks(PhiloxCode code, uint64_t count) {
  return code == PhiloxCode::kPortable ? 0 : count / 4 / x86::kBlocksPerPass * x86::kBlocksPerPass;
}

void fill_vector(PhiloxCode code, const PhiloxStream& stream, uint64_t first_block, uint64_t blocks, uint32_t* words,
                 float* numbers, const x86::UniformF32* uniform) {
#if defined(__x86_64__)
  if (code == PhiloxCode::kAvx512) x86::fill_avx512(stream, first_block, blocks, words, numbers, uniform);
  if (code == PhiloxCode::kAvx2) x86::fill_avx2(stream, first_block, blocks, words, numbers, uniform);
#endif
}

}  // namespace

void PhiloxStream::fill(uint64_t first_block, uint32_t* out, uint64_t count, PhiloxCode code) const {
  const uint64_t blocks = vector_blocks(code, count);
  fill_vector(code, *this, first_block, blocks, out, nullptr, nullptr);
  fill_portable(*this, first_block + blocks, out + 4 * blocks, count - 4 * blocks);
}

void PhiloxStream::fill_uniform(uint64_t first_block, float* out, uint64_t count, float lo, float hi,
                                PhiloxCode code) const {
  const x86::UniformF32 uniform{lo, hi, std::nextafter(hi, lo)};
  const uint64_t blocks = vector_blocks(code, count);
  fill_vector(code, *this, first_block, blocks, nullptr, out, &uniform);
  constexpr uint64_t kChunk = 256;  // a multiple of 4: chunks start on a block
  uint32_t words[kChunk];
  for (uint64_t at = 4 * blocks; at < count; at += kChunk) {
    const uint64_t n = std::min(kChunk, count - at);
    fill_portable(*this, first_block + at / 4, words, n);
    for (uint64_t i = 0; i < n; ++i) out[at + i] = scale_uniform(uniform_f32(words[i]), lo, hi);
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
