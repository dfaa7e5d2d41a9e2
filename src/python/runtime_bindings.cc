// The multi-stream runtime for Python (kiln/runtime/*.h): backends, streams, the tensors' host
// copies, compiled code, contexts, routines, transfers and stream timelines. Each handle keeps
// the backend it belongs to alive (the runtime's contexts only point at theirs), so Python may
// drop them in any order.
#include <atomic>
#include <map>
#include <optional>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/drivers/drivers.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/bind.h"
#include "kiln/runtime/routine.h"
#include "kiln/runtime/transfer.h"
#include "python/arrays.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/kernels.h"
#include "python/program.h"
#include "python/python_release.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// What every handle of one backend shares: the runtime object and whether Backend.close() was
// called. Closing waits for the streams and refuses later use through any handle; the runtime
// objects go when the last handle does (contexts only point at their backend).
struct BackendHandle {
  std::shared_ptr<runtime::Backend> backend;
  std::string device;
  std::atomic<bool> closed{false};

  // The backend's destructor waits for its streams: without the GIL.
  ~BackendHandle() {
    without_gil([&] { backend.reset(); });
  }

  runtime::Backend& live() const {
    if (closed.load()) throw Error("FAILED_PRECONDITION: the backend on '" + device + "' is closed");
    return *backend;
  }
  void close();
};
using BackendRef = std::shared_ptr<BackendHandle>;

struct Tensors {
  std::shared_ptr<runtime::NodeTable> table;
};
struct Backend {
  BackendRef backend;
};
// A stream's timeline (`backend` set), or a semaphore the host signals (kiln.Semaphore()).
struct Semaphore {
  BackendRef backend;
  std::shared_ptr<hal::Semaphore> semaphore;

  void check_live() const {
    if (backend) backend->live();
  }
};
struct Stream {
  BackendRef backend;
  runtime::StreamRef stream;
};
struct Code {
  BackendRef backend;
  runtime::CodeRef code;
};
struct Routine {
  BackendRef backend;
  runtime::RoutineRef routine;
};
struct Context {
  BackendRef backend;
  runtime::ContextRef context;
  std::map<std::string, runtime::RoutineRef, std::less<>> routines;  // linked here
};

Timeout timeout_of(std::optional<double> seconds) {
  if (!seconds) return Timeout::infinite();
  if (!(*seconds >= 0)) throw nb::value_error("timeout must be a number of seconds >= 0");
  // Saturates: a timeout past ~292 years is no timeout.
  return *seconds >= 9.2e9 ? Timeout::infinite() : Timeout::after_ns(static_cast<int64_t>(*seconds * 1e9));
}

// Runs `wait` without the GIL and raises its failure.
template <typename Wait>
void blocking(Wait&& wait) {
  Status status;
  {
    nb::gil_scoped_release no_gil;
    status = wait();
  }
  throw_if_error(status);
}

void BackendHandle::close() {
  if (closed.exchange(true)) return;
  blocking([&] { return backend->await(); });
}

// from_host / to_host on a live context: whether there was anything to move.
template <Result<bool> (*transfer)(const runtime::ContextRef&, std::string_view)>
bool scheduled_transfer(const Context& c, const std::string& node) {
  c.backend->live();
  Result<bool> moved = false;
  blocking([&] {
    moved = transfer(c.context, node);
    return moved.status();
  });
  return *moved;
}

runtime::HostTensor tensor_of(const Tensors& t, const std::string& name) {
  Result<runtime::HostTensor> tensor = t.table->tensor(name);
  if (!tensor.ok()) throw nb::value_error(tensor.status().message().c_str());
  return *tensor;
}

runtime::Sharing sharing_of(const std::string& sharing) {
  if (sharing == "shared") return runtime::Sharing::kShared;
  if (sharing == "per_stream") return runtime::Sharing::kPerStream;
  throw nb::value_error(("sharing must be \"shared\" or \"per_stream\", not \"" + sharing + "\"").c_str());
}

runtime::MergeMode merge_mode(const std::string& mode) {
  if (mode == "no") return runtime::MergeMode::kNo;
  if (mode == "copy") return runtime::MergeMode::kCopy;
  if (mode == "streaming") return runtime::MergeMode::kStreaming;
  throw nb::value_error(("merge must be \"no\", \"copy\" or \"streaming\", not \"" + mode + "\"").c_str());
}

void check_same_backend(const BackendRef& a, const BackendRef& b, const char* what) {
  a->live();
  if (a != b) throw nb::value_error((std::string(what) + " belongs to another backend").c_str());
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<Tensors>(m, "Tensors",
                      "The host copies of a program's tensors, shared by every context made over them: "
                      "params start from their initializers, the rest from zeros. set() replaces a host "
                      "copy (uploaded before the next routine that reads it); get() waits for the last "
                      "routine that writes the tensor and copies its value back, also once the context and "
                      "backend that ran it are gone (the device array holding a tensor's newest value is "
                      "kept until it is read back, set, or written again).")
      .def(nb::new_([](const Program& p, uint64_t seed) {
             return Tensors{value_or_throw(runtime::NodeTable::create(p.program, seed))};
           }), "program"_a, "seed"_a = 0)
      .def_prop_ro("names", [](const Tensors& t) { return t.table->names(); })
      .def("set", [](const Tensors& t, const std::string& name, nb::handle value) {
            write_value(tensor_of(t, name), value, *t.table);
          }, "name"_a, "value"_a)
      .def("set_sharing", [](const Tensors& t, const std::string& name, const std::string& sharing) {
            Status status = t.table->set_sharing(name, sharing_of(sharing));
            if (status.code() == StatusCode::kNotFound) throw nb::value_error(status.message().c_str());
            throw_if_error(status);
          }, "name"_a, "sharing"_a,
          "\"shared\": the contexts on one device's streams use one array of the tensor, which only the "
          "stream that first writes it may write (the others read it, ordered after those writes); "
          "\"per_stream\": an array per stream. Before any context has an array of it.")
      .def_prop_ro("sizes", [](const Tensors& t) { return sizes_dict(*t.table); },
                   "The program's sizes: name -> value (None while not bound).")
      .def("set_sizes", [](const Tensors& t, nb::kwargs values) {
            std::map<std::string, int64_t, std::less<>> bound;
            for (auto [name, value] : values) bound[nb::cast<std::string>(name)] = nb::cast<int64_t>(value);
            Status status = t.table->set_sizes(bound);
            if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound) {
              throw nb::value_error(status.message().c_str());
            }
            throw_if_error(status);
          }, "Binds sizes by name (set_sizes(N=3)); tensors whose shapes change start from zeros.")
      .def("get", [](const Tensors& t, const std::string& name) {
            runtime::HostTensor tensor = tensor_of(t, name);
            void* data = nullptr;
            nb::object array = new_numpy(tensor.desc(), &data);
            blocking([&] { return tensor.read({static_cast<std::byte*>(data), tensor.desc().bytes}); });
            return array;
          }, "name"_a);

  nb::class_<Semaphore>(m, "Semaphore", "A timeline: a 64-bit value that only grows, or a failure.")
      .def(nb::new_([](uint64_t value) { return Semaphore{nullptr, hal::Semaphore::create(value)}; }), "value"_a = 0,
           "A semaphore the host signals (signal()), for a stream to wait for (Stream.wait_for).")
      .def_prop_ro("value", [](const Semaphore& s) { s.check_live(); return value_or_throw(s.semaphore->query()); },
                   "The value reached so far; kiln.Error with the failure if it failed.")
      .def("wait", [](const Semaphore& s, uint64_t value, std::optional<double> timeout) {
            s.check_live();
            const Timeout t = timeout_of(timeout);
            blocking([&] { return s.semaphore->wait(value, t); });
          }, "value"_a, "timeout"_a = nb::none(),
          "Blocks (without the GIL) until the value is reached; kiln.Error on failure or timeout.")
      .def("signal", [](const Semaphore& s, uint64_t value) {
            if (s.backend) {
              throw nb::value_error("a stream's timeline advances with the stream's work; only a kiln.Semaphore() "
                                    "made by the host is signalled by it");
            }
            Status status = s.semaphore->signal(value);
            if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
            throw_if_error(status);
          }, "value"_a,
          "Advances a host semaphore to `value` (above its current one; ValueError otherwise), releasing the "
          "streams that wait for it.");

  nb::class_<Stream>(m, "Stream", "A queue of the backend's device: its routines and transfers run in order.")
      .def_prop_ro("name", [](const Stream& s) { return s.stream->name(); })
      .def_prop_ro("timeline", [](const Stream& s) { return Semaphore{s.backend, s.stream->timeline()}; },
                   "The semaphore that each action on the stream advances when it completes.")
      .def("wait", [](const Stream& s, std::optional<double> timeout) {
            s.backend->live();
            const Timeout t = timeout_of(timeout);
            blocking([&] { return s.stream->await(t); });
          }, "timeout"_a = nb::none(),
          "Blocks until everything scheduled so far has completed; raises the stream's failure.")
      .def("wait_for", [](const Stream& s, const Semaphore& semaphore, uint64_t value) {
            s.backend->live();
            semaphore.check_live();
            blocking([&] { return s.stream->wait_for(semaphore.semaphore, value); });
          }, "semaphore"_a, "value"_a,
          "Makes what is scheduled on the stream after this call wait (without blocking the host) until the "
          "semaphore reaches `value`; a failed semaphore fails the stream.");

  nb::class_<Code>(m, "Code", "Routines compiled for a device, ready to link into contexts.")
      .def_prop_ro("routines", [](const Code& c) { return c.code->routine_names(); });

  nb::class_<Routine>(m, "Routine", "Code linked into a context: what runs on the context's stream.")
      .def_prop_ro("name", [](const Routine& r) { return r.routine->name(); })
      .def_prop_ro("reads", [](const Routine& r) { return r.routine->reads(); })
      .def_prop_ro("writes", [](const Routine& r) { return r.routine->writes(); })
      .def("run", [](const Routine& r) {
            r.backend->live();
            blocking([&] { return r.routine->run(); });
          },
           "Schedules the routine and returns at once; a failure comes back from the next wait.")
      .def("run_in", [](const Routine& r, const Context& c) {
            r.backend->live();
            c.backend->live();
            blocking([&] { return r.routine->run_in(c.context); });
          }, "context"_a, "Schedules it on another context's stream with that context's arrays.");

  nb::class_<Context>(m, "Context", "Arrays of tensors on one stream, and the routines linked to them.")
      .def_prop_ro("stream", [](const Context& c) { return Stream{c.backend, c.context->stream()}; })
      .def("link", [](const Context& c, const Code& code) {
            runtime::Backend& backend = c.backend->live();
            Context child{c.backend, nullptr, {}};
            blocking([&]() -> Status {
              KILN_ASSIGN_OR_RETURN(runtime::LinkedBatch linked, backend.link_batch(c.context, code.code));
              child.context = std::move(linked.context);
              for (runtime::RoutineRef& r : linked.routines) child.routines[r->name()] = std::move(r);
              return Status();
            });
            return child;
          }, "code"_a, "Links every routine of `code` into a new child context (arrays found or allocated).")
      .def("bind", [](const Context& c, const std::string& name, nb::handle value) {
            c.backend->live();
            release_queued_objects();
            Result<runtime::HostTensor> found = c.context->nodes()->tensor(name);
            if (!found.ok()) throw nb::value_error(found.status().message().c_str());
            const runtime::HostTensor& tensor = *found;
            InputBytes bytes(tensor.desc(), value, *c.context->nodes());
            if (bytes.bindable() && !tensor.desc().is_const) {
              // The shape first (it binds the sizes a sized tensor names), then the memory.
              const runtime::NodeTable::ShapedWrite shape{name, bytes.bytes(), bytes.dims(), true};
              Status status = c.context->nodes()->write_shaped({&shape, 1});
              if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
              throw_if_error(status);
              if (value_or_throw(runtime::bind_host(c.context, name, bytes.memory(), bytes.keep_alive()))) return true;
            }
            write_value(tensor, value, *c.context->nodes());
            return false;
          }, "name"_a, "value"_a,
          "Binds a host array (NumPy, DLPack) as the tensor's array in this context tree, without a copy, where "
          "the device can use it in place (cpu, interp; C-contiguous, writable, aligned to its element size, "
          "overlapping no other tensor's array): routines then read and write the caller's memory until the "
          "tensor is set again. Elsewhere it writes a copy, as Tensors.set does. Returns whether it bound it.")
      .def("routine", [](const Context& c, const std::string& name) {
            auto it = c.routines.find(name);
            if (it == c.routines.end()) {
              throw nb::value_error(("no routine '" + name + "' linked in this context").c_str());
            }
            return Routine{c.backend, it->second};
          }, "name"_a);

  nb::class_<Backend>(m, "Backend", "kiln's runtime over one device: its streams, compiling and linking.")
      .def(nb::new_([](const std::string& device, uint32_t max_workgroups) {
             runtime::BackendOptions options;
             options.max_workgroups = max_workgroups;
             Backend b{std::make_shared<BackendHandle>()};
             b.backend->device = device;
             blocking([&]() -> Status {
               KILN_ASSIGN_OR_RETURN(hal::DeviceRef d, drivers::builtin_registry().create_device(device));
               KILN_ASSIGN_OR_RETURN(b.backend->backend, runtime::Backend::create(std::move(d), options));
               return Status();
             });
             return b;
           }), "device"_a = "cpu", "max_workgroups"_a = 0,
           "A backend on a device of kiln.devices(). max_workgroups: workgroups per kernel (0: chosen "
           "by size; 1: each stream is one core).")
      .def_prop_ro("device", [](const Backend& b) { return b.backend->device; })
      .def("new_stream", [](const Backend& b) { return Stream{b.backend, value_or_throw(b.backend->live().new_stream())}; })
      .def("wait", [](const Backend& b, std::optional<double> timeout) {
            runtime::Backend& backend = b.backend->live();
            const Timeout t = timeout_of(timeout);
            blocking([&] { return backend.await(t); });
          }, "timeout"_a = nb::none(), "Blocks until every stream is idle; raises the first failure.")
      .def("close", [](const Backend& b) { b.backend->close(); },
          "Waits for every stream, then refuses any later use of the backend and of its streams, "
          "contexts and routines (kiln.Error). Raises the streams' failure, if any. Closing twice is "
          "allowed; the memory goes with the last handle.")
      .def("__enter__", [](const Backend& b) { return b; })
      .def("__exit__", [](const Backend& b, nb::args) { b.backend->close(); })
      .def("compile", [](const Backend& b, const Program& p, std::optional<std::vector<std::string>> routines,
                         bool shared) {
            std::vector<std::string> names;
            if (routines) {
              names = *routines;
            } else {
              for (const ir::Routine& r : p.program.routines) names.push_back(r.name);
            }
            runtime::CompileOptions options;
            options.shared = shared;
            runtime::Backend& backend = b.backend->live();
            Code code{b.backend, nullptr};
            blocking([&]() -> Status {
              KILN_ASSIGN_OR_RETURN(code.code, backend.compile_batch(p.program, names, options));
              return Status();
            });
            return code;
          }, "program"_a, "routines"_a = nb::none(), "shared"_a = false,
          "Compiles routines (all by default) for the device; shared code may be linked on other backends.")
      .def("compile_kernels", [](const Backend& b, const Program& p, std::string source, std::string format,
                                 std::vector<hal::ExportInfo> exports, const nb::dict& routines, std::string label,
                                 bool shared) {
            runtime::Backend& backend = b.backend->live();
            runtime::KernelSet set = checked_kernel_set(p, std::move(source), std::move(format), std::move(label),
                                                        std::move(exports), routines);
            runtime::CompileOptions options;
            options.shared = shared;
            Code code{b.backend, nullptr};
            blocking([&]() -> Status {
              KILN_ASSIGN_OR_RETURN(code.code, backend.compile_kernels(p.program, std::move(set), options));
              return Status();
            });
            return code;
          }, "program"_a, "source"_a, "format"_a, "exports"_a, "routines"_a, "label"_a = "kernels",
          "shared"_a = false,
          "A framework's own kernels over the nodes of `program` as code that Context.link accepts: `source` in "
          "`format` (\"c\" on cpu, \"opencl-c\" on OpenCL devices; docs/runtime.md has each kernel ABI), its "
          "`exports` (kiln.KernelExport) and `routines` (a dict: name -> list of kiln.KernelDispatch). ValueError "
          "for a description that does not fit the program or the exports; kiln.Error from building the source "
          "(UNIMPLEMENTED for a format the device does not build, the compiler's output for a compile error).")
      .def("context", [](const Backend& b, const Stream& s, const Tensors& t) {
            check_same_backend(b.backend, s.backend, "the stream");
            return Context{b.backend, value_or_throw(b.backend->live().make_context(s.stream, t.table)), {}};
          }, "stream"_a, "tensors"_a, "A root context on `stream` over the tensors' host copies.");

  m.def("device_to_device", [](const std::string& node, const Context& dst, const Context& src,
                               const std::string& merge) {
          const runtime::MergeMode mode = merge_mode(merge);
          dst.backend->live();
          src.backend->live();
          blocking([&] { return runtime::device_to_device(node, mode, dst.context, src.context).status(); });
        }, "node"_a, "dst"_a, "src"_a, "merge"_a = "no",
        "Schedules src's array of `node` into dst after src's last writer: merge=\"no\" into dst's own "
        "array, \"copy\" into dst's stream's merge buffer (read as node.merge), \"streaming\" to let "
        "dst read src's array directly (same device).");
  m.def("from_host", &scheduled_transfer<runtime::from_host>, "context"_a, "node"_a, "Schedules the host copy's upload to the context's array; False if current.");
  m.def("to_host", &scheduled_transfer<runtime::to_host>, "context"_a, "node"_a, "Schedules the array's copy back to the host copy; False if current.");
}

}  // namespace kiln::python
