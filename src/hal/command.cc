#include "kiln/hal/command.h"

#include <string>

#include "kiln/base/overloaded.h"
#include "kiln/hal/command_buffer.h"

namespace kiln::hal {

namespace {

Status check_buffer(const BufferRef& buffer, const void* device_tag, uint32_t needed_usage,
                    const char* role) {
  if (!buffer) return invalid_argument_error(std::string(role) + " buffer is null");
  if (buffer->device_tag() != device_tag) {
    return invalid_argument_error(std::string(role) + " buffer belongs to another device");
  }
  if ((buffer->usage() & needed_usage) != needed_usage) {
    return invalid_argument_error(std::string(role) + " buffer usage is " +
                                  buffer_usage_string(buffer->usage()) + ", needs " +
                                  buffer_usage_string(needed_usage));
  }
  return Status();
}

// Checks [offset, offset + length) against the buffer and resolves a kWholeBuffer length, in
// place, to the rest of the buffer: every command that takes a length means "to the end" by it.
Status resolve_range(const BufferRef& buffer, size_t offset, size_t& length, const char* what) {
  KILN_ASSIGN_OR_RETURN(length, buffer->check_range(offset, length, what));
  return Status();
}

Status validate(CopyCommand& c, const void* tag) {
  KILN_RETURN_IF_ERROR(check_buffer(c.source, tag, kUsageTransferSource, "copy source"));
  KILN_RETURN_IF_ERROR(check_buffer(c.target, tag, kUsageTransferTarget, "copy target"));
  // A whole-buffer copy takes the rest of the source; the target must hold that much.
  KILN_RETURN_IF_ERROR(resolve_range(c.source, c.source_offset, c.length, "copy source"));
  return resolve_range(c.target, c.target_offset, c.length, "copy target");
}

Status validate(FillCommand& c, const void* tag) {
  KILN_RETURN_IF_ERROR(check_buffer(c.target, tag, kUsageTransferTarget, "fill target"));
  if (c.pattern_size != 1 && c.pattern_size != 2 && c.pattern_size != 4) {
    return invalid_argument_error("fill pattern size is " + std::to_string(c.pattern_size) +
                                  " bytes; it must be 1, 2 or 4");
  }
  KILN_RETURN_IF_ERROR(resolve_range(c.target, c.offset, c.length, "fill"));
  if (c.offset % c.pattern_size || c.length % c.pattern_size) {
    return invalid_argument_error("fill offset " + std::to_string(c.offset) + " and length " +
                                  std::to_string(c.length) + " must be multiples of the " +
                                  std::to_string(c.pattern_size) + "-byte pattern");
  }
  return Status();
}

Status validate(UpdateCommand& c, const void* tag) {
  KILN_RETURN_IF_ERROR(check_buffer(c.target, tag, kUsageTransferTarget, "update target"));
  size_t length = c.data.size();
  return resolve_range(c.target, c.offset, length, "update");
}

Status validate(ReadCommand& c, const void* tag) {
  KILN_RETURN_IF_ERROR(check_buffer(c.source, tag, kUsageTransferSource, "read source"));
  KILN_RETURN_IF_ERROR(resolve_range(c.source, c.offset, c.length, "read"));
  if (!c.host && c.length) return invalid_argument_error("read: host pointer is null");
  return Status();
}

Status validate(WriteCommand& c, const void* tag) {
  KILN_RETURN_IF_ERROR(check_buffer(c.target, tag, kUsageTransferTarget, "write target"));
  KILN_RETURN_IF_ERROR(resolve_range(c.target, c.offset, c.length, "write"));
  if (!c.host && c.length) return invalid_argument_error("write: host pointer is null");
  return Status();
}

Status validate(DispatchCommand& c, const void* tag) {
  if (!c.executable) return invalid_argument_error("dispatch: executable is null");
  if (c.executable->device_tag() != tag) {
    return invalid_argument_error("dispatch: executable belongs to another device");
  }
  KILN_ASSIGN_OR_RETURN(const ExportInfo* info, c.executable->export_info(c.export_ordinal));
  const std::string where = "dispatch of '" + info->name + "'";
  if (c.bindings.size() != info->binding_count) {
    return invalid_argument_error(where + ": " + std::to_string(c.bindings.size()) +
                                  " binding(s) given, the export takes " +
                                  std::to_string(info->binding_count));
  }
  if (c.constants.size() != info->constant_count) {
    return invalid_argument_error(where + ": " + std::to_string(c.constants.size()) +
                                  " constant(s) given, the export takes " +
                                  std::to_string(info->constant_count));
  }
  for (size_t i = 0; i < c.bindings.size(); ++i) {
    BufferBinding& b = c.bindings[i];
    const std::string role = where + " binding " + std::to_string(i);
    KILN_RETURN_IF_ERROR(check_buffer(b.buffer, tag, kUsageDispatchStorage, role.c_str()));
    KILN_RETURN_IF_ERROR(resolve_range(b.buffer, b.offset, b.length, role.c_str()));
    const uint32_t alignment = i < info->binding_alignment.size() ? info->binding_alignment[i] : 0;
    const uint64_t start = uint64_t{b.buffer->byte_offset()} + b.offset;
    if (alignment > 1 && start % alignment != 0) {
      return invalid_argument_error(role + " starts at byte " + std::to_string(start) + " of its allocation, not a multiple of " +
                                    std::to_string(alignment) + " (the size of its elements)");
    }
  }
  return Status();
}

Status validate(ExecuteCommand& c, const void* tag) {
  if (!c.command_buffer) return invalid_argument_error("execute: command buffer is null");
  if (c.command_buffer->device_tag() != tag) {
    return invalid_argument_error("execute: command buffer belongs to another device");
  }
  if (!c.command_buffer->finalized()) {
    return failed_precondition_error("execute: command buffer is not finalized");
  }
  return Status();
}

Status validate(HostCallCommand& c, const void*) {
  if (!c.fn) return invalid_argument_error("host_call: function is empty");
  return Status();
}

Status validate(BarrierCommand&, const void*) { return Status(); }

}  // namespace

const char* command_name(const Command& command) {
  return std::visit(Overloaded{[](const CopyCommand&) { return "copy"; },
                               [](const FillCommand&) { return "fill"; },
                               [](const UpdateCommand&) { return "update"; },
                               [](const ReadCommand&) { return "read"; },
                               [](const WriteCommand&) { return "write"; },
                               [](const DispatchCommand&) { return "dispatch"; },
                               [](const BarrierCommand&) { return "barrier"; },
                               [](const ExecuteCommand&) { return "execute"; },
                               [](const HostCallCommand&) { return "host_call"; }},
                    command);
}

Status validate_command(Command& command, const void* device_tag) {
  return std::visit([&](auto& c) { return validate(c, device_tag); }, command);
}

}  // namespace kiln::hal
