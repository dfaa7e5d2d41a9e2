// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based generator of the random_* library functions, and the mapping from
// (seed, call site, run, element) to numbers. docs/ral.md states the mapping; the words match
// the authors' known-answer vectors and randomgen's Philox(number=4, width=32).
#pragma once

#include <array>
#include <cstdint>

namespace kiln::ral {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 on `counter` with `key`: four 32-bit words. Inline, so that loops
// over many blocks (PhiloxStream::fill) vectorize across blocks.
inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint64_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kMul0 * c[0];
    const uint64_t p1 = kMul1 * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

// The code that fills many blocks: the widest vector instructions the processor runs (best),
// or a narrower choice, so that tests compare every kind this machine has.
enum class PhiloxCode { kPortable, kAvx2, kAvx512 };
PhiloxCode best_philox_code();
bool philox_code_runs(PhiloxCode code);

// The stream of one call site in one run: key = the seed's low and high words; block b has the
// counter (b's low word, b's high word, call_site, run).
struct PhiloxStream {
  uint64_t seed = 0;
  uint32_t call_site = 0;
  uint32_t run = 0;
  PhiloxCounter block(uint64_t b) const;
  // The i-th 32-bit word of the stream: word i % 4 of block i / 4.
  uint32_t word(uint64_t i) const;
  // Words [4 * first_block, 4 * first_block + count) into `out`, many blocks at a time.
  void fill(uint64_t first_block, uint32_t* out, uint64_t count, PhiloxCode code = best_philox_code()) const;
  // The uniform f32 numbers in [lo, hi) of those words, scale_uniform(uniform_f32(word), lo, hi),
  // made as the words are (no pass over a buffer of words).
  void fill_uniform(uint64_t first_block, float* out, uint64_t count, float lo, float hi,
                    PhiloxCode code = best_philox_code()) const;
};

// Element i of a uniform f32 tensor: the top 24 bits of word i as a fraction in [0, 1).
float uniform_f32(uint32_t word);
// Element i of a uniform f64 tensor: words 2i (low) and 2i+1 (high), top 53 bits, in [0, 1).
double uniform_f64(uint32_t low, uint32_t high);
// lo + (hi - lo) * u, kept below hi when rounding would reach it (and lo when lo == hi).
float scale_uniform(float u, float lo, float hi);
double scale_uniform(double u, double lo, double hi);

}  // namespace kiln::ral
