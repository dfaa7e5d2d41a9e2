// recv_input / send_output: how an entry receives its inputs and sends its outputs through the
// context (BladeDISC's ral_recv_input / ral_send_output), with a shape known only at run time.
#include "kiln/ral/execution_context.h"
#include "ral/builtins.h"
#include "ral/library/library.h"

namespace kiln::ral {

namespace {

Result<kiln_ral_buffer_t> recv_input(ExecutionContext* context, int64_t index) {
  return context->recv_input(index);
}

Status send_output(ExecutionContext* context, int64_t index, kiln_ral_buffer_t buffer) {
  return context->send_output(index, buffer);
}

}  // namespace

Status register_builtins(Registry& registry) {
  KILN_RETURN_IF_ERROR(registry.add(make_function<"recv_input", "cpu", &recv_input>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"send_output", "cpu", &send_output>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"recv_input", "interp", &recv_input>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"send_output", "interp", &send_output>()));
  KILN_RETURN_IF_ERROR(library::register_cpu_sorting(registry));
  KILN_RETURN_IF_ERROR(library::register_reference_sorting(registry));
  KILN_RETURN_IF_ERROR(library::register_gemm(registry));
  KILN_RETURN_IF_ERROR(library::register_narrow_gemm(registry));
  KILN_RETURN_IF_ERROR(library::register_conv(registry));
  KILN_RETURN_IF_ERROR(library::register_cuda_library(registry));
  KILN_RETURN_IF_ERROR(library::register_collectives(registry));
  return library::register_random(registry);
}

}  // namespace kiln::ral
