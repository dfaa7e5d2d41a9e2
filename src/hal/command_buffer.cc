#include "kiln/hal/command_buffer.h"

#include <cstring>
#include <string>

namespace kiln::hal {

std::shared_ptr<CommandBuffer> CommandBuffer::create(const void* device_tag) {
  return std::make_shared<CommandBuffer>(device_tag);
}

Result<FillCommand> make_fill(const BufferRef& target, size_t offset, size_t length,
                              const void* pattern, size_t pattern_size) {
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4) {
    return invalid_argument_error("fill pattern size is " + std::to_string(pattern_size) +
                                  " bytes; it must be 1, 2 or 4");
  }
  if (!pattern) return invalid_argument_error("fill pattern is null");
  FillCommand fill{target, offset, length, 0, static_cast<uint8_t>(pattern_size)};
  std::memcpy(&fill.pattern, pattern, pattern_size);
  return fill;
}

Result<UpdateCommand> make_update(const void* source, const BufferRef& target, size_t offset,
                                  size_t length) {
  if (!source && length) return invalid_argument_error("update: source is null");
  // Check the range before copying, so that a bogus length is an error, not a huge allocation.
  if (target) KILN_RETURN_IF_ERROR(target->check_range(offset, length, "update").status());
  const auto* bytes = static_cast<const uint8_t*>(source);
  return UpdateCommand{HostMemoryBytes(bytes, length), target, offset};
}

Status CommandBuffer::record(Command command) {
  if (finalized_) {
    return failed_precondition_error(std::string("command buffer: cannot record ") +
                                     command_name(command) + " after finalize");
  }
  KILN_RETURN_IF_ERROR(validate_command(command, device_tag_));
  commands_.push_back(std::move(command));
  return Status();
}

Status CommandBuffer::copy(const BufferRef& source, size_t source_offset, const BufferRef& target,
                           size_t target_offset, size_t length) {
  return record(CopyCommand{source, source_offset, target, target_offset, length});
}

Status CommandBuffer::fill(const BufferRef& target, size_t offset, size_t length,
                           const void* pattern, size_t pattern_size) {
  KILN_ASSIGN_OR_RETURN(FillCommand fill, make_fill(target, offset, length, pattern, pattern_size));
  return record(std::move(fill));
}

Status CommandBuffer::update(const void* source, const BufferRef& target, size_t offset,
                             size_t length) {
  KILN_ASSIGN_OR_RETURN(UpdateCommand update, make_update(source, target, offset, length));
  return record(std::move(update));
}

Status CommandBuffer::dispatch(DispatchCommand dispatch) { return record(std::move(dispatch)); }

Status CommandBuffer::barrier() { return record(BarrierCommand{}); }

Status CommandBuffer::finalize() {
  if (finalized_) return failed_precondition_error("command buffer is already finalized");
  finalized_ = true;
  return Status();
}

}  // namespace kiln::hal
