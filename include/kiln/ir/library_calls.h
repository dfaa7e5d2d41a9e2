// Automatic library calls: statements that a library function computes faster are replaced by a
// call of it, where the result is the same up to floating-point rounding (the order of a sum).
//
// Today one pattern: a matrix product of f32 or f64 tensors of one type,
//     c[i, j] = sum(a[i, k] * b[k, j])      (or +=; either operand transposed: a[k, i], b[j, k];
//                                             the factors in either order)
// with bare indices spanning whole dimensions, into a target it does not read, becomes
//     call gemm(a, b [, transpose_a=1] [, transpose_b=1] [, beta=1]) -> c
// when M·N·K is at least `min_gemm_volume`, or for a product over sizes (language version 2) at
// least `min_sized_gemm_volume` with each size counted as 64 (its value is unknown until the
// program runs). lower_program applies it (LowerOptions::auto_calls), and `kiln compile --emit
// ir` prints its result; `--no-auto-calls` turns it off.
#pragma once

#include <cstdint>

#include "kiln/ir/program.h"

namespace kiln::ir {

struct LibraryCallOptions {
  // The smallest M·N·K turned into gemm. Alone, gemm beats the generated kernel at every size
  // measured on cpu (docs/ral.md, "Automatic calls"); a product below 16^3 is left in the
  // loop nests, where it fuses with the statements around it instead of splitting them.
  int64_t min_gemm_volume = int64_t{16} * 16 * 16;
  // A call in a program whose sizes are bound when it runs is a host action between the routine's
  // command buffers (not a kernel among them), which costs more than the kernels it would replace
  // where the product is small: the demo's 16 × 16 layers over a batch B measured 1.39× slower
  // as gemm calls than as generated loops (bench/sizes_bench, BM_DemoEpoch).
  int64_t min_sized_gemm_volume = int64_t{64} * 64 * 64;
};

// `program` with the matching statements replaced by calls (the calls placed where the
// statements were); the number replaced in *replaced when given.
Program with_library_calls(const Program& program, const LibraryCallOptions& options = {}, int* replaced = nullptr);

}  // namespace kiln::ir
