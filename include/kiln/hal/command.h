// The operations a queue runs, as plain data, and their validation.
//
// Each command holds references to what it uses (buffers, executables), so a queue that keeps
// the command keeps them alive until it completes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "kiln/base/host_memory.h"
#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/semaphore.h"

namespace kiln::hal {

class CommandBuffer;

struct CopyCommand {
  BufferRef source;
  size_t source_offset = 0;
  BufferRef target;
  size_t target_offset = 0;
  size_t length = 0;
};

// Repeats a 1, 2 or 4 byte pattern; offset and length are multiples of the pattern size.
struct FillCommand {
  BufferRef target;
  size_t offset = 0;
  size_t length = 0;
  uint32_t pattern = 0;
  uint8_t pattern_size = 1;
};

// Host bytes captured when the command is made.
struct UpdateCommand {
  HostMemoryBytes data;  // large captures in reused huge pages (kiln/base/host_memory.h)
  BufferRef target;
  size_t offset = 0;
};

// Device → host memory; `host` must stay valid until the action completes.
struct ReadCommand {
  BufferRef source;
  size_t offset = 0;
  void* host = nullptr;
  size_t length = 0;
};

// Host memory → device; the bytes are read when the action runs.
struct WriteCommand {
  const void* host = nullptr;
  BufferRef target;
  size_t offset = 0;
  size_t length = 0;
};

struct BufferBinding {
  BufferRef buffer;
  size_t offset = 0;
  size_t length = Buffer::kWholeBuffer;
};

struct DispatchCommand {
  ExecutableRef executable;
  uint32_t export_ordinal = 0;
  std::array<uint32_t, 3> workgroups = {1, 1, 1};
  std::vector<uint32_t> constants;
  std::vector<BufferBinding> bindings;
};

struct BarrierCommand {};

// What compiled code that calls the runtime receives while an execution runs: the pointer a CPU
// kernel finds in kiln_dispatch_state_t::context (a RAL context; the HAL never looks inside it).
// The runtime implements it per run; the queue keeps it alive until the action completes.
class DispatchContext {
 public:
  virtual ~DispatchContext() = default;
  virtual void* abi() = 0;
  // Why a kernel of the execution failed when the context knows better than its return code (a
  // failed runtime call records its status there); OK when it does not.
  virtual Status failure() const = 0;
};

struct ExecuteCommand {
  std::shared_ptr<const CommandBuffer> command_buffer;
  // Null: kernels receive a null context. Drivers whose kernels cannot call the host ignore it.
  std::shared_ptr<DispatchContext> context;
};

// Runs on a queue's thread when its waits are met. Return OK and the queue signals the action's
// semaphores; return an error and the queue fails them with it; return a kDeferred status and the
// function has taken over the list: it must signal or fail every semaphore of it, later.
using HostCallFn = std::function<Status(const SemaphoreList& signals)>;
// What a host call that queues device work (a library function on device memory) runs instead of
// its HostCallFn on a queue with a device stream of its own (cuda, whose `stream` is a CUstream):
// it runs when the action is issued, on whatever thread issues it, after the action's waits are
// ordered before it on the stream but perhaps before they are met, and must only put work on the
// stream, never wait for that work nor read on the host what the waits guard. The action signals
// once that work is over, as a dispatch does (a fault in it marks the device lost); an error
// returned fails the action once what it did queue is over.
using StreamCallFn = std::function<Status(void* stream)>;
struct HostCallCommand {
  HostCallFn fn;
  StreamCallFn on_stream;  // may be empty: then fn runs everywhere
};

using Command = std::variant<CopyCommand, FillCommand, UpdateCommand, ReadCommand, WriteCommand,
                             DispatchCommand, BarrierCommand, ExecuteCommand, HostCallCommand>;

// "copy", "fill", ...
const char* command_name(const Command& command);

// Checks a command against the device that will run it: buffers of that device, ranges inside
// their buffers, usage bits, pattern sizes, binding and constant counts. Resolves kWholeBuffer
// lengths of bindings in place.
Status validate_command(Command& command, const void* device_tag);

// Where a submitted action may run.
enum class Placement {
  kQueued,  // on the queue's own threads: the submitting call returns at once
  // When every wait is met at submission, a queue that runs its work on host threads (cpu,
  // interp) runs the action to completion on the submitting thread, and its signals have fired
  // when the call returns (a host call's, unless it deferred them: they fire when its work ends);
  // otherwise, and on every other queue, as kQueued. For work shorter than a hand-off to another
  // thread, where the caller would wait for it anyway: a host call submitted so must not block.
  kCallerWhenReady,
};

// A queue operation: a command with the semaphores it waits on and signals.
struct Action {
  Command command;
  SemaphoreList waits;
  SemaphoreList signals;
  Placement placement = Placement::kQueued;
};

}  // namespace kiln::hal
