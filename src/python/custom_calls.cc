// kiln.register_call: functions written in Python that a program's `call` statements run
// (docs/python.md, "Custom calls in Python").
//
// A Python function has no declared signature, so it is registered in the RAL as a generic
// function (kiln/ral/registry.h): linking makes one concrete function per call site's full name,
// whose invoker turns the memrefs into NumPy arrays and the attributes into keyword arguments.
// The invoker runs on whichever thread runs the call (a CPU pool worker, a queue's host thread)
// and takes the GIL for the Python call alone; every kiln wait in the package releases the GIL,
// so a thread waiting for the routine never holds what the call needs.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "kiln/drivers/drivers.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/registry.h"
#include "python/arrays.h"
#include "python/errors.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// Whether calls may still enter the interpreter, and the registered callables. An atexit hook
// closes it before the interpreter finalizes, once the calls inside have returned: a queue
// thread must never take the GIL of a finalizing interpreter (CPython would stop the thread for
// good inside kiln's queue). From then on a call fails instead (so the routines that Python's
// shutdown still waits for end), and the callables are released, which no call can reach any
// more (registrations last for the process otherwise: the registry never removes a function).
class InterpreterGate {
 public:
  // With the GIL: a new reference to `callable`, released when the gate closes.
  PyObject* keep(PyObject* callable) {
    Py_INCREF(callable);
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(callable);
    return callable;
  }
  bool enter() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return false;
    ++inside_;
    return true;
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--inside_ == 0) idle_.notify_all();
  }
  // With the GIL, which the calls inside need to return: released while waiting for them.
  void close() {
    {
      // Closed before the GIL is released: no call that has not started gets in meanwhile.
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    std::vector<PyObject*> kept;
    {
      nb::gil_scoped_release no_gil;
      std::unique_lock<std::mutex> lock(mutex_);
      idle_.wait(lock, [&] { return inside_ == 0; });
      kept.swap(kept_);
    }
    for (PyObject* callable : kept) Py_DECREF(callable);
  }

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  bool closed_ = false;
  int inside_ = 0;
  std::vector<PyObject*> kept_;
};

// Never destroyed: queue threads may still ask it while static objects are destroyed.
InterpreterGate& gate() {
  static auto* g = new InterpreterGate();
  return *g;
}

// A registered callable (a reference the gate keeps until it closes).
struct PythonFunction {
  PyObject* callable;
  std::string name;
};

// A function made for one call site's full name: Function::user of what the maker makes.
struct PythonCall {
  struct Tensor {
    ir::DType dtype;
    size_t rank;
  };
  std::shared_ptr<const PythonFunction> function;
  std::vector<Tensor> tensors;  // arguments, then outputs
  size_t outputs = 0;
  std::vector<std::string> attributes;
};

// The call a full name describes: "pvoid", an mNdT code per tensor, "f64" per attribute
// (ral::BoundCall::describe writes it so).
Result<PythonCall> call_of(const ral::CallSite& site, std::shared_ptr<const PythonFunction> function) {
  ral::NameParts parts;
  if (!ral::split_mangled_name(site.full_name, &parts) || parts.results != "void") {
    return internal_error("'" + site.full_name + "' is not the full name of a call statement");
  }
  PythonCall call{std::move(function), {}, site.outputs, site.attributes};
  size_t scalars = 0;
  std::string_view rest = parts.arguments;
  for (size_t n = 0; !rest.empty(); ++n) {
    const size_t end = rest.find('_');
    const std::string_view code = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (n == 0) {
      if (code != "pvoid") return internal_error("'" + site.full_name + "' does not take the context first");
      continue;
    }
    const size_t d = code.find('d');
    if (code.size() > 2 && code[0] == 'm' && d != std::string_view::npos && d > 1 && ral::dtype_from_code(code.substr(d + 1))) {
      if (scalars) return internal_error("'" + site.full_name + "' passes a tensor after an attribute");
      size_t rank = 0;
      for (char c : code.substr(1, d - 1)) {
        if (c < '0' || c > '9') return internal_error("'" + site.full_name + "': a malformed memref code");
        rank = rank * 10 + static_cast<size_t>(c - '0');
      }
      call.tensors.push_back({*ral::dtype_from_code(code.substr(d + 1)), rank});
    } else if (code == "f64") {
      ++scalars;
    } else {
      return invalid_argument_error("a Python function takes tensors and number attributes; " + site.full_name +
                                    " passes '" + std::string(code) + "'");
    }
  }
  if (scalars != call.attributes.size() || call.outputs > call.tensors.size()) {
    return internal_error("'" + site.full_name + "' does not match its call site's outputs and attributes");
  }
  return call;
}

// "ValueError: boom (at script.py:12)": a Python exception for a kiln message.
std::string describe_exception(nb::python_error& error) {
  auto text_of = [](nb::handle object) {
    PyObject* text = PyObject_Str(object.ptr());
    if (!text) {
      PyErr_Clear();
      return std::string("(its message could not be read)");
    }
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    std::string out = utf8 ? std::string(utf8, static_cast<size_t>(size)) : std::string("(not UTF-8)");
    if (!utf8) PyErr_Clear();
    Py_DECREF(text);
    return out;
  };
  std::string text = text_of(nb::getattr(error.type(), "__qualname__", error.type()));
  const std::string message = text_of(error.value());
  if (!message.empty()) text += ": " + message;
  // Where it was raised: the innermost frame of the traceback.
  try {
    nb::handle tb = error.traceback();
    if (tb.is_valid() && !tb.is_none()) {
      while (!tb.attr("tb_next").is_none()) tb = tb.attr("tb_next");
      text += " (at " + text_of(tb.attr("tb_frame").attr("f_code").attr("co_filename")) + ":" +
              text_of(tb.attr("tb_lineno")) + ")";
    }
  } catch (nb::python_error&) {  // no place to name: the message is enough
  }
  return text;
}

// The Python call itself, with the GIL. A Python exception becomes the status.
Status call_python(const PythonCall& call, void** args) {
  const PythonFunction& f = *call.function;
  const std::string who = "Python function '" + f.name + "'";
  try {
    // Each array keeps an owner of its own; once the call's references are gone, an owner still
    // referenced means the function kept the array (or a view of it) past its return.
    const size_t count = call.tensors.size();
    std::vector<nb::object> owners;
    nb::object positional = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(count)));
    if (!positional.is_valid()) throw nb::python_error();
    for (size_t t = 0; t < count; ++t) {
      // A memref: the data pointer, then one int64 size per dimension (kiln/ral/abi.h).
      const auto* words = static_cast<const std::byte*>(args[1 + t]);
      HostArray array;
      std::memcpy(&array.data, words, sizeof(void*));
      array.dtype = call.tensors[t].dtype;
      array.dims.resize(call.tensors[t].rank);
      if (!array.dims.empty()) std::memcpy(array.dims.data(), words + sizeof(void*), array.dims.size() * sizeof(int64_t));
      array.read_only = t + call.outputs < count;  // arguments: writing them would change the program's tensors
      owners.push_back(nb::dict());
      PyTuple_SET_ITEM(positional.ptr(), static_cast<Py_ssize_t>(t), numpy_view(array, owners.back()).release().ptr());
    }
    nb::dict keywords;
    for (size_t a = 0; a < call.attributes.size(); ++a) {
      keywords[call.attributes[a].c_str()] = *static_cast<const double*>(args[1 + count + a]);
    }
    nb::object result = nb::steal(PyObject_Call(f.callable, positional.ptr(), keywords.ptr()));
    positional = nb::object();
    if (!result.is_valid()) throw nb::python_error();
    if (!result.is_none()) {
      return invalid_argument_error(who + " returned a " + nb::cast<std::string>(nb::str(result.type().attr("__name__"))) +
                                    "; it writes its outputs in place (y[...] = ...) and returns None");
    }
    for (size_t t = 0; t < count; ++t) {
      if (Py_REFCNT(owners[t].ptr()) > 1) {
        return failed_precondition_error(
            who + " kept positional argument " + std::to_string(t) + " (" +
            (t + call.outputs < count ? "an argument" : "an output") +
            ") or a view of it after returning: the array is kiln's memory only during the call; keep a copy "
            "(numpy.copy) instead");
      }
    }
    return Status();
  } catch (nb::python_error& error) {
    return Status(StatusCode::kUnknown, who + " raised " + describe_exception(error));
  } catch (const std::exception& error) {
    return internal_error(who + ": " + error.what());
  }
}

// CPython makes a thread state for a thread it did not start at each PyGILState_Ensure and
// frees it at the matching Release (three munmaps, most of a small call's time). A queue's or
// pool's thread instead keeps the one its first call made, for its life (CPython frees it when the
// interpreter ends, after which the gate lets no call in): the GIL is released, the state stays.
void keep_thread_state() {
  thread_local bool kept = false;
  if (kept || PyGILState_GetThisThreadState() != nullptr) return;
  PyGILState_Ensure();  // never released: every later Ensure and Release on this thread nests in it
  PyEval_SaveThread();
  kept = true;
}

Status invoke(const ral::Function& function, ral::ExecutionContext&, void** args) {
  const auto& call = *static_cast<const PythonCall*>(function.user);
  if (!gate().enter()) {
    return failed_precondition_error("the Python interpreter is exiting: Python function '" + call.function->name +
                                     "' was not called");
  }
  Status status;
  keep_thread_state();
  {
    nb::gil_scoped_acquire gil;
    status = call_python(call, args);
  }
  gate().leave();
  return status;
}

// The driver names a registration may name.
std::vector<std::string> driver_names() {
  std::vector<std::string> names;
  for (const hal::DriverRef& d : drivers::builtin_registry().drivers()) names.push_back(d->name());
  return names;
}

void register_call(const std::string& name, nb::handle fn, std::optional<std::string> device) {
  if (!PyCallable_Check(fn.ptr())) {
    throw nb::type_error(("kiln.register_call('" + name + "'): fn must be callable, got " +
                          nb::cast<std::string>(nb::str(fn.type().attr("__name__"))))
                             .c_str());
  }
  if (device) {
    const std::vector<std::string> drivers = driver_names();
    if (std::find(drivers.begin(), drivers.end(), *device) == drivers.end()) {
      std::string known;
      for (const std::string& d : drivers) known += (known.empty() ? "'" : ", '") + d + "'";
      throw nb::value_error(("kiln.register_call('" + name + "'): device '" + *device + "' is not one of " + known +
                             " (a function serves every device of its driver)")
                                .c_str());
    }
  }
  auto function = std::make_shared<PythonFunction>(PythonFunction{fn.ptr(), name});
  ral::GenericFunction generic{name, device.value_or(""), [function](const ral::CallSite& site) -> Result<ral::Function> {
    KILN_ASSIGN_OR_RETURN(PythonCall call, call_of(site, function));
    return ral::function_for_site(site, &invoke, std::make_shared<PythonCall>(std::move(call)));
  }};
  Status status = ral::Registry::global().add_generic(std::move(generic));
  if (status.ok()) {
    gate().keep(fn.ptr());  // under the GIL, so before any call (which takes it) can use it
    return;
  }
  if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
  throw_if_error(status);
}

}  // namespace

void bind_custom_calls(nb::module_& m) {
  m.def("register_call", &register_call, "name"_a, "fn"_a, "device"_a.none() = nb::none(),
        "Registers a Python function that programs call as `call NAME(args, attr=value) -> outputs`: "
        "fn(*arguments, *outputs, **attributes) gets NumPy arrays (arguments read-only, outputs to write "
        "in place) and the attributes as floats, and returns None. For every device, or for one driver "
        "(device=\"cpu\"). Register before compiling the programs that call it. kiln.Error when the name is "
        "registered already; ValueError for a name that cannot be called or a built-in function's name.");
  // Before the interpreter finalizes: no call enters it from then on (see InterpreterGate).
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] { gate().close(); }));
}

}  // namespace kiln::python
