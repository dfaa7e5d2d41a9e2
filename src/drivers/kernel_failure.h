// What the queues of the kernel-ABI drivers (OpenCL, CUDA) ask of an action's commands, and a
// failure recorded in a status slot (words tag, code, command index, workgroup x, y, z) read back
// into a status that names the kernel, or the failed wait a wait gate found.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/hal/command.h"
#include "kiln/hal/command_buffer.h"

namespace kiln::drivers {

// The code a wait gate writes into the slot of an action whose device-side wait found its
// signaller failed (both drivers' gates, cl_wait_gate.h and cu_wait_gate.h).
inline constexpr uint32_t kWaitFailedCode = 0x7FFFFFFFu;

// Whether the action's command is a `T`, or the command buffer it executes holds one.
template <typename T>
bool runs_command(const hal::Command& command) {
  if (std::holds_alternative<T>(command)) return true;
  if (const auto* e = std::get_if<hal::ExecuteCommand>(&command)) {
    for (const hal::Command& inner : e->command_buffer->commands()) {
      if (std::holds_alternative<T>(inner)) return true;
    }
  }
  return false;
}
// Whether the action runs a kernel (a dispatch, or one inside the command buffer it executes).
inline bool has_dispatch(const hal::Command& command) { return runs_command<hal::DispatchCommand>(command); }
// Whether a wait gate can stop all of the action's device work: kernels (which return at their
// entry check) and barriers. Copies, fills and transfers could not be stopped once handed over.
bool only_kernels(const hal::Command& command);
// The command numbered `index` of an action, counting a command buffer's commands in order.
const hal::Command* command_at(const hal::Command& command, uint32_t index);
// "kernel 'k' failed with code 2 in workgroup (3, 0, 0) on queue 'q'", from the slot's words;
// for kWaitFailedCode, that a wait handed to the device found its signaller failed; for a failed
// check, check_failure's status with the value in words 6 and 7.
Status kernel_failure(const hal::Command& command, const uint32_t* words, const std::string& queue_name);
// A failed check of export `info` (code kFirstFailureCode + i, kiln/loop/loop.h): OUT_OF_RANGE
// with the message ExportInfo::failures[i] and `value`; nullopt for any other code.
std::optional<Status> check_failure(const hal::ExportInfo& info, int64_t code, int64_t value);

}  // namespace kiln::drivers
