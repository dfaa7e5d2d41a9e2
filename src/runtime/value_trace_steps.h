// The steps of a run of a traced routine (value tracing, kiln/runtime/value_trace.h): its calls
// run as host steps between summaries of their tensors, and a last step marks the run's end.
#pragma once

#include <memory>
#include <vector>

#include "kiln/runtime/value_trace.h"
#include "runtime/routine_steps.h"

namespace kiln::runtime {

// `steps` (made by make_routine_steps without call kernels) with a summary step before and after
// each call and an end step, all recording into `trace` under run id `run`.
std::vector<RoutineStep> traced_steps(const std::vector<RoutineStep>& steps, const ir::LoweredRoutine& routine,
                                      const ir::Program& program, std::shared_ptr<ValueTrace> trace,
                                      uint32_t run);

// min / max / mean and the NaN and infinity counts of `node`'s values in `buffer`.
Result<ValueTrace::TensorSummary> summarize_tensor(const ir::TensorNode& node, hal::Buffer& buffer);

}  // namespace kiln::runtime
