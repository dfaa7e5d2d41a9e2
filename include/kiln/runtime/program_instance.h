// ProgramInstance: one Program compiled for one device, with a buffer for every stored node, run
// routine by routine on one queue. This is what `kiln run` and the compiler's tests use; the
// multi-stream runtime (contexts, streams, merge buffers) builds on the same pieces.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/loop/lower.h"

namespace kiln::ral {
class Context;
}

namespace kiln::runtime {

struct ProgramOptions {
  uint64_t seed = 0;  // random initializers
  ir::LowerOptions lower;
  // Workgroups of a parallel kernel: min(extent, this); 0 chooses per kernel from its size
  // (codegen::workgroups_for_size, at most 4 per compute unit).
  uint32_t max_workgroups = 0;
  // For a program with sizes (language version 2): their values (ir::bind_sizes). The program is
  // compiled as it is, once for every size (its kernels read the sizes from each dispatch), and
  // its buffers have the shapes these values give.
  std::vector<int64_t> sizes;
};

class ProgramInstance {
 public:
  // Lowers, generates the device's source, compiles every routine in one executable, allocates
  // and initializes the buffers (params and tensors from their initializers, everything else 0).
  // UNIMPLEMENTED with `options.lower.trace_values` (value tracing runs through a Backend).
  static Result<std::unique_ptr<ProgramInstance>> create(hal::DeviceRef device,
                                                         const ir::Program& program,
                                                         const ProgramOptions& options = {});

  // The lowered program, its nodes at the bound sizes (the kernels read the sizes).
  const ir::LoweredProgram& lowered() const { return lowered_; }
  const std::string& source() const { return source_; }

  // Host bytes of a stored node (row-major, its dtype). INVALID_ARGUMENT for an unknown or
  // unstored node, one in a routine's shared buffer (ir::LoweredRoutine::shared), or a size that
  // is not the node's.
  Status write(std::string_view node, const void* data, size_t bytes);
  Status read(std::string_view node, void* data, size_t bytes);
  // Runs a routine to completion.
  Status run(std::string_view routine, Timeout timeout = Timeout::infinite());

 private:
  ProgramInstance() = default;
  Result<const ir::TensorNode*> stored_node(std::string_view name) const;
  Status submit_and_wait(const std::function<Status(const hal::SemaphoreList&, const hal::SemaphoreList&)>& op,
                         Timeout timeout);

  hal::DeviceRef device_;
  hal::QueueRef queue_;
  ir::LoweredProgram lowered_;
  std::string source_;
  hal::ExecutableRef executable_;
  std::vector<hal::BufferRef> buffers_;  // by node id; null for virtual nodes
  std::set<int> shared_;                 // nodes whose buffer is a view of a routine's shared buffer
  struct RoutineSteps;  // its command buffers and calls (runtime/routine_steps.h), runs so far
  std::map<std::string, std::shared_ptr<RoutineSteps>, std::less<>> routines_;
  std::shared_ptr<ral::Context> ral_;
  uint64_t seed_ = 0;
  std::shared_ptr<hal::Semaphore> timeline_;
  uint64_t timeline_value_ = 0;
};

}  // namespace kiln::runtime
