// The extension module kiln._kiln: programs, the one-call compiled program, tensors and DLPack
// here; the multi-stream runtime in runtime_bindings.cc, custom calls in custom_calls.cc. python/kiln/__init__.py re-exports it.
#include <cstring>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/vector.h>

#include "kiln/ir/sizes.h"
#include "kiln/base/file.h"
#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "python/arrays.h"
#include "python/compiled_program.h"
#include "python/dlpack.h"
#include "python/dtypes.h"
#include "python/errors.h"
#include "python/kernels.h"
#include "python/program.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// Programs larger than this are refused rather than read (as by `kiln run` and the C API).
constexpr size_t kMaxProgramBytes = size_t{64} << 20;

Program parse(const std::string& text, const std::string& file_name) {
  Result<ir::Program> program = lang::parse_program(text, file_name);
  if (!program.ok()) throw ProgramError(program.status().message());
  return Program{std::move(*program), {}};
}

Program load(const std::string& path) {
  Result<std::string> text = read_bounded_file(path, kMaxProgramBytes, "the program");
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    PyErr_SetString(PyExc_FileNotFoundError, text.status().message().c_str());
    throw nb::python_error();
  }
  return parse(value_or_throw(std::move(text)), path);
}

void set_param_value(Program& p, const std::string& name, nb::object value) {
  const ir::TensorNode* node = p.program.find_node(name);
  if (!node || node->role != ir::Role::kParam) {
    throw nb::value_error(("set_param_value: the program has no param '" + name + "'" +
                           (node ? " ('" + name + "' is " + std::string(ir::role_name(node->role)) + ")" : ""))
                              .c_str());
  }
  for (auto& [have, held] : p.param_values) {
    if (have == name) {
      held = std::move(value);
      return;
    }
  }
  p.param_values.emplace_back(name, std::move(value));
}

nb::dict declarations(const Program& p) {
  nb::dict out;
  for (const ir::TensorNode& node : p.program.nodes) {
    nb::list dims;
    // A dimension that names sizes (language version 2) as the language writes it: "N", "N + 1".
    for (size_t d = 0; d < node.dims.size(); ++d) {
      if (node.is_sized() && !node.sized_dims[d].is_constant()) {
        dims.append(ir::size_expr_text(node.sized_dims[d], p.program.sizes));
      } else {
        dims.append(node.dims[d]);
      }
    }
    out[node.name.c_str()] = nb::make_tuple(std::string(ir::role_name(node.role)),
                                            numpy_dtype_name(node.dtype), nb::tuple(dims));
  }
  return out;
}

}  // namespace

void bind_runtime(nb::module_& m);
void bind_world(nb::module_& m);
void bind_custom_calls(nb::module_& m);

}  // namespace kiln::python

using namespace kiln;
using namespace kiln::python;

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's runtime: compile array programs for a device and run them.";
  nb::exception<Error> error(m, "Error");
  nb::exception<ProgramError> program_error(m, "ProgramError", error);
  error.attr("__doc__") = "A failure kiln reports: compiling, linking or running failed; the message says what and where.";
  program_error.attr("__doc__") =
      "A program that does not parse or check: the message holds every diagnostic as FILE:LINE:COL: error: ...";

  m.def("version", [] { return std::string(KILN_VERSION); }, "kiln's version, as kiln_version() in C.");
  m.def("devices", [] { return drivers::usable_device_names(); },
        "The names of the devices usable here (\"cpu\", \"interp\", \"opencl\", \"opencl:1\", ...).");

  // dynamic_attr: an importer keeps what it knows on the program (kiln.onnx: onnx_names).
  nb::class_<Program>(m, "Program", nb::dynamic_attr(), "A program in kiln's language, parsed and checked.")
      .def_static("from_text", &parse, "text"_a, "file_name"_a = "<string>",
                  "Parses program text. Raises ProgramError with every diagnostic as "
                  "FILE:LINE:COL: error: ... (FILE is file_name).")
      .def_static("from_file", &load, "path"_a,
                  "Reads and parses a .kiln file (FileNotFoundError when there is none).")
      .def_prop_ro("routines", [](const Program& p) {
            std::vector<std::string> names;
            for (const ir::Routine& r : p.program.routines) names.push_back(r.name);
            return names;
          }, "The routines' names, in order.")
      .def_prop_ro("tensors", &declarations,
                   "Every tensor: name -> (role, dtype, shape), role being input, output, param, tensor or const; "
                   "a dimension that names sizes is their expression (\"N\", \"N + 1\").")
      .def_prop_ro("sizes", [](const Program& p) {
            std::vector<std::string> names;
            for (const ir::SizeDecl& s : p.program.sizes) names.push_back(s.name);
            return names;
          }, "The sizes the program declares (language version 2), in order.")
      .def("set_param_value", &set_param_value, "name"_a, "value"_a,
           "The value param `name` starts from in every program compile() makes from now on, instead of "
           "its initializer: an array of its dtype and shape (checked by compile(), which sets a copy). "
           "ValueError when the program has no param of that name.")
      .def_prop_ro("param_values", [](const Program& p) {
            nb::dict out;
            for (const auto& [name, value] : p.param_values) out[name.c_str()] = value;
            return out;
          }, "The values set with set_param_value: name -> value.")
      .def("compile", [](const Program& p, const std::string& device, uint64_t seed,
                         std::shared_ptr<runtime::ValueTrace> trace, bool check_bounds, bool share_params) {
            std::shared_ptr<CompiledProgram> compiled =
                CompiledProgram::create(p.program, device, seed, std::move(trace), check_bounds);
            // A copy of each value: on cpu and interp set() binds the array it gets, which the
            // program's routines may then write, and another compile() must start from the same.
            // share_params hands over the arrays themselves (no second copy of a model's weights).
            nb::object numpy = nb::module_::import_("numpy");
            for (const auto& [name, value] : p.param_values) {
              const bool copied = !share_params && nb::isinstance(value, numpy.attr("ndarray"));
              compiled->set(name, copied ? value.attr("copy")() : value);
            }
            return compiled;
          }, "device"_a = "cpu", "seed"_a = 0, "trace"_a.none() = nb::none(), "check_bounds"_a = false,
          "share_params"_a = false,
          "Compiles every routine for `device` and links them on one stream; params start from the values "
          "set_param_value gave, the others from their initializers. `seed` seeds the random "
          "initializers and the routines' random calls. With `trace` (a kiln.ValueTrace) the routines "
          "are compiled with value tracing and every run logs what it computed into it. With "
          "`check_bounds`, a gathered subscript outside its dimension (e[t[i], j]) makes the run raise "
          "kiln.Error naming the statement, the tensor and the index, where it otherwise reads 0. With "
          "`share_params`, the params start from the arrays set_param_value gave, not from copies: on cpu "
          "and interp they are bound (a routine that writes a param writes the program's array, and a "
          "change to the array shows in the compiled program); a model's weights are then held once.");

  nb::class_<runtime::ValueTrace>(m, "ValueTrace",
                                  "Value tracing (docs/tracing.md): what traced routines computed, statement by "
                                  "statement. While open it captures the process's standard output (kernels' "
                                  "trace lines go into it, every other line still reaches stdout); one at a time.")
      .def_static("start", [] { return value_or_throw(runtime::ValueTrace::start()); },
                  "Starts capturing standard output and returns the trace (kiln.Error while another is open).")
      .def("json_lines", [](runtime::ValueTrace& t) {
            nb::gil_scoped_release no_gil;
            return value_or_throw(t.json_lines());
          }, "The trace as JSON lines: a header line, then one line per completed routine run.")
      .def("write", [](runtime::ValueTrace& t, const std::string& path) {
            nb::gil_scoped_release no_gil;
            throw_if_error(t.write_json_lines(path));
          }, "path"_a, "Writes json_lines() to `path` (read it with `kiln trace-values PATH`).")
      .def_prop_ro("run_count", &runtime::ValueTrace::run_count, "Routine runs recorded so far.")
      .def("close", [](runtime::ValueTrace& t) {
            nb::gil_scoped_release no_gil;
            throw_if_error(t.stop());
          }, "Stops capturing standard output; later runs are not recorded. Idempotent.")
      .def("__enter__", [](nb::handle self) { return self; }, "Returns the trace itself.")
      .def("__exit__", [](runtime::ValueTrace& t, nb::args) {
            nb::gil_scoped_release no_gil;
            throw_if_error(t.stop());
          }, "Closes the trace.");

  nb::class_<CompiledProgram>(m, "CompiledProgram",
                              "A program compiled and linked on one device; call it to run a routine.")
      .def("__call__", [](CompiledProgram& c, nb::args args, nb::kwargs inputs) {
            if (args.size() > 1) throw nb::type_error("call it as run(routine=\"main\", **tensors)");
            const std::string routine = args.size() == 1 ? nb::cast<std::string>(args[0]) : "main";
            return c.run(routine, inputs);
          },
          "Sets the tensors given by name (as set() does: bound or copied), runs the routine (\"main\" unless "
          "named first) to completion and returns its outputs: a dict of output name -> new NumPy array. The GIL "
          "is released while the routine runs.")
      .def("set", &CompiledProgram::set, "name"_a, "value"_a,
           "Sets an input or param to an array (NumPy, DLPack, kiln.Tensor, numbers). On cpu and interp a "
           "C-contiguous, writable array aligned to its element size becomes the tensor's array itself (routines "
           "write into it) until the tensor is set again; anything else is copied. ValueError names the tensor and "
           "what it expects for a wrong dtype or shape.")
      .def("get", &CompiledProgram::get, "name"_a, "A NumPy copy of a tensor's current value.")
      .def("tensor", &CompiledProgram::tensor, "name"_a,
           "The tensor on the device as a kiln.Tensor: a zero-copy view where the device's memory "
           "is host memory (cpu, interp).")
      .def("close", &CompiledProgram::close,
           "Waits for the program's work; later calls raise kiln.Error. Views handed out stay valid.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](CompiledProgram& c, nb::args) { c.close(); })
      .def_prop_ro("routines", &CompiledProgram::routines)
      .def_prop_ro("sizes", &CompiledProgram::sizes,
                   "The program's sizes as the inputs last bound them: name -> value (None while not bound).")
      .def_prop_ro("device", &CompiledProgram::device);

  nb::class_<Tensor>(m, "Tensor",
                     "An array kiln holds: a compiled program's tensor or an imported host array. "
                     "NumPy and DLPack see its memory without a copy where it is host memory; DLPack "
                     "exports OpenCL and CUDA memory as such (kDLOpenCL, kDLCUDA).")
      .def_prop_ro("name", &Tensor::name)
      .def_prop_ro("shape", &Tensor::shape)
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", &Tensor::device)
      .def("numpy", &Tensor::numpy,
           "A NumPy array over the same memory (a copy when the memory is a device's own).")
      .def("__array__", [](const Tensor& t, nb::args, nb::kwargs) { return t.numpy(); })
      .def("__dlpack__", &Tensor::dlpack, nb::kw_only(), "stream"_a.none() = nb::none(), "max_version"_a.none() = nb::none(),
           "dl_device"_a.none() = nb::none(), "copy"_a.none() = nb::none(),
           "The DLPack protocol (Python array API): a capsule over the tensor's memory, host or "
           "device (kDLOpenCL, kDLCUDA); a host copy of device memory for dl_device=(1, 0).")
      .def("__dlpack_device__", &Tensor::dlpack_device)
      .def("__repr__", [](const Tensor& t) {
        return "kiln.Tensor('" + t.name() + "', " + array_type_text(t.host().dtype, t.host().dims) +
               ", device='" + t.device() + "')";
      });

  m.def("from_dlpack", [](nb::handle source) { return Tensor("", import_dlpack(source), nullptr, "host"); },
        "source"_a,
        "A kiln.Tensor over another framework's host array (anything with __dlpack__, or a DLPack "
        "capsule), without a copy. BufferError for device memory (kiln's own OpenCL tensors too); "
        "ValueError for strided arrays, dtypes kiln has not (complex, float8, ...), or a capsule consumed already. "
        "A bool torch tensor and an ml_dtypes.bfloat16 NumPy array, which cannot export themselves through "
        "DLPack everywhere, are imported through a view of their memory, without a copy too.");

  bind_kernels(m);
  bind_runtime(m);
  bind_world(m);
  bind_custom_calls(m);
}
