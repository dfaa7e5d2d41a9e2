#include "drivers/kernel_failure.h"

#include <algorithm>

#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/loop/loop.h"

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
      if (info.ok()) {
        const int64_t value = static_cast<int64_t>(uint64_t{w[6]} | (uint64_t{w[7]} << 32));
        if (std::optional<Status> check = check_failure(**info, w[1], value)) return *check;
        kernel = (*info)->name;
      }
    }
  }
  return internal_error("kernel '" + kernel + "' failed with code " + std::to_string(w[1]) +
                        " in workgroup (" + std::to_string(w[3]) + ", " + std::to_string(w[4]) +
                        ", " + std::to_string(w[5]) + ") on queue '" + queue_name + "'");
}

std::optional<Status> check_failure(const hal::ExportInfo& info, int64_t code, int64_t value) {
  const int64_t site = code - ir::kFirstFailureCode;
  if (site < 0 || site >= static_cast<int64_t>(info.failures.size())) return std::nullopt;
  return out_of_range_error(info.failures[static_cast<size_t>(site)] + std::to_string(value));
}

}  // namespace kiln::drivers
