// KernelSet: a framework's own kernels, handed to the runtime instead of kiln's generated code.
//
// A framework with its own code generator writes kernels in a format a driver builds ("c" for
// the cpu device, "opencl-c" for OpenCL devices; the kernel ABI of each is in docs/runtime.md,
// "Your own kernels") and describes each routine as a list of dispatches over the nodes of a
// program. Backend::compile_kernels checks the description against the program and builds the
// source; Backend::link links its routines into a context like kiln's own, so that they run on
// the context's stream, ordered against kiln's routines and transfers by the same per-node
// semaphores, with the same automatic host uploads.
//
// The runtime trusts the kernels for what the description does not say: that a kernel touches
// only its bindings, reads only what it declares read and writes only what it declares written,
// and stays within each binding's bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/executable.h"
#include "kiln/ir/program.h"

namespace kiln::runtime {

// What a kernel does with a node it binds. It decides what the routine waits for: reads wait for
// the node's last writer; writes wait for the last writer and the readers since.
enum class KernelAccess : uint8_t { kRead, kWrite, kReadWrite };

// One buffer binding of a dispatch: the node whose array is bound, and the dtype and shape the
// kernel was generated for, checked against the program's node (and, when linked, against the
// node table and the arrays already in the context tree).
//
// With `merge`, the binding is the node's merge copy instead (`x.merge` in kiln's language): the
// merge buffer of the stream the routine runs on, which device_to_device(node, kCopy or
// kStreaming) filled. It is read only (kRead), and the routine is ordered against the transfer
// as kiln's routines that read `x.merge` are: after the copy on its stream, or (kStreaming) after
// the last writer of the source array, whose later writers wait for the routine.
struct KernelBinding {
  std::string node;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> dims;  // empty: a scalar
  KernelAccess access = KernelAccess::kRead;
  bool merge = false;
};

// One dispatch: an export of the source, its workgroup count, its bindings in the export's order
// (binding_count of them) and its push constants (constant_count of them).
struct KernelDispatch {
  std::string kernel;  // the export's name
  std::array<uint32_t, 3> workgroups = {1, 1, 1};
  std::vector<KernelBinding> bindings;
  std::vector<uint32_t> constants;
};

// A routine: its dispatches run in order, each after the previous one has finished (a barrier
// between them), as one action on the stream.
struct KernelRoutine {
  std::string name;
  std::vector<KernelDispatch> dispatches;
};

struct KernelSet {
  // The source in the device's format, with its exports (names, binding and constant counts,
  // any_local_size); `label` names it in errors.
  hal::ExecutableSource source;
  std::vector<KernelRoutine> routines;  // distinct names
};

// Checks `kernels` against `program`: NOT_FOUND for a dispatch of an export the source does not
// declare or a binding of a node the program does not have; INVALID_ARGUMENT (naming the routine,
// kernel and node) for a binding whose dtype or shape is not the node's, binding or constant
// counts that are not the export's, a workgroup count of 0, routine names that are empty or
// repeated, a merge binding that is not kRead, a dispatch with two merge bindings, or a routine
// whose merge bindings name two nodes (a stream's merge buffer holds one node). Building the
// source is the device's business (Backend::compile_kernels).
Status check_kernel_set(const KernelSet& kernels, const ir::Program& program);

}  // namespace kiln::runtime
