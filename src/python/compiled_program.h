// CompiledProgram (kiln's Python `prog.compile(device=...)`): a program compiled and linked on
// one device, run routine by routine on one stream, with its tensors read and written by name.
// The multi-stream API (backends, streams, contexts) is bound separately (module.cc); this is
// the one-call path, kept in C++ so that a call costs little more than the same calls in C++.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "kiln/ir/program.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/transfer.h"
#include "python/tensor.h"

namespace kiln::python {

// Threads: every method may be called from any Python thread. Calls on one compiled program run
// one after another (CallLock): each run's inputs, sizes and outputs are its own, and a thread
// waiting for its turn does not hold the GIL. A custom call must not call the program that runs it.
class CompiledProgram : public std::enable_shared_from_this<CompiledProgram> {
 public:
  // Compiles every routine of `program` for `device` (a name of kiln.devices()) and links them
  // into one context over the program's tensors (initializers seeded by `seed`).
  // With `trace`, the routines are compiled with value tracing and log into it. With
  // `check_bounds`, a gathered subscript out of range fails the run (ir::LowerOptions::check_bounds).
  static std::shared_ptr<CompiledProgram> create(const ir::Program& program, const std::string& device,
                                                 uint64_t seed, std::shared_ptr<runtime::ValueTrace> trace = nullptr,
                                                 bool check_bounds = false);

  // Waits for the program's work without the GIL (it may include calls into Python).
  ~CompiledProgram();

  const std::string& device() const { return device_; }
  std::vector<std::string> routines() const;
  // The program's sizes (language version 2) as the last inputs bound them: name → value, or
  // None while not bound.
  nanobind::dict sizes() const;

  // Sets the named tensors, runs `routine` to completion (without the GIL) and returns its
  // outputs (the `output` tensors it writes) as new NumPy arrays.
  nanobind::dict run(const std::string& routine, nanobind::kwargs inputs);
  // A tensor's value in and out. set() takes inputs, params and consts: the caller's array is
  // bound as the tensor's array where runtime::bind_host can (cpu, interp: until set again),
  // else copied. get() returns a copy.
  void set(const std::string& name, nanobind::handle value);
  nanobind::object get(const std::string& name);
  // get() into `out` (the tensor's bytes), without the GIL.
  void read(const std::string& name, void* out);
  // The tensor on the device: a zero-copy view where the device's memory is host memory.
  Tensor tensor(const std::string& name);
  // The tensor's array as its driver's memory, for DLPack (runtime::device_memory).
  runtime::DeviceMemory device_memory(const std::string& name);
  // Waits for the stream; later calls raise kiln.Error. Views handed out stay valid.
  void close();

 private:
  struct Entry {
    runtime::HostTensor tensor;
    ir::Role role;
    bool temporary = false;  // ir::TensorNode::temporary: not named in messages
    bool viewed = false;  // tensor() handed out a view of its array
    // The last view of kiln's own memory of it that tensor() handed out, while it lives: set()
    // copies into that memory rather than bind another, so that the view stays the tensor's.
    std::weak_ptr<void> own_view;
  };
  Entry& entry(const std::string& name);  // also refuses a closed program
  Entry& settable(const std::string& name);  // an input, param or const (ValueError otherwise)
  // Sets several tensors as one write (NodeTable::write_shaped), binding what can be bound.
  void set_all(nanobind::kwargs values);
  void set_values(const std::vector<std::pair<std::string, nanobind::handle>>& values,
                  const std::map<std::string, int64_t, std::less<>>& sizes);
  // run()'s sizes={...}: name → value, ValueError for a size the program does not declare.
  std::map<std::string, int64_t, std::less<>> size_values(nanobind::dict given) const;
  // ValueError naming the sizes `routine` depends on that are not bound, and how to bind them;
  // nothing when they are all bound.
  void check_sizes_bound(const runtime::Routine& routine) const;
  // Brings a viewed tensor's array and the views up to date with each other.
  void refresh_view(const std::string& name);

  std::string device_;
  std::shared_ptr<runtime::Backend> backend_;
  runtime::StreamRef stream_;
  std::shared_ptr<runtime::NodeTable> nodes_;
  runtime::ContextRef context_;
  std::map<std::string, runtime::RoutineRef, std::less<>> routines_;
  // Routines whose inputs were all given once: they stay given, so later runs skip the check.
  std::set<std::string, std::less<>> inputs_given_;
  std::map<std::string, std::vector<std::string>, std::less<>> outputs_;  // per routine
  std::map<std::string, Entry, std::less<>> entries_;
  // Held by each public method for the whole call (call_lock.h): guards the tensors' values and
  // sizes and every member here.
  mutable std::recursive_mutex calls_;
  bool closed_ = false;
  // Outputs are copied out of the device's arrays (host memory) until host_view says it cannot.
  bool outputs_from_device_memory_ = true;
};

}  // namespace kiln::python
