#include "python/arrays.h"

#include <cstring>
#include <memory>
#include <string>

#include <nanobind/ndarray.h>

#include "kiln/base/host_memory.h"
#include "kiln/loop/op_eval.h"
#include "python/dtypes.h"
#include "python/errors.h"
#include "python/python_release.h"
#include "python/tensor.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// Whether a value of shape `dims` may be written into the tensor: its shape, or for a tensor whose
// dimensions name sizes any of its rank (the write binds the sizes and checks the rest).
bool fits(const runtime::NodeDesc& desc, const std::vector<int64_t>& dims) {
  return desc.sized_dims.empty() ? dims == desc.dims : dims.size() == desc.dims.size();
}

// Whether memory of type `got` is taken for a tensor of `want`: the same type, or for bf16 uint16
// bit patterns (as .npy files of bf16 are: nothing is converted, the bits are the values).
bool takes(ir::DType want, std::optional<ir::DType> got) {
  return got == want || (want == ir::DType::kBF16 && got == ir::DType::kU16);
}

// A Python number or list (or tuple) as a NumPy array of the memory of `dtype`, or nullopt where
// it is no value of an integer (or bool) type: a number out of its range or not whole. Floats
// round: f16 and bf16 by kiln's own rule (to nearest even, overflowing to infinity, as a cast to
// them does), bf16 into uint16 bits, with or without ml_dtypes.
std::optional<nb::object> converted_array(ir::DType dtype, nb::handle value) {
  nb::object numpy = nb::module_::import_("numpy");
  if (ir::is_narrow_float(dtype)) {
    nb::object values = numpy.attr("ascontiguousarray")(value, "float64");
    nb::object bits = numpy.attr("empty")(values.attr("shape"), "uint16");
    auto in = nb::cast<nb::ndarray<const double, nb::c_contig>>(values);
    auto out = nb::cast<nb::ndarray<uint16_t, nb::c_contig>>(bits);
    const bool f16 = dtype == ir::DType::kF16;
    for (size_t i = 0; i < in.size(); ++i) out.data()[i] = f16 ? ir::f16_bits(in.data()[i]) : ir::bf16_bits(in.data()[i]);
    return bits.attr("view")(storage_dtype(dtype));
  }
  if (ir::is_float_type(dtype)) return numpy.attr("asarray")(value, storage_dtype(dtype));
  // The numbers as Python has them (exact, however large), converted (OverflowError where NumPy
  // sees it is out of range; NumPy 1.x wraps some), which must not change them.
  nb::object exact = numpy.attr("asarray")(value, nb::arg("dtype") = "object");
  nb::object converted = exact.attr("astype")(storage_dtype(dtype));
  if (!nb::cast<bool>(numpy.attr("array_equal")(exact, converted))) return std::nullopt;
  return converted;
}

// Copies the elements of a strided array into `out` in row-major order.
void gather(const std::byte* base, const int64_t* strides, const std::vector<int64_t>& dims,
            size_t item, std::byte* out) {
  const size_t rank = dims.size();
  std::vector<int64_t> index(rank, 0);
  size_t count = 1;
  for (int64_t d : dims) count *= static_cast<size_t>(d);
  for (size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) offset += index[i] * strides[i];
    std::memcpy(out + n * item, base + offset * static_cast<int64_t>(item), item);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < dims[i]) break;
      index[i] = 0;
    }
  }
}

// A torch.Tensor that requires grad is refused: kiln's routines would write its memory without
// bumping the tensor's version counter, so a later backward() would compute with the new values
// and return a wrong gradient, silently. Only torch tensors pay for the check (torch is looked
// up among the modules already imported, never imported here).
void refuse_tensor_requiring_grad(const runtime::NodeDesc& desc, nb::handle value) {
  if (std::strcmp(Py_TYPE(value.ptr())->tp_name, "numpy.ndarray") == 0) return;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (!torch) return;
  nb::object tensor_type = nb::borrow(torch).attr("Tensor");
  const int is_tensor = PyObject_IsInstance(value.ptr(), tensor_type.ptr());
  if (is_tensor < 0) throw nb::python_error();
  if (!is_tensor || !nb::cast<bool>(value.attr("requires_grad"))) return;
  throw nb::value_error(("tensor '" + desc.name +
                         "': the torch tensor requires grad, and kiln would read and write its memory "
                         "without autograd knowing (a later backward() would be wrong); detach() it: pass "
                         "t.detach(), or t.detach().clone() to keep t as it is")
                            .c_str());
}

nb::capsule owner_of(std::shared_ptr<void> keep_alive) {
  return nb::capsule(new std::shared_ptr<void>(std::move(keep_alive)),
                     [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
}

}  // namespace

void InputBytes::mismatch(const runtime::NodeDesc& desc, const std::string& got,
                          std::optional<ir::DType> got_dtype) const {
  std::string message = "tensor '" + desc.name + "': expects " + numpy_dtype_name(desc.dtype) +
                        table_.declared_dims_text(desc) + ", got " + got;
  if (got_dtype && !takes(desc.dtype, got_dtype)) message += "; convert it: " + astype_hint(desc.dtype);
  throw nb::value_error(message.c_str());
}

InputBytes::InputBytes(const runtime::NodeDesc& desc, nb::handle value, const runtime::NodeTable& table)
    : table_(table) {
  if (nb::isinstance<Tensor>(value)) {
    const Tensor& tensor = nb::cast<const Tensor&>(value);
    if (!tensor.host().data) {  // device memory: through its host copy (a copy: not bound)
      take(desc, tensor.numpy(), true);
      return;
    }
    const HostArray& a = tensor.host();
    if (!takes(desc.dtype, a.dtype) || !fits(desc, a.dims)) {
      mismatch(desc, "kiln.Tensor " + array_type_text(a.dtype, a.dims), a.dtype);
    }
    keep_ = nb::borrow(value);
    bytes_ = {static_cast<const std::byte*>(a.data), a.bytes()};
    dims_ = a.dims;
    bindable_ = !a.read_only;  // the Tensor (kept in keep_) holds the memory
    return;
  }
  take(desc, value, false);
}

std::span<std::byte> InputBytes::memory() const {
  // A bindable value is writable memory of the caller's (bindable()).
  return {const_cast<std::byte*>(bytes_.data()), bytes_.size()};
}

std::shared_ptr<void> InputBytes::keep_alive() const {
  struct Held {
    nb::object value;
    nb::ndarray<> array;
  };
  return released_by_python(std::make_shared<Held>(Held{keep_, writable_}));
}

void InputBytes::take(const runtime::NodeDesc& desc, nb::handle value, bool converted) {
  if (!converted) refuse_tensor_requiring_grad(desc, value);
  nb::ndarray<nb::ro> array;
  bool writable = false;
  // Writable first: an array kiln may bind (NanoBind refuses read-only memory for it).
  auto import = [&](nb::handle v) {
    writable = !converted && nb::try_cast(v, writable_, false);
    if (writable) {
      array = nb::ndarray<nb::ro>(writable_);
      return true;
    }
    return nb::try_cast(v, array, false);
  };
  // The type of the array's memory where the array says another (readable_array: bf16 NumPy
  // arrays, bool torch tensors).
  std::optional<ir::DType> memory_type;
  if (!import(value)) {
    ReadableArray readable = readable_array(value);
    if (readable.dtype && import(readable.array)) {
      memory_type = readable.dtype;
    } else {
      const bool plain = PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) ||
                         PyBool_Check(value.ptr()) || PyList_Check(value.ptr()) ||
                         PyTuple_Check(value.ptr());
      if (!plain || converted) {
        // An array of a type nanobind has no code for (object, float8, strings) is an array all
        // the same: a wrong dtype, named.
        if (std::optional<std::string> text = foreign_array_text(value)) mismatch(desc, *text, std::nullopt);
        throw nb::type_error(("tensor '" + desc.name + "': expects an array of " +
                              numpy_dtype_name(desc.dtype) + table_.declared_dims_text(desc) + ", got a " +
                              nb::type_name(value.type()).c_str())
                                 .c_str());
      }
      std::optional<nb::object> array_of_value;
      std::string why;
      try {
        array_of_value = converted_array(desc.dtype, value);
      } catch (nb::python_error& error) {  // NumPy's OverflowError for 256 into uint8, NaN into int32
        if (!error.matches(PyExc_OverflowError) && !error.matches(PyExc_ValueError)) throw;
        why = std::string(": ") + nb::str(error.value()).c_str();
      }
      if (!array_of_value) {
        throw nb::value_error(("tensor '" + desc.name + "': the value is no " + numpy_dtype_name(desc.dtype) +
                               " value (a number out of its range or not whole: kiln converts numbers to an "
                               "integer type only exactly)" + why)
                                  .c_str());
      }
      take(desc, *array_of_value, true);
      return;
    }
  }
  if (array.device_type() != nb::device::cpu::value) {
    throw nb::value_error(("tensor '" + desc.name + "': the array is not in host memory (DLPack device type " +
                           std::to_string(array.device_type()) + "); copy it to the host first")
                              .c_str());
  }
  std::vector<int64_t> dims(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) dims[i] = static_cast<int64_t>(array.shape(i));
  const std::optional<ir::DType> got = memory_type ? memory_type : dtype_of(array.dtype());
  if (!takes(desc.dtype, got) || !fits(desc, dims)) {
    mismatch(desc, (got ? numpy_dtype_name(*got) : nanobind_type_name(array.dtype())) + dims_text(dims), got);
  }
  keep_ = nb::borrow(value);
  const size_t item = ir::dtype_size(desc.dtype);
  size_t bytes = item;
  for (int64_t d : dims) bytes *= static_cast<size_t>(d);
  dims_ = dims;
  bool contiguous = true;
  int64_t expected = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && array.stride(i) != expected) contiguous = false;
    expected *= dims[i];
  }
  const auto* base = static_cast<const std::byte*>(array.data());
  if (contiguous) {
    bytes_ = {base, bytes};
    bindable_ = writable;
    return;
  }
  writable_ = {};
  gathered_.resize(bytes);
  gather(base, array.stride_ptr(), dims, item, gathered_.data());
  bytes_ = gathered_;
}

void write_value(const runtime::HostTensor& tensor, nb::handle value, const runtime::NodeTable& table) {
  InputBytes bytes(tensor.desc(), value, table);
  // A write waits for the transfers that still use the host copy, which may wait for a custom
  // call written in Python: without the GIL.
  const bool sized = !tensor.desc().sized_dims.empty();
  Status status;
  {
    nb::gil_scoped_release no_gil;
    status = sized ? tensor.write(bytes.bytes(), bytes.dims()) : tensor.write(bytes.bytes());
  }
  // A shape that does not fit the sizes is the value's fault; a const refused is kiln's rule.
  if (sized && status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
  throw_if_error(status);
}

nb::dict sizes_dict(const runtime::NodeTable& table) {
  nb::dict sizes;
  const std::vector<std::string> names = table.size_names();
  const std::vector<int64_t> values = table.size_values();
  for (size_t s = 0; s < names.size(); ++s) {
    sizes[names[s].c_str()] = values[s] < 0 ? nb::none() : nb::cast(values[s]);
  }
  return sizes;
}

nb::object numpy_view(const HostArray& array) { return numpy_view(array, owner_of(array.keep_alive)); }

namespace {

// `array` (of the memory's NumPy type) as the type's NumPy dtype: ml_dtypes.bfloat16 for bf16
// where ml_dtypes is installed (NumPy makes and exports no such memory itself; a view is free).
nb::object shown_as(nb::object array, ir::DType dtype) {
  if (dtype != ir::DType::kBF16 || !have_ml_dtypes()) return array;
  return array.attr("view")(numpy_dtype(dtype));
}

}  // namespace

nb::object numpy_view(const HostArray& array, nb::handle owner) {
  std::vector<size_t> shape(array.dims.begin(), array.dims.end());
  // The memory's type: bf16 as uint16 (nanobind makes NumPy arrays through the buffer protocol).
  const nb::dlpack::dtype memory = nanobind_dtype(array.dtype == ir::DType::kBF16 ? ir::DType::kU16 : array.dtype);
  if (array.read_only) {
    nb::ndarray<nb::numpy, nb::ro> view(array.data, shape.size(), shape.data(), owner, nullptr, memory);
    return shown_as(view.cast(nb::rv_policy::reference), array.dtype);
  }
  nb::ndarray<nb::numpy> view(array.data, shape.size(), shape.data(), owner, nullptr, memory);
  return shown_as(view.cast(nb::rv_policy::reference), array.dtype);
}

nb::object new_numpy(const runtime::NodeDesc& desc, void** data) {
  const ir::DType dtype = desc.dtype;
  const std::vector<int64_t>& dims = desc.dims;
  if (desc.bytes >= kHugePageMinimum) {  // huge pages of kiln's own (allocate_host_array)
    HostArray array;
    try {
      array = allocate_host_array(dtype, dims);
    } catch (const std::bad_alloc&) {
      throw_if_error(resource_exhausted_error("tensor '" + desc.name + "': an array of " + std::to_string(desc.bytes) +
                                              " bytes (" + array_type_text(dtype, dims) + ") cannot be allocated"));
    }
    *data = array.data;
    return numpy_view(array);
  }
  // Smaller ones are NumPy's own: wrapping memory of kiln's costs NumPy a pass through the
  // buffer protocol and its format string, a third of a tiny routine's added cost in Python.
  // numpy.empty and the dtypes are looked up once and kept for the process's life.
  static PyObject* empty = nb::object(nb::module_::import_("numpy").attr("empty")).release().ptr();
  PyObject* type = storage_dtype(dtype).ptr();
  nb::object shape = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(dims.size())));
  if (!shape) throw nb::python_error();
  for (size_t i = 0; i < dims.size(); ++i) {
    PyObject* d = PyLong_FromLongLong(dims[i]);
    if (!d) throw nb::python_error();
    PyTuple_SET_ITEM(shape.ptr(), static_cast<Py_ssize_t>(i), d);
  }
  PyObject* args[] = {shape.ptr(), type};
  nb::object array = nb::steal(PyObject_Vectorcall(empty, args, 2, nullptr));
  if (!array) throw nb::python_error();
  Py_buffer view;
  if (PyObject_GetBuffer(array.ptr(), &view, PyBUF_WRITABLE) != 0) throw nb::python_error();
  *data = view.buf;  // the array owns its memory: valid while it lives
  PyBuffer_Release(&view);
  return shown_as(std::move(array), dtype);
}

}  // namespace kiln::python
