// Deterministic pseudo-random numbers (splitmix64): the same seed gives the same values on every
// machine and compiler, so random initializers and random inputs are reproducible.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  // A generator for one named stream of a seed ("w" and "b" of seed 0 differ).
  static Random for_name(uint64_t seed, std::string_view name);

  uint64_t next_u64();
  double uniform();                          // [0, 1)
  double uniform(double lo, double hi);      // [lo, hi)
  double normal(double mean, double stddev); // Box-Muller

 private:
  uint64_t state_;
};

}  // namespace kiln
