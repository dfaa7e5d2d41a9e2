// The collectives of the cuda device on its own memory (docs/distributed.md, "On cuda"): in a
// world of one a copy on the call's stream; across processes NCCL (nccl_communicator.h) on the
// call's stream, where NCCL combines the type exactly as the language does, and otherwise the
// world's collective over mapped host memory, on the issuing thread. Registered as
// Memory::kDeviceStream; where cuda_collectives_on_device() is false the calls bind as kHost and
// take the world's path over mapped memory (collectives.cc), as on opencl.
#pragma once

#include "kiln/hal/buffer.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/world.h"

namespace kiln::ral::library {

// Whether the cuda device's collectives take device memory in this process, decided once:
// KILN_CUDA_COLLECTIVES=host says no, a world of one yes, and across processes yes where NCCL
// loads (else no, said once as a warning). KILN_CUDA_COLLECTIVES=nccl across processes without
// NCCL is UNAVAILABLE saying why.
Result<bool> cuda_collectives_on_device();

// Runs `c` from `x` to `y` (cuda buffers; c.in and c.out are ignored) in `execution`'s order: on
// its device stream and returning without waiting where it has one, else to its end.
Status run_cuda_collective(ExecutionContext* execution, Collective c, const hal::Buffer& x, const hal::Buffer& y);

}  // namespace kiln::ral::library
