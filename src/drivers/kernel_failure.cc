#include "drivers/kernel_failure.h"

#include <algorithm>

#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"

namespace kiln::drivers {

bool only_kernels(const hal::Command& command) {
  auto kernel_or_barrier = [](const hal::Command& c) {
    return std::holds_alternative<hal::DispatchCommand>(c) || std::holds_alternative<hal::BarrierCommand>(c);
  };
  if (const auto* e = std::get_if<hal::ExecuteCommand>(&command)) {
    const auto& list = e->command_buffer->commands();
    return std::all_of(list.begin(), list.end(), kernel_or_barrier);
  }
  return kernel_or_barrier(command);
}

const hal::Command* command_at(const hal::Command& command, uint32_t index) {
  if (const auto* e = std::get_if<hal::ExecuteCommand>(&command)) {
    const auto& list = e->command_buffer->commands();
    return index < list.size() ? &list[index] : nullptr;
  }
  return index == 0 ? &command : nullptr;
}

Status kernel_failure(const hal::Command& command, const uint32_t* w, const std::string& queue_name) {
  if (w[1] == kWaitFailedCode) {
    // Normally replaced by the failure of the wait itself, which reaches the host too.
    return internal_error("a wait handed to the device found its signaller failed, on queue '" + queue_name + "'");
  }
  std::string kernel = "?";
  if (const hal::Command* c = command_at(command, w[2])) {
    if (const auto* d = std::get_if<hal::DispatchCommand>(c)) {
      Result<const hal::ExportInfo*> info = d->executable->export_info(d->export_ordinal);
      if (info.ok()) kernel = (*info)->name;
    }
  }
  return internal_error("kernel '" + kernel + "' failed with code " + std::to_string(w[1]) +
                        " in workgroup (" + std::to_string(w[3]) + ", " + std::to_string(w[4]) +
                        ", " + std::to_string(w[5]) + ") on queue '" + queue_name + "'");
}

}  // namespace kiln::drivers
