// The C API's descriptions turned into the C++ runtime's types. Only what C adds is checked here
// (NULL pointers, enum values that name no member); the rest is the runtime's business
// (check_kernel_set, Backend::compile_kernels), with its messages.
#pragma once

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/kiln.h"
#include "kiln/runtime/kernel_set.h"

namespace kiln::capi {

// INVALID_ARGUMENT for a value that is not a kiln_dtype.
Result<ir::DType> to_dtype(kiln_dtype dtype);

// The kernel set `kernels` describes, every string and array copied. INVALID_ARGUMENT, naming
// the routine, dispatch and binding, for NULL where a pointer is needed (an array may be NULL
// when its count is 0) and for an access or dtype that names no member.
Result<runtime::KernelSet> to_kernel_set(const kiln_kernel_set& kernels);

}  // namespace kiln::capi
