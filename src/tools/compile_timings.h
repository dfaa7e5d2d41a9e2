// `kiln compile --timings`: where the time of compiling a program for a device goes.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/ir/program.h"
#include "kiln/loop/lower.h"

namespace kiln::tools {

// Lowers `program` with `options`, optimizes each kernel, emits the device's source and builds
// it on `device` (through its kernel cache, as a run would), timing each step, and returns the
// report: the phases (parsing, given as `parse_seconds`; lowering; passes; emitting; the device
// compiler's steps, kiln/hal/executable.h's BuildStep), then per kernel its passes, its
// emitting and the lines of source it became. Errors are those of the steps, annotated.
Result<std::string> compile_timings(const ir::Program& program, const ir::LowerOptions& options,
                                    const hal::DeviceRef& device, double parse_seconds);

}  // namespace kiln::tools
