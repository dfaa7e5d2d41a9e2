// Automatic library calls: statements that a library function computes faster are replaced by a
// call of it, where the result is the same up to floating-point rounding (the order of a sum).
//
// One pattern, a contraction of f32 or f64 tensors of one type (ranks 2 to 4),
//     c[B..., I..., J...] = sum(a[B..., I..., K...] * b[B..., K..., J...])   (or +=)
// where B, I, J and K are runs of bare indices (B: the batch, possibly empty; the others at
// least one index each), each run spanning whole dimensions in the same order wherever it
// appears, K exactly the summed indices; a may hold its runs as [B..., K..., I...] and b as
// [B..., J..., K...] (transposed), and the factors may come in either order. Then each of the
// ∏B products is a matrix product of M = ∏I rows, K = ∏K and N = ∏J columns over the tensors'
// own row-major memory (kiln/ir/gemm_groups.h), and the statement, into a target it does not
// read, becomes
//     call gemm(a, b [, transpose_a=1] [, transpose_b=1] [, beta=1] [, batch=|B|]) -> c
// when M·N·K (of one product) is at least `min_gemm_volume`, a size (language version 2:
// unknown until the program runs) counting as 1024, a typical batch. Anything else (runs out
// of order or interleaved, a batch index that does not lead, offsets, `where` narrowing, other
// reductions or factors, `-=`) is left to the loop nests. lower_program applies it
// (LowerOptions::auto_calls), and `kiln compile --emit ir` prints its result;
// `--no-auto-calls` turns it off.
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
