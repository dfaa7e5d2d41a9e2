// DLPack exchange (https://dmlc.github.io/dlpack): exporting a kiln array (host or device memory),
// and importing another framework's host tensor, without copying. Both capsule kinds: DLPack 1.0's
// "dltensor_versioned" (with a read-only flag) and the older "dltensor".
#pragma once

#include <nanobind/nanobind.h>

#include "python/host_array.h"
#include "runtime/dlpack.h"

namespace kiln::python {

// A capsule over `array`: "dltensor_versioned" when `versioned` (a consumer that asked for
// max_version >= (1, 0)), else "dltensor". The consumer's deleter call (or the capsule's
// destruction when nobody consumed it) releases array.keep_alive.
nanobind::object export_dlpack(const HostArray& array, bool versioned);
// The same for memory that is where `where` says (device memory: `array.data` is unused).
nanobind::object export_dlpack(const HostArray& array, bool versioned, const dlpack::Placement& where);

// The host array behind `source`: an object with __dlpack__ (NumPy, PyTorch, a kiln.Tensor) or
// a DLPack capsule, which is consumed (renamed "used_..."). Errors name what is wrong:
// BufferError for memory that is not host memory; ValueError for a capsule consumed already, a
// dtype kiln has no name for, or strides that are not row-major (kiln never reads such an array
// as if it were dense).
HostArray import_dlpack(nanobind::handle source);

}  // namespace kiln::python
