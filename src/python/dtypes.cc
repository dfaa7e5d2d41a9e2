#include "python/dtypes.h"

#include <cstring>
#include <iterator>
#include <memory>

#include "runtime/dlpack.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

constexpr size_t kTypeCount = std::size(ir::kAllDTypes);

// A module the process has imported already, or an invalid handle: the package never imports
// torch itself to look at a value (a value can only be a torch.Tensor once torch is imported).
nb::handle imported_module(const char* name) {
  return PyDict_GetItemString(PyImport_GetModuleDict(), name);  // borrowed
}

// Made once, with the GIL, and kept for the process's life (NumPy's and ml_dtypes' dtypes live
// as long). Not a function-local static: making one calls Python, which may hand the GIL to a
// thread that would then wait on the static's guard while holding the GIL. Two threads may both
// make one; the first to finish is kept.
template <typename T>
const T& made_once(T*& slot) {
  if (!slot) {
    auto made = std::make_unique<T>();
    if (!slot) slot = made.release();
  }
  return *slot;
}

// NumPy's dtypes of the types' memory (bf16: uint16).
struct StorageDTypes {
  PyObject* dtype[kTypeCount] = {};
  StorageDTypes() {
    nb::object numpy = nb::module_::import_("numpy");
    for (ir::DType d : ir::kAllDTypes) {
      dtype[static_cast<size_t>(d)] =
          numpy.attr("dtype")(d == ir::DType::kBF16 ? "uint16" : numpy_dtype_name(d)).release().ptr();
    }
  }
};
StorageDTypes* storage_dtypes = nullptr;

// ml_dtypes.bfloat16's numpy.dtype, or null without ml_dtypes. Imported the first time a bf16
// array is made or read, not with kiln: most programs have none.
struct Bfloat16 {
  PyObject* dtype = nullptr;
  Bfloat16() {
    try {
      nb::object type = nb::module_::import_("ml_dtypes").attr("bfloat16");
      dtype = nb::module_::import_("numpy").attr("dtype")(type).release().ptr();
    } catch (nb::python_error& error) {
      if (!error.matches(PyExc_ImportError)) throw;
      dtype = nullptr;
    }
  }
};
Bfloat16* bfloat16 = nullptr;

dlpack::DLDataType to_dlpack(nb::dlpack::dtype t) { return {t.code, t.bits, t.lanes}; }

}  // namespace

const char* numpy_dtype_name(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kBool: return "bool";
    case ir::DType::kI8: return "int8";
    case ir::DType::kU8: return "uint8";
    case ir::DType::kI16: return "int16";
    case ir::DType::kU16: return "uint16";
    case ir::DType::kI32: return "int32";
    case ir::DType::kU32: return "uint32";
    case ir::DType::kI64: return "int64";
    case ir::DType::kU64: return "uint64";
    case ir::DType::kF16: return "float16";
    case ir::DType::kBF16: return "bfloat16";
    case ir::DType::kF32: return "float32";
    case ir::DType::kF64: return "float64";
  }
  return "unknown";
}

std::optional<ir::DType> dtype_named(std::string_view name) {
  for (ir::DType d : ir::kAllDTypes) {
    if (name == numpy_dtype_name(d)) return d;
  }
  return std::nullopt;
}

std::string numpy_dtype_list() {
  std::string list;
  for (ir::DType d : ir::kAllDTypes) list += (list.empty() ? "" : ", ") + std::string(numpy_dtype_name(d));
  return list;
}

std::string astype_hint(ir::DType dtype) {
  if (dtype == ir::DType::kBool) return "a.astype(numpy.bool_)";  // numpy.bool is NumPy 2's only
  if (dtype == ir::DType::kBF16) {
    return have_ml_dtypes() ? "a.astype(ml_dtypes.bfloat16)" : "a.astype(ml_dtypes.bfloat16).view(numpy.uint16)";
  }
  return std::string("a.astype(numpy.") + numpy_dtype_name(dtype) + ")";
}

bool have_ml_dtypes() { return made_once(bfloat16).dtype != nullptr; }

nb::handle numpy_dtype(ir::DType dtype) {
  if (dtype == ir::DType::kBF16 && have_ml_dtypes()) return bfloat16->dtype;
  return storage_dtype(dtype);
}

nb::handle storage_dtype(ir::DType dtype) { return made_once(storage_dtypes).dtype[static_cast<size_t>(dtype)]; }

nb::dlpack::dtype nanobind_dtype(ir::DType dtype) {
  const dlpack::DLDataType t = dlpack::data_type(dtype);
  return {t.code, t.bits, t.lanes};
}

std::optional<ir::DType> dtype_of(nb::dlpack::dtype type) { return dlpack::dtype_of(to_dlpack(type)); }

std::string nanobind_type_name(nb::dlpack::dtype type) {
  if (std::optional<ir::DType> d = dtype_of(type)) return numpy_dtype_name(*d);
  const std::string text = dlpack::type_text(to_dlpack(type));  // "complex64 (DLPack code 5, ...)"
  return text.substr(0, text.find(" ("));
}

ReadableArray readable_array(nb::handle value) {
  const char* type_name = Py_TYPE(value.ptr())->tp_name;
  if (std::strcmp(type_name, "numpy.ndarray") == 0) {
    nb::object dtype = value.attr("dtype");
    if (dtype.equal(storage_dtype(ir::DType::kBool))) {
      return {value.attr("view")(storage_dtype(ir::DType::kU8)), ir::DType::kBool};
    }
    if (!have_ml_dtypes() || !dtype.equal(numpy_dtype(ir::DType::kBF16))) return {nb::borrow(value), std::nullopt};
    return {value.attr("view")(storage_dtype(ir::DType::kBF16)), ir::DType::kBF16};
  }
  nb::handle torch = imported_module("torch");
  if (!torch.is_valid()) return {nb::borrow(value), std::nullopt};
  const int is_tensor = PyObject_IsInstance(value.ptr(), torch.attr("Tensor").ptr());
  if (is_tensor < 0) throw nb::python_error();
  if (!is_tensor || !value.attr("dtype").equal(torch.attr("bool"))) return {nb::borrow(value), std::nullopt};
  return {value.attr("view")(torch.attr("uint8")), ir::DType::kBool};
}

std::optional<std::string> foreign_array_text(nb::handle value) {
  if (!nb::hasattr(value, "dtype") || !nb::hasattr(value, "shape")) return std::nullopt;
  try {
    nb::object dtype = value.attr("dtype");
    std::string name = nb::hasattr(dtype, "name") ? nb::cast<std::string>(nb::str(dtype.attr("name")))
                                                   : nb::cast<std::string>(nb::str(dtype));
    std::string dims = "[";
    size_t n = 0;
    for (nb::handle d : value.attr("shape")) dims += (n++ ? ", " : "") + nb::cast<std::string>(nb::str(d));
    return name + dims + "]";
  } catch (nb::python_error&) {  // not an array after all
    return std::nullopt;
  } catch (nb::cast_error&) {
    return std::nullopt;
  }
}

}  // namespace kiln::python
