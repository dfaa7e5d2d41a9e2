// Backend: the runtime over one HAL device: its streams, compiling and linking routines into
// contexts, and waiting for work. This is the user-facing layer of OCANNL's backend design
// ("the anatomy of a backend") over kiln's HAL; transfers are in kiln/runtime/transfer.h.
//
// Typical use (see examples/train_moons.cc):
//   auto nodes = NodeTable::create(program);
//   auto backend = Backend::create(device);
//   auto stream = backend->new_stream();
//   auto code = backend->compile_batch(program, {"step"}, {.shared = true});
//   auto root = backend->make_context(stream, nodes);
//   auto linked = backend->link(root, code, "step");
//   linked.routine->run();                 // returns at once
//   nodes->tensor("loss")->read_as<float>(); // waits for the writer, copies back
//
// A Backend is thread-safe: routines and transfers may be scheduled from several host threads.
// Destroying it waits for every stream to finish.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/ir/program.h"
#include "kiln/runtime/code.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/kernel_set.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/routine.h"
#include "kiln/runtime/stream.h"
#include "kiln/runtime/trace.h"
#include "kiln/runtime/value_trace.h"

namespace kiln::ral {
class Context;
}

namespace kiln::runtime {

struct BackendOptions {
  // Workgroups per dispatch of a parallel kernel: min(its extent, this); 0 chooses per kernel
  // from its size (codegen::workgroups_for_size: a workgroup per 64K stores, at most 4 per
  // compute unit). 1 runs each kernel on one worker, so that a stream is one core (OCANNL's
  // multicore CPU backend) and streams are the only parallelism.
  uint32_t max_workgroups = 0;
  // When set, every routine and transfer is recorded with the time it ran on its stream.
  std::shared_ptr<Trace> trace;
  // Where runs of routines compiled with value tracing (CompileOptions::lower.trace_values)
  // record what they computed; running such a routine without one is FAILED_PRECONDITION.
  std::shared_ptr<ValueTrace> value_trace;
};

struct Linked {
  RoutineRef routine;
  ContextRef context;  // a child of the context linked into
};

// ir::lower_program, with its two phases recorded in `trace` when one is given: "lowering" (the
// program to kernels, with the automatic library calls) and "passes" (the loop-IR optimizations),
// category "compile" on the compiler's thread, each with the number of kernels.
Result<ir::LoweredProgram> lower_traced(const ir::Program& program, const ir::LowerOptions& options, Trace* trace);

struct LinkedBatch {
  std::vector<RoutineRef> routines;  // in the code's order, each routine once
  ContextRef context;
};

class Backend : public std::enable_shared_from_this<Backend> {
 public:
  static Result<std::shared_ptr<Backend>> create(hal::DeviceRef device, BackendOptions options = {});
  ~Backend();

  const hal::DeviceRef& device() const { return device_; }
  const BackendOptions& options() const { return options_; }
  // The RAL context the library calls of this backend's routines run in.
  const std::shared_ptr<ral::Context>& ral_context() const { return ral_; }

  // A new stream: a HAL queue of the device. Named "<device>/s<N>" unless `name` is given.
  Result<StreamRef> new_stream(std::string name = "");
  std::vector<StreamRef> streams() const;
  // Every stream of this backend: blocks until idle (the first failure, or DEADLINE_EXCEEDED).
  Status await(Timeout timeout = Timeout::infinite()) const;
  bool is_idle() const;

  // Lowers the routine(s) of `program`. NOT_FOUND for an unknown routine name. A routine named
  // more than once is compiled once, at its first place: the code holds distinct routines (run a
  // linked routine as often as needed).
  Result<CodeRef> compile(const ir::Program& program, std::string_view routine,
                          const CompileOptions& options = {});
  Result<CodeRef> compile_batch(const ir::Program& program, std::span<const std::string> routines,
                                const CompileOptions& options = {});
  // The same for a program lowered already (`CompileOptions::lower` is then not used).
  Result<CodeRef> compile_lowered(ir::LoweredProgram lowered, std::span<const std::string> routines,
                                  const CompileOptions& options = {});

  // A caller's own kernels over the nodes of `program` (kiln/runtime/kernel_set.h), as code that
  // link / link_batch accept: each KernelRoutine becomes a routine. The errors of
  // check_kernel_set; the device's when the source does not build for it (UNIMPLEMENTED for a
  // format it does not build, INVALID_ARGUMENT with the compiler's output for a compile error).
  // Built now for this backend's device; with `shared`, for another device at its first link
  // there. `options.lower` is not used.
  Result<CodeRef> compile_kernels(const ir::Program& program, KernelSet kernels,
                                  const CompileOptions& options = {});

  // A root context on one of this backend's streams, for the nodes of `nodes`.
  Result<ContextRef> make_context(const StreamRef& stream, std::shared_ptr<NodeTable> nodes,
                                  std::string label = "");
  // Binds a routine of `code` into `parent`: finds each node's array in the context tree (or the
  // device's shared array), allocates and uploads the missing ones in a new child context.
  // INVALID_ARGUMENT when a node's dtype or shape differs from the table's, or for code compiled
  // by another backend without `shared`; the device's status when building fails. For own
  // kernels also NOT_FOUND for a node the table lacks and INVALID_ARGUMENT for a write to a
  // kConstant node, naming the routine and kernel.
  Result<Linked> link(const ContextRef& parent, const CodeRef& code, std::string_view routine);
  Result<LinkedBatch> link_batch(const ContextRef& parent, const CodeRef& code);

 private:
  Backend(hal::DeviceRef device, BackendOptions options)
      : device_(std::move(device)), options_(std::move(options)) {}
  // Linking (src/runtime/link.cc), under the scheduling mutex but for link_routines.
  Result<LinkedBatch> link_routines(const ContextRef& parent, const CodeRef& code,
                                    const std::vector<std::string>& names);
  // The array of node `n` for `child`: in the context tree, the device's shared array, or a new
  // one in `child` uploaded from the table's host copy (zero-filled for a node the table lacks,
  // internal to compiled code). INVALID_ARGUMENT when the array found has another dtype or shape.
  Status ensure_array(const ContextRef& child, const ir::TensorNode& n, const ir::Program& program);
  // The arrays of a routine's shared buffer (ir::LoweredRoutine::shared): one new buffer, and a
  // private array of `child` over each node's bytes of it (never uploaded or zero-filled: the
  // routine overwrites each before it reads it).
  Status place_shared_buffer(const ContextRef& child, const ir::LoweredRoutine& routine, const ir::Program& program);
  // The routines of `code` named in `names`, linked into `child`: kiln's compiled routines, or
  // the caller's own kernels.
  Status add_compiled_routines(const ContextRef& child, const CodeRef& code, const hal::ExecutableRef& executable,
                               const std::vector<std::string>& names, std::vector<RoutineRef>& out);
  Status add_kernel_routines(const ContextRef& child, const CodeRef& code, const hal::ExecutableRef& executable,
                             const std::vector<std::string>& names, std::vector<RoutineRef>& out);

  hal::DeviceRef device_;
  BackendOptions options_;
  // Library functions' resources for this device (a BLAS handle, a workspace), shared by every
  // routine run on it.
  std::shared_ptr<ral::Context> ral_;
  std::vector<StreamRef> streams_;  // guarded by the scheduling mutex
  // The device-wide arrays of kShared nodes, by (table, node); the table is kept as a weak
  // reference too, so that a new table at a dead one's address never finds its arrays.
  struct SharedArray {
    std::weak_ptr<NodeTable> table;
    std::weak_ptr<DeviceArray> array;
  };
  std::map<std::pair<const NodeTable*, std::string>, SharedArray> shared_arrays_;
};

}  // namespace kiln::runtime
