#include "python/compiled_program.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include <nanobind/stl/string.h>

#include "base/suggest.h"
#include "kiln/drivers/drivers.h"
#include "kiln/runtime/bind.h"
#include "kiln/runtime/routine.h"
#include "kiln/runtime/transfer.h"
#include "python/arrays.h"
#include "python/call_lock.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/python_release.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// Outputs of at least this many bytes are copied out of the device's memory where it is the host's.
constexpr size_t kDirectOutputBytes = size_t{64} << 10;

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::shared_ptr<CompiledProgram> CompiledProgram::create(const ir::Program& program,
                                                         const std::string& device, uint64_t seed,
                                                         std::shared_ptr<runtime::ValueTrace> trace,
                                                         bool check_bounds) {
  auto self = std::shared_ptr<CompiledProgram>(new CompiledProgram());
  self->device_ = device;
  std::vector<std::string> names;
  for (const ir::Routine& r : program.routines) names.push_back(r.name);
  Status status = [&]() -> Status {
    nb::gil_scoped_release no_gil;
    KILN_ASSIGN_OR_RETURN(hal::DeviceRef d, drivers::builtin_registry().create_device(device));
    runtime::BackendOptions options;
    options.value_trace = trace;
    KILN_ASSIGN_OR_RETURN(self->backend_, runtime::Backend::create(std::move(d), options));
    KILN_ASSIGN_OR_RETURN(self->stream_, self->backend_->new_stream());
    KILN_ASSIGN_OR_RETURN(self->nodes_, runtime::NodeTable::create(program, seed));
    runtime::CompileOptions compile;
    compile.lower.trace_values = trace != nullptr;
    if (trace) compile.lower.trace_lines = trace->lines_per_statement();
    compile.lower.check_bounds = check_bounds;
    KILN_ASSIGN_OR_RETURN(runtime::CodeRef code, self->backend_->compile_batch(program, names, compile));
    KILN_ASSIGN_OR_RETURN(runtime::ContextRef root, self->backend_->make_context(self->stream_, self->nodes_));
    KILN_ASSIGN_OR_RETURN(runtime::LinkedBatch linked, self->backend_->link_batch(root, code));
    self->context_ = std::move(linked.context);
    for (runtime::RoutineRef& r : linked.routines) self->routines_[r->name()] = std::move(r);
    return Status();
  }();
  throw_if_error(status);
  for (const ir::TensorNode& node : program.nodes) {
    self->entries_.emplace(node.name,
                           Entry{value_or_throw(self->nodes_->tensor(node.name)), node.role, node.temporary, false, {}});
  }
  for (const auto& [name, routine] : self->routines_) {
    std::vector<std::string>& outputs = self->outputs_[name];
    for (const std::string& written : routine->writes()) {
      if (self->entries_.at(written).role == ir::Role::kOutput) outputs.push_back(written);
    }
  }
  return self;
}

CompiledProgram::~CompiledProgram() {
  without_gil([&] {
    routines_.clear();
    context_.reset();
    entries_.clear();
    nodes_.reset();
    stream_.reset();
    backend_.reset();  // the last reference waits for the streams
  });
}

nb::dict CompiledProgram::sizes() const {
  CallLock lock(calls_);
  return sizes_dict(*nodes_);
}

std::vector<std::string> CompiledProgram::routines() const {
  std::vector<std::string> names;
  for (const auto& [name, routine] : routines_) names.push_back(name);
  return names;
}

void CompiledProgram::close() {
  CallLock lock(calls_);
  if (closed_) return;
  closed_ = true;
  Status status;
  {
    nb::gil_scoped_release no_gil;
    status = stream_->await();
  }
  throw_if_error(status);
}

CompiledProgram::Entry& CompiledProgram::entry(const std::string& name) {
  if (closed_) throw Error("FAILED_PRECONDITION: the compiled program on '" + device_ + "' is closed");
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::vector<std::string> known;
    for (const auto& [n, e] : entries_) {
      if (!e.temporary) known.push_back(n);
    }
    throw nb::value_error(("no tensor '" + name + "' in the program (tensors: " + joined(known) + ")" +
                           did_you_mean(name, known))
                              .c_str());
  }
  return it->second;
}

void CompiledProgram::refresh_view(const std::string& name) {
  nb::gil_scoped_release no_gil;
  throw_if_error(runtime::host_view(context_, name).status());
}

nb::dict CompiledProgram::run(const std::string& routine, nb::kwargs inputs) {
  CallLock lock(calls_);
  if (closed_) throw Error("FAILED_PRECONDITION: the compiled program on '" + device_ + "' is closed");
  auto it = routines_.find(routine);
  if (it == routines_.end()) {
    throw nb::value_error(("no routine '" + routine + "' in the program (routines: " + joined(routines()) + ")" +
                           did_you_mean(routine, routines()))
                              .c_str());
  }
  set_all(inputs);
  if (!inputs_given_.count(routine)) {
    throw_if_error(nodes_->check_inputs_given(it->second->reads(), routine));
    inputs_given_.insert(routine);
  }
  // The output arrays are made first, so that the run, the wait and the reads follow each other
  // without the GIL in between (a gap lets the queue's thread go to sleep before the reads).
  struct Output {
    Entry* entry;
    const std::string* name;
    void* data = nullptr;
  };
  std::vector<Output> outputs;
  nb::dict out;
  for (const std::string& name : outputs_.at(routine)) {
    Output o{&entry(name), &name};
    const runtime::NodeDesc& desc = o.entry->tensor.desc();
    out[name.c_str()] = new_numpy(desc, &o.data);
    outputs.push_back(o);
  }
  Status status;
  {
    nb::gil_scoped_release no_gil;
    status = it->second->run();
    if (status.ok()) status = stream_->await();
    for (const Output& o : outputs) {
      const size_t bytes = o.entry->tensor.desc().bytes;
      // Where the device's memory is the host's, a viewed or large output is copied from the
      // device's array itself: one copy instead of two (the download into the host copy, then
      // out of it); a small one is cheaper through the host copy. Elsewhere host_view is
      // UNIMPLEMENTED before it does anything, and outputs are read through the host copy.
      if (status.ok() && (o.entry->viewed || (outputs_from_device_memory_ && bytes >= kDirectOutputBytes))) {
        Result<runtime::HostView> view = runtime::host_view(context_, *o.name);
        if (view.ok()) {
          if (bytes != 0) std::memcpy(o.data, view->bytes.data(), bytes);
          continue;
        }
        if (view.status().code() == StatusCode::kUnimplemented && !o.entry->viewed) {
          outputs_from_device_memory_ = false;
        } else {
          status = view.status();
        }
      }
      if (status.ok()) status = o.entry->tensor.read({static_cast<std::byte*>(o.data), bytes});
    }
  }
  // A size nobody bound fails the run before it starts: said in Python's words (only then, so
  // that a run does not pay for the check).
  if (status.code() == StatusCode::kFailedPrecondition) check_sizes_bound(*it->second);
  throw_if_error(status);
  return out;
}

CompiledProgram::Entry& CompiledProgram::settable(const std::string& name) {
  Entry& e = entry(name);
  if (e.role == ir::Role::kOutput || e.role == ir::Role::kTensor) {
    throw nb::value_error(("tensor '" + name + "' is " + (e.role == ir::Role::kOutput ? "an output" : "an intermediate") +
                           ": routines compute it; the host sets inputs and params")
                              .c_str());
  }
  return e;
}

void CompiledProgram::set(const std::string& name, nb::handle value) {
  CallLock lock(calls_);
  set_values({{name, value}}, {});
}

void CompiledProgram::set_all(nb::kwargs values) {
  std::vector<std::pair<std::string, nb::handle>> list;
  std::map<std::string, int64_t, std::less<>> sizes;
  for (auto [key, value] : values) {
    std::string name = nb::cast<std::string>(key);
    // sizes={"K": 3}: a dict is never a tensor's value, so a tensor named `sizes` still works.
    if (name == "sizes" && nb::isinstance<nb::dict>(value)) {
      sizes = size_values(nb::borrow<nb::dict>(value));
      continue;
    }
    list.emplace_back(std::move(name), value);
  }
  set_values(list, sizes);
}

std::map<std::string, int64_t, std::less<>> CompiledProgram::size_values(nb::dict given) const {
  const std::vector<std::string> declared = nodes_->size_names();
  std::map<std::string, int64_t, std::less<>> sizes;
  for (auto [key, value] : given) {
    if (!nb::isinstance<nb::str>(key)) throw nb::type_error("sizes: the keys are the sizes' names (str)");
    std::string name = nb::cast<std::string>(key);
    if (std::find(declared.begin(), declared.end(), name) == declared.end()) {
      throw nb::value_error(("sizes: the program declares no size '" + name + "'" +
                             (declared.empty() ? std::string(" (it declares none)")
                                               : " (its sizes: " + joined(declared) + ")") +
                             did_you_mean(name, declared))
                                .c_str());
    }
    if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
      throw nb::type_error(("sizes: size " + name + " must be an int, got a " + nb::type_name(value.type()).c_str())
                               .c_str());
    }
    sizes[name] = nb::cast<int64_t>(value);
  }
  return sizes;
}

void CompiledProgram::check_sizes_bound(const runtime::Routine& routine) const {
  if (routine.sizes().empty()) return;
  const std::vector<std::string> names = nodes_->size_names();
  const std::vector<int64_t> values = nodes_->size_values();
  std::vector<std::string> unbound;
  const std::vector<std::string>& needed = routine.sizes();
  for (size_t s = 0; s < names.size(); ++s) {
    if (values[s] < 0 && std::find(needed.begin(), needed.end(), names[s]) != needed.end()) unbound.push_back(names[s]);
  }
  if (unbound.empty()) return;
  std::string example;
  for (const std::string& n : unbound) example += (example.empty() ? "" : ", ") + ("\"" + n + "\": ...");
  throw nb::value_error(("routine '" + routine.name() + "' needs size" + (unbound.size() > 1 ? "s " : " ") +
                         joined(unbound) + ", which no input has bound: pass an input that names " +
                         (unbound.size() > 1 ? "them" : "it") + ", or sizes={" + example + "}")
                            .c_str());
}

void CompiledProgram::set_values(const std::vector<std::pair<std::string, nb::handle>>& values,
                                 const std::map<std::string, int64_t, std::less<>>& sizes) {
  release_queued_objects();
  // As one write: the sizes the values' shapes bind are checked together first, so that values
  // that disagree change nothing (the last run's outputs stay, and the next good call works).
  // A value to bind is written as its shape only, then bound (or, where it cannot be, copied).
  std::deque<InputBytes> held;
  std::vector<runtime::NodeTable::ShapedWrite> writes;
  std::vector<std::pair<const std::string*, const InputBytes*>> to_bind;
  std::vector<std::string> viewed;
  for (const auto& [name, value] : values) {
    Entry& e = settable(name);
    const InputBytes& bytes = held.emplace_back(e.tensor.desc(), value, *nodes_);
    // A const is refused as set() refuses it (kiln.Error), before anything is written.
    if (e.tensor.desc().is_const) throw_if_error(e.tensor.write(bytes.bytes()));
    const bool bind = bytes.bindable() && e.own_view.expired();
    writes.push_back({name, bytes.bytes(), bytes.dims(), bind});
    if (bind) {
      to_bind.emplace_back(&name, &bytes);
    } else if (e.viewed) {
      viewed.push_back(name);
    }
  }
  if (writes.empty() && sizes.empty()) return;
  Status status;
  {
    nb::gil_scoped_release no_gil;  // it may wait for transfers, which may wait for a call into Python
    status = nodes_->write_shaped(writes, sizes);
  }
  if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
  throw_if_error(status);
  for (const auto& [name, bytes] : to_bind) {
    Entry& e = entries_.at(*name);
    Result<bool> bound = false;
    Status written;
    std::shared_ptr<void> keep_alive = bytes->keep_alive();  // takes references: under the GIL
    {
      nb::gil_scoped_release no_gil;  // both may wait for work that calls into Python
      bound = runtime::bind_host(context_, *name, bytes->memory(), std::move(keep_alive));
      if (bound.ok() && !*bound) written = e.tensor.write(bytes->bytes());
    }
    throw_if_error(bound.status());
    if (*bound) {
      e.viewed = false;  // views taken before show the memory the tensor had
      continue;
    }
    throw_if_error(written);
    if (e.viewed) viewed.push_back(*name);
  }
  for (const std::string& name : viewed) refresh_view(name);
}

void CompiledProgram::read(const std::string& name, void* out) {
  CallLock lock(calls_);
  Entry& e = entry(name);
  if (e.viewed) refresh_view(name);
  Status status;
  {
    nb::gil_scoped_release no_gil;
    status = e.tensor.read({static_cast<std::byte*>(out), e.tensor.desc().bytes});
  }
  throw_if_error(status);
}

nb::object CompiledProgram::get(const std::string& name) {
  CallLock lock(calls_);
  const runtime::NodeDesc& desc = entry(name).tensor.desc();
  void* data = nullptr;
  nb::object array = new_numpy(desc, &data);
  read(name, data);
  return array;
}

runtime::DeviceMemory CompiledProgram::device_memory(const std::string& name) {
  CallLock lock(calls_);
  entry(name);
  Result<runtime::DeviceMemory> memory = [&] {
    nb::gil_scoped_release no_gil;
    return runtime::device_memory(context_, name);
  }();
  return value_or_throw(std::move(memory));
}

Tensor CompiledProgram::tensor(const std::string& name) {
  CallLock lock(calls_);
  Entry& e = entry(name);
  const runtime::NodeDesc& desc = e.tensor.desc();
  HostArray host;
  host.dtype = desc.dtype;
  host.dims = desc.dims;
  Result<runtime::HostView> view = [&] {
    nb::gil_scoped_release no_gil;
    return runtime::host_view(context_, name);
  }();
  if (view.ok()) {
    host.data = view->bytes.data();
    host.keep_alive = view->keep_alive;
    e.viewed = true;
    if (!view->bound) e.own_view = view->keep_alive;
  } else if (view.status().code() == StatusCode::kNotFound) {
    throw nb::value_error(("tensor '" + name + "' has no array on the device: no routine stores it " +
                           "(the compiler keeps intermediates in registers); declare it output or param to see it")
                              .c_str());
  } else if (view.status().code() != StatusCode::kUnimplemented) {
    throw_if_error(view.status());
  }
  const dlpack::DLDevice dl_device =
      host.data ? dlpack::DLDevice{dlpack::kDLCPU, 0} : dlpack::device_of(backend_->device()->info());
  return Tensor(name, std::move(host), shared_from_this(), device_, dl_device);
}

}  // namespace kiln::python
