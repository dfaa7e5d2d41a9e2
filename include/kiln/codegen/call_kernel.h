// Call kernels: a `call` statement as a CPU kernel (C dialect) that calls the runtime through the
// RAL context it receives in kiln_dispatch_state_t::context. The kernel runs in workgroup 0 only,
// packs binding i as a memref (its data pointer, then the sizes written here), appends the
// scalar attributes, and returns what ctx->call returns (0 on success; non-zero when the function
// failed, and the runtime has kept why). It declares the one field of kiln_ral_context_t it uses
// (the call function, always first), so the source needs no kiln header beyond the kernel ABI.
// Return codes besides the call's: 1 the dispatch does not match (too few or too small
// bindings, too few push constants), 3 the dispatch has no runtime context.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::codegen {

struct CallKernel {
  // A scalar argument, passed by address with its own C type.
  struct Scalar {
    enum class Type { kI64, kF32, kF64 } type = Type::kI64;
    int64_t i64 = 0;
    double f64 = 0;  // f32 values are stored widened, exactly
  };
  struct Tensor {
    std::vector<int64_t> sizes;  // the memref's sizes (rank 0: the pointer alone)
    int64_t bytes = 0;           // the binding must hold at least this many
    // Per dimension, for a program with sizes (language version 2): the dimension as an
    // expression of the sizes, read from the dispatch's push constants (two per size, as
    // kernels read them: kiln/loop/loop.h), in place of sizes[d]; empty otherwise.
    std::vector<std::optional<ir::SizeExpr>> sized;
  };

  std::string name;      // the export: a C identifier
  std::string function;  // the full (mangled) name passed to ctx->call
  std::vector<Tensor> tensors;  // binding i is tensors[i]
  std::vector<Scalar> scalars;  // after the tensors, in order
  int size_count = 0;           // sizes it reads (2 push constants each)
};

// The C source of every kernel, one after the other (a suffix of an emit_kernels C source: it
// relies on <stdint.h> and the kernel ABI). INVALID_ARGUMENT for a name that is not a C
// identifier or a function name with characters outside [A-Za-z0-9_].
Result<std::string> emit_call_kernels(std::span<const CallKernel> kernels);

}  // namespace kiln::codegen
