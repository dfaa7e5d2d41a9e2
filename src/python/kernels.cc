#include "python/kernels.h"

#include <array>
#include <cstdint>
#include <limits>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/dtypes.h"
#include "python/host_array.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// Anything numpy.dtype() takes ("float32", numpy.float32, an array's dtype) as a program dtype;
// NumPy's names of the types too ("bfloat16" without ml_dtypes, which numpy.dtype() refuses).
ir::DType dtype_of(nb::handle value, const std::string& node) {
  std::string name;
  if (nb::isinstance<nb::str>(value)) name = nb::cast<std::string>(value);
  if (!dtype_named(name)) {
    try {
      name = nb::cast<std::string>(nb::module_::import_("numpy").attr("dtype")(value).attr("name"));
    } catch (nb::python_error& error) {
      if (!error.matches(PyExc_TypeError)) throw;
      name = nb::cast<std::string>(nb::repr(value));
    }
  }
  if (std::optional<ir::DType> d = dtype_named(name)) return *d;
  throw nb::value_error(("kernel binding of '" + node + "': dtype " + name + " is none of " + numpy_dtype_list()).c_str());
}

runtime::KernelAccess access_of(const std::string& access, const std::string& node) {
  if (access == "read") return runtime::KernelAccess::kRead;
  if (access == "write") return runtime::KernelAccess::kWrite;
  if (access == "readwrite") return runtime::KernelAccess::kReadWrite;
  throw nb::value_error(("kernel binding of '" + node + "': access must be \"read\", \"write\" or \"readwrite\", not \"" +
                         access + "\"").c_str());
}

const char* access_name(runtime::KernelAccess access) {
  switch (access) {
    case runtime::KernelAccess::kRead: return "read";
    case runtime::KernelAccess::kWrite: return "write";
    case runtime::KernelAccess::kReadWrite: return "readwrite";
  }
  return "read";
}

// A count that must fit a uint32_t (a workgroup count, a push constant).
uint32_t u32(int64_t value, const std::string& what) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    throw nb::value_error((what + " " + std::to_string(value) + " is not an unsigned 32-bit value").c_str());
  }
  return static_cast<uint32_t>(value);
}

// An int n (n, 1, 1), or a sequence of one to three ints.
std::array<uint32_t, 3> workgroups_of(nb::handle value, const std::string& kernel) {
  const std::string what = "kernel '" + kernel + "': workgroup count";
  std::vector<int64_t> counts;
  if (nb::isinstance<nb::int_>(value)) {
    counts.push_back(nb::cast<int64_t>(value));
  } else {
    counts = nb::cast<std::vector<int64_t>>(value);
  }
  if (counts.empty() || counts.size() > 3) {
    throw nb::value_error((what + " has " + std::to_string(counts.size()) + " dimensions; give 1 to 3").c_str());
  }
  std::array<uint32_t, 3> out = {1, 1, 1};
  for (size_t i = 0; i < counts.size(); ++i) out[i] = u32(counts[i], what);
  return out;
}

std::string tuple_text(const std::vector<int64_t>& values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + (values.size() == 1 ? ",)" : ")");
}

}  // namespace

void bind_kernels(nb::module_& m) {
  nb::class_<hal::ExportInfo>(m, "KernelExport",
                              "A kernel the source exports: its name, how many buffers it binds and push "
                              "constants it takes, and (opencl-c) whether it is correct for any number of work "
                              "items per workgroup.")
      .def("__init__", [](hal::ExportInfo* self, const std::string& name, int64_t bindings, int64_t constants,
                          bool any_local_size) {
             new (self) hal::ExportInfo{name, u32(bindings, "export '" + name + "': binding count"),
                                        u32(constants, "export '" + name + "': constant count"), any_local_size};
           }, "name"_a, "bindings"_a, "constants"_a = 0, "any_local_size"_a = false)
      .def_ro("name", &hal::ExportInfo::name)
      .def_ro("bindings", &hal::ExportInfo::binding_count)
      .def_ro("constants", &hal::ExportInfo::constant_count)
      .def_ro("any_local_size", &hal::ExportInfo::any_local_size)
      .def("__repr__", [](const hal::ExportInfo& e) {
        return "kiln.KernelExport('" + e.name + "', bindings=" + std::to_string(e.binding_count) +
               ", constants=" + std::to_string(e.constant_count) + (e.any_local_size ? ", any_local_size=True" : "") + ")";
      });

  nb::class_<runtime::KernelBinding>(m, "KernelBinding",
                                     "A buffer a dispatch binds: the node, the dtype and shape the kernel was "
                                     "generated for (the node's), and access \"read\", \"write\" or \"readwrite\". "
                                     "With merge=True, the node's merge copy (x.merge): the merge buffer of the "
                                     "stream the routine runs on, filled by device_to_device(..., merge=\"copy\" or "
                                     "\"streaming\"); read only.")
      .def("__init__", [](runtime::KernelBinding* self, const std::string& node, nb::handle dtype,
                          std::vector<int64_t> shape, const std::string& access, bool merge) {
             new (self) runtime::KernelBinding{node, dtype_of(dtype, node), std::move(shape), access_of(access, node), merge};
           }, "node"_a, "dtype"_a, "shape"_a, "access"_a = "read", "merge"_a = false)
      .def_ro("node", &runtime::KernelBinding::node)
      .def_prop_ro("dtype", [](const runtime::KernelBinding& b) { return numpy_dtype_name(b.dtype); })
      .def_prop_ro("shape", [](const runtime::KernelBinding& b) { return nb::tuple(nb::cast(b.dims)); })
      .def_prop_ro("access", [](const runtime::KernelBinding& b) { return access_name(b.access); })
      .def_ro("merge", &runtime::KernelBinding::merge)
      .def("__repr__", [](const runtime::KernelBinding& b) {
        return "kiln.KernelBinding('" + b.node + "', '" + numpy_dtype_name(b.dtype) + "', " + tuple_text(b.dims) +
               ", access='" + access_name(b.access) + "'" + (b.merge ? ", merge=True" : "") + ")";
      });

  nb::class_<runtime::KernelDispatch>(m, "KernelDispatch",
                                      "One dispatch of an exported kernel: its bindings in the export's order, its "
                                      "workgroup count (an int, or 1 to 3 ints) and push constants (unsigned 32-bit).")
      .def("__init__", [](runtime::KernelDispatch* self, const std::string& kernel,
                          std::vector<runtime::KernelBinding> bindings, nb::handle workgroups,
                          std::vector<int64_t> constants) {
             runtime::KernelDispatch d;
             d.kernel = kernel;
             d.bindings = std::move(bindings);
             d.workgroups = workgroups_of(workgroups, kernel);
             for (size_t i = 0; i < constants.size(); ++i) {
               d.constants.push_back(u32(constants[i], "kernel '" + kernel + "': push constant " + std::to_string(i)));
             }
             new (self) runtime::KernelDispatch(std::move(d));
           }, "kernel"_a, "bindings"_a, "workgroups"_a = 1, "constants"_a = std::vector<int64_t>())
      .def_ro("kernel", &runtime::KernelDispatch::kernel)
      .def_prop_ro("bindings", [](const runtime::KernelDispatch& d) { return d.bindings; })
      .def_prop_ro("workgroups", [](const runtime::KernelDispatch& d) {
        return nb::make_tuple(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
      })
      .def_prop_ro("constants", [](const runtime::KernelDispatch& d) { return d.constants; })
      .def("__repr__", [](const runtime::KernelDispatch& d) {
        return "kiln.KernelDispatch('" + d.kernel + "', " + std::to_string(d.bindings.size()) + " bindings, workgroups=(" +
               std::to_string(d.workgroups[0]) + ", " + std::to_string(d.workgroups[1]) + ", " +
               std::to_string(d.workgroups[2]) + "))";
      });
}

runtime::KernelSet checked_kernel_set(const Program& program, std::string source, std::string format,
                                      std::string label, std::vector<hal::ExportInfo> exports,
                                      const nb::dict& routines) {
  runtime::KernelSet set;
  set.source.format = std::move(format);
  set.source.source = std::move(source);
  set.source.label = std::move(label);
  set.source.exports = std::move(exports);
  for (auto [name, dispatches] : routines) {
    runtime::KernelRoutine routine;
    if (!nb::try_cast(name, routine.name)) {
      throw nb::type_error(("routine names must be str, got " +
                            nb::cast<std::string>(nb::str(name.type().attr("__name__")))).c_str());
    }
    if (!nb::try_cast(dispatches, routine.dispatches)) {
      throw nb::type_error(("routine '" + routine.name + "': expects a list of kiln.KernelDispatch, got " +
                            nb::cast<std::string>(nb::str(dispatches.type().attr("__name__")))).c_str());
    }
    set.routines.push_back(std::move(routine));
  }
  // The runtime's checks, once here so that a wrong description is a ValueError; compile_kernels
  // checks again (cheaply) before building.
  if (Status checked = runtime::check_kernel_set(set, program.program); !checked.ok()) {
    throw nb::value_error(checked.message().c_str());
  }
  return set;
}

}  // namespace kiln::python
