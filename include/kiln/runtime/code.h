// Code: routines compiled into device-independent form (lowered loop nests), built for a device
// when linked. One Code may hold many routines (compile_batch): they share one source file and
// one executable per device.
//
// With `shared`, a Code may be linked into contexts of any backend and device; its executable is
// built once per device and kept. Without it, it belongs to the backend that compiled it
// (linking it elsewhere is INVALID_ARGUMENT), which may postpone building to the first link.
//
// Code may also hold a caller's own kernels (Backend::compile_kernels, kiln/runtime/kernel_set.h)
// instead of lowered routines: the same linking, the same executable per device.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/kernel_set.h"

namespace kiln::runtime {

class Backend;
class Trace;

struct CompileOptions {
  bool shared = false;
  ir::LowerOptions lower;
};

class Code {
 public:
  // For own kernels: the program whose nodes they bind, and no routines.
  const ir::LoweredProgram& lowered() const { return lowered_; }
  // The caller's own kernels, or null for routines kiln compiled.
  const KernelSet* kernels() const { return kernels_.get(); }
  bool shared() const { return shared_; }
  std::vector<std::string> routine_names() const;

  // Sizes (language version 2). Code of a program with sizes is compiled without knowing them:
  // its kernels read them from each dispatch. `at_sizes` binds such code to the sizes' `values`
  // (from ir::bind_sizes): the result's program has every node at its bound shape (what linking
  // allocates and checks against a NodeTable of the specialized program), its routines pass the
  // values to the kernels, and it builds nothing of its own: the executable is `general`'s, built
  // once per device and shared by every size. INVALID_ARGUMENT for code without sizes or values
  // that do not fit (ir::specialize_sizes).
  static Result<std::shared_ptr<Code>> at_sizes(const std::shared_ptr<Code>& general, std::vector<int64_t> values);
  // The values the routines run at; empty for code without sizes.
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // Whether the code's kernels take sizes that are not bound yet (they are bound per run).
  bool needs_sizes() const { return !general_ && lowered_.program.has_sizes(); }
  // The program as it was compiled (for code at sizes, the general code's, with its sizes).
  const ir::Program& compiled_program() const { return general_ ? general_->lowered_.program : lowered_.program; }

  // The executable of every routine for `device`, built on the first call per device; its
  // exports are the kernels of every routine, in order (for own kernels: the source's exports).
  // A build (not a reuse) is recorded in `trace` when given (a "compile" event, trace.h).
  Result<hal::ExecutableRef> executable_for(const hal::DeviceRef& device, Trace* trace = nullptr);
  // The generated source for `device` (what executable_for builds).
  Result<std::string> source_for(const hal::DeviceRef& device) const;

 private:
  friend class Backend;
  Code() = default;

  ir::LoweredProgram lowered_;
  std::shared_ptr<const KernelSet> kernels_;
  bool shared_ = false;
  const Backend* compiled_by_ = nullptr;  // for code that is not shared
  std::shared_ptr<Code> general_;         // for code at sizes: the code it binds
  std::vector<int64_t> sizes_;
  std::mutex mu_;
  std::vector<std::pair<std::weak_ptr<hal::Device>, hal::ExecutableRef>> executables_;
};

using CodeRef = std::shared_ptr<Code>;

// The device's source for every kernel of `lowered`, in the first format the device builds of
// "c", "opencl-c", "cuda-c" and "kiln-loop" (loop-IR text, for interp); `format` receives which.
// Only `device.driver` and its executable formats are read, so a description of a device that
// is not present serves (kiln compile --target). In C,
// each call statement is a kernel too (calls_are_kernels), after every routine's kernels.
// UNIMPLEMENTED for a device that builds none of them.
Result<std::string> generate_source(const ir::LoweredProgram& lowered, const hal::DeviceInfo& device,
                                    std::string* format);

// Whether the device's executables of a program compiled as `compiled` hold the call statements
// as kernels that call the runtime through their RAL context (a device that builds C; in a
// program with sizes the kernels read the sized dimensions from the dispatch's push constants);
// elsewhere a call is a host action between command buffers, bound to the shapes of each run.
bool calls_are_kernels(const hal::DeviceInfo& device, const ir::Program& compiled);
// The export ordinal of call `call` of routine `routine` where calls are kernels: they follow the
// kernels of every routine, routine by routine.
uint32_t call_export_ordinal(const ir::LoweredProgram& lowered, size_t routine, size_t call);

// Generates the device's source for every kernel of `lowered` (one file) and builds it: exports
// are the kernels of every routine, in order, then its call kernels. Null when there are none.
Result<hal::ExecutableRef> build_executable(const ir::LoweredProgram& lowered,
                                            const hal::DeviceRef& device,
                                            std::string* source = nullptr);

}  // namespace kiln::runtime
