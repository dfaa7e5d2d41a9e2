#include "runtime/value_trace_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/loop/op_eval.h"

namespace kiln::runtime {

namespace {

// Min, max and mean over the finite elements of any type (each read as its value in double: a
// u64 unsigned, an f16 or bf16 exactly).
void accumulate(ir::DType type, const unsigned char* data, int64_t count, ValueTrace::TensorSummary& s) {
  double sum = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -s.min;
  const size_t size = ir::dtype_size(type);
  const bool is_float = ir::is_float_type(type);
  for (int64_t i = 0; i < count; ++i) {
    const ir::Scalar element = ir::load_scalar(type, data + static_cast<size_t>(i) * size);
    const double v = is_float ? element.f : ir::int_to_double(type, element.i);
    if (std::isnan(v)) {
      ++s.nans;
    } else if (std::isinf(v)) {
      ++s.infs;
    } else {
      ++s.finite;
      sum += v;
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
    }
  }
  s.mean = s.finite > 0 ? sum / static_cast<double>(s.finite) : 0;
}

}  // namespace

Result<ValueTrace::TensorSummary> summarize_tensor(const ir::TensorNode& node, hal::Buffer& buffer) {
  ValueTrace::TensorSummary s;
  s.name = node.name;
  s.dtype = node.dtype;
  s.shape = node.dims;
  KILN_ASSIGN_OR_RETURN(hal::Mapping mapping, buffer.map(hal::MapAccess::kRead));
  const auto* data = static_cast<const unsigned char*>(mapping.data());
  const int64_t count = std::min<int64_t>(node.element_count(),
                                          static_cast<int64_t>(buffer.byte_length() / ir::dtype_size(node.dtype)));
  accumulate(node.dtype, data, count, s);
  return s;
}

std::vector<RoutineStep> traced_steps(const std::vector<RoutineStep>& steps, const ir::LoweredRoutine& routine,
                                      const ir::Program& program, std::shared_ptr<ValueTrace> trace,
                                      uint32_t run) {
  std::vector<RoutineStep> out;
  size_t call = 0;
  for (const RoutineStep& step : steps) {
    const auto* c = std::get_if<CallStep>(&step);
    if (!c || call >= routine.calls.size()) {
      out.push_back(step);
      continue;
    }
    auto entry = std::make_shared<ValueTrace::CallEntry>();
    entry->call = &routine.calls[call++].call;
    // Summaries of the call's inputs before it runs, of its outputs after.
    auto summaries = [step = *c, entry, &program](bool outputs) -> Status {
      const std::vector<int>& tensors = step.call->tensors();
      for (size_t t = 0; t < tensors.size() && t < step.buffers.size(); ++t) {
        if (step.call->is_output(t) != outputs) continue;
        Result<ValueTrace::TensorSummary> s = summarize_tensor(program.nodes[tensors[t]], *step.buffers[t]);
        if (!s.ok()) return s.status().annotate("value trace of call " + step.call->function());
        (outputs ? entry->outputs : entry->inputs).push_back(std::move(*s));
      }
      return Status();
    };
    out.emplace_back(std::in_place_type<HostStep>, HostStep{[summaries] { return summaries(false); }});
    out.push_back(step);
    out.emplace_back(std::in_place_type<HostStep>, HostStep{[summaries, entry, trace, run] {
      KILN_RETURN_IF_ERROR(summaries(true));
      trace->add_call(run, *entry);
      return Status();
    }});
  }
  out.emplace_back(std::in_place_type<HostStep>, HostStep{[trace, run] {
    trace->end_run(run);
    return Status();
  }});
  return out;
}

}  // namespace kiln::runtime
