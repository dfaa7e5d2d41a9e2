// A framework's own kernels from Python (Backend.compile_kernels): kiln.KernelExport,
// kiln.KernelBinding and kiln.KernelDispatch, which are the C++ runtime's own descriptions
// (kiln/runtime/kernel_set.h), and the KernelSet they make.
#pragma once

#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "kiln/hal/executable.h"
#include "kiln/runtime/kernel_set.h"
#include "python/program.h"

namespace kiln::python {

void bind_kernels(nanobind::module_& m);

// The kernel set of `source` in `format`, its exports and `routines` (a dict: routine name ->
// list of kiln.KernelDispatch, in order), checked against `program` by check_kernel_set:
// ValueError with its message (naming the routine, dispatch, kernel and node); TypeError for a
// routine that is not a list of kiln.KernelDispatch.
runtime::KernelSet checked_kernel_set(const Program& program, std::string source, std::string format,
                                      std::string label, std::vector<hal::ExportInfo> exports,
                                      const nanobind::dict& routines);

}  // namespace kiln::python
