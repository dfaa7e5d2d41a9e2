// Automatic library calls: statements that a library function computes faster are replaced by a
// call of it, where the result is the same up to floating-point rounding (the order of a sum).
//
// Today one pattern: a matrix product of f32 or f64 tensors of one type,
//     c[i, j] = sum(a[i, k] * b[k, j])      (or +=; either operand transposed: a[k, i], b[j, k];
//                                             the factors in either order)
// with bare indices spanning whole dimensions, into a target it does not read, becomes
//     call gemm(a, b [, transpose_a=1] [, transpose_b=1] [, beta=1]) -> c
// when M·N·K is at least `min_gemm_volume`, a size (language version 2: unknown until the
// program runs) counting as 1024, a typical batch. lower_program applies it
// (LowerOptions::auto_calls), and `kiln compile --emit ir` prints its result; `--no-auto-calls`
// turns it off.
#pragma once

#include <cstdint>

#include "kiln/ir/program.h"

namespace kiln::ir {

struct LibraryCallOptions {
  // The smallest M·N·K turned into gemm. Alone, gemm beats the generated kernel at every size
  // measured on cpu (docs/ral.md, "Automatic calls"); a product below 16^3 is left in the
  // loop nests, where it fuses with the statements around it instead of splitting them.
  int64_t min_gemm_volume = int64_t{16} * 16 * 16;
};

// `program` with the matching statements replaced by calls (the calls placed where the
// statements were); the number replaced in *replaced when given.
Program with_library_calls(const Program& program, const LibraryCallOptions& options = {}, int* replaced = nullptr);

}  // namespace kiln::ir
