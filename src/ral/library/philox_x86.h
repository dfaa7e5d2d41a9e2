// Philox4x32-10 with x86 vector instructions (AVX2, AVX-512F), chosen at run time so that the
// generic x86-64 build uses them where the processor has them. Internal to philox.cc.
#pragma once

#include <cstdint>

#include "ral/library/philox.h"

namespace kiln::ral::x86 {

// The blocks one pass of the vector loops computes: `blocks` below is a multiple of this.
constexpr uint64_t kBlocksPerPass = 32;

// Uniform f32 numbers in [lo, hi): below_hi is nextafter(hi, lo), taken where lo + (hi - lo) * u
// rounds up to hi (scale_uniform), and every number is kept when lo == hi.
struct UniformF32 {
  float lo, hi, below_hi;
};

// The words of blocks [first_block, first_block + blocks) of `stream` into `words` (4 a block,
// in order), or, when `uniform` is given, the f32 numbers of those words into `numbers`.
void fill_avx512(const PhiloxStream& stream, uint64_t first_block, uint64_t blocks, uint32_t* words, float* numbers,
                 const UniformF32* uniform);
void fill_avx2(const PhiloxStream& stream, uint64_t first_block, uint64_t blocks, uint32_t* words, float* numbers,
               const UniformF32* uniform);

}  // namespace kiln::ral::x86
