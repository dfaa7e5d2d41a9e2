// CommandBuffer: a recorded list of dispatches, copies, fills, updates and barriers that a queue
// runs as one action (execute).
//
// Commands run in recorded order; a barrier is an explicit point where everything before it has
// finished. Recording validates each command at once and leaves the buffer unchanged on error.
// After finalize() the buffer is immutable and may be executed any number of times, on any queue
// of its device, also concurrently.
#pragma once

#include <memory>
#include <vector>

#include "kiln/hal/command.h"

namespace kiln::hal {

class CommandBuffer {
 public:
  static std::shared_ptr<CommandBuffer> create(const void* device_tag);
  explicit CommandBuffer(const void* device_tag) : device_tag_(device_tag) {}

  Status copy(const BufferRef& source, size_t source_offset, const BufferRef& target,
              size_t target_offset, size_t length);
  Status fill(const BufferRef& target, size_t offset, size_t length, const void* pattern,
              size_t pattern_size);
  Status update(const void* source, const BufferRef& target, size_t offset, size_t length);
  Status dispatch(DispatchCommand dispatch);
  Status barrier();
  // Ends recording. FAILED_PRECONDITION to record afterwards or to execute before.
  Status finalize();

  bool finalized() const { return finalized_; }
  const std::vector<Command>& commands() const { return commands_; }
  const void* device_tag() const { return device_tag_; }

 private:
  Status record(Command command);
  const void* device_tag_;
  bool finalized_ = false;
  std::vector<Command> commands_;
};

// Builds a FillCommand, checking the pattern size (1, 2 or 4).
Result<FillCommand> make_fill(const BufferRef& target, size_t offset, size_t length,
                              const void* pattern, size_t pattern_size);
// Builds an UpdateCommand, checking the target range before copying the host bytes.
Result<UpdateCommand> make_update(const void* source, const BufferRef& target, size_t offset,
                                  size_t length);

}  // namespace kiln::hal
