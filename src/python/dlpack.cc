#include "python/dlpack.h"

#include <cstddef>
#include <iterator>
#include <string>
#include <type_traits>

#include "python/dtypes.h"
#include "runtime/dlpack.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

using namespace kiln::dlpack;

// The two capsule kinds, by the names the standard gives them.
template <typename Managed>
struct CapsuleKind;
template <>
struct CapsuleKind<DLManagedTensor> {
  static constexpr const char* kName = "dltensor";
  static constexpr const char* kUsedName = "used_dltensor";
};
template <>
struct CapsuleKind<DLManagedTensorVersioned> {
  static constexpr const char* kName = "dltensor_versioned";
  static constexpr const char* kUsedName = "used_dltensor_versioned";
};

// What an exported tensor's manager_ctx holds: the shape and what keeps the memory alive.
template <typename Managed>
struct Export {
  Managed managed{};
  std::vector<int64_t> shape;
  std::shared_ptr<void> keep_alive;

  static void destroy(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }
};

// Called when a capsule dies: frees the tensor unless a consumer took it (and renamed it).
template <typename Managed>
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, CapsuleKind<Managed>::kName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, CapsuleKind<Managed>::kName));
  if (managed && managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

void check_host_device(int32_t device_type) {
  if (device_type == kDLCPU || device_type == kDLCUDAHost) return;
  throw nb::buffer_error(("kiln.from_dlpack: the array is in " + device_text(device_type) +
                          "; kiln imports host memory only (copy it to the host first)")
                             .c_str());
}

ir::DType from_dlpack_type(DLDataType t) {
  if (std::optional<ir::DType> dtype = dlpack::dtype_of(t)) return *dtype;
  throw nb::value_error(("kiln.from_dlpack: DLPack dtype " + dlpack::type_text(t) + " is no kiln element type (" +
                         numpy_dtype_list() + ")")
                            .c_str());
}

}  // namespace

namespace {

template <typename Managed>
nb::object export_as(const HostArray& array, const Placement& where) {
  auto* e = new Export<Managed>();
  e->shape = array.dims;
  e->keep_alive = array.keep_alive;
  DLTensor& t = e->managed.dl_tensor;
  t.data = where.data;
  t.device = where.device;
  t.ndim = static_cast<int32_t>(array.dims.size());
  t.dtype = data_type(array.dtype);
  t.shape = e->shape.data();
  t.strides = nullptr;
  t.byte_offset = where.byte_offset;
  e->managed.manager_ctx = e;
  e->managed.deleter = &Export<Managed>::destroy;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    e->managed.version = {1, 0};
    e->managed.flags = array.read_only ? kDLPackFlagReadOnly : 0;
  }
  PyObject* capsule = PyCapsule_New(&e->managed, CapsuleKind<Managed>::kName, &capsule_destructor<Managed>);
  if (!capsule) {
    delete e;
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// The host array of a capsule of kind Managed, which is consumed once every check passed (on an
// error it still owns its tensor).
template <typename Managed>
HostArray import_as(nb::handle capsule) {
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule.ptr(), CapsuleKind<Managed>::kName));
  if (!managed) throw nb::python_error();
  const DLTensor& t = managed->dl_tensor;
  check_host_device(t.device.device_type);
  HostArray array;
  array.dtype = from_dlpack_type(t.dtype);
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape)) throw nb::value_error("kiln.from_dlpack: malformed DLPack shape");
  array.dims.assign(t.shape, t.shape + t.ndim);
  for (int64_t d : array.dims) {
    if (d < 0) throw nb::value_error("kiln.from_dlpack: negative DLPack dimension");
  }
  // An empty array is row-major whatever its strides say (NumPy 2 gives zeros, PyTorch ones): it
  // has no element to place.
  if (t.strides && array.elements() > 0) {
    int64_t expected = 1;
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (array.dims[i] != 1 && t.strides[i] != expected) {
        throw nb::value_error(("kiln.from_dlpack: the " + array_type_text(array.dtype, array.dims) +
                               " array is not contiguous (row-major); kiln does not import strided "
                               "memory: pass numpy.ascontiguousarray(a) or a .contiguous() copy")
                                  .c_str());
      }
      expected *= array.dims[i];
    }
  }
  if (array.elements() > 0 && !t.data) throw nb::value_error("kiln.from_dlpack: DLPack data is NULL");
  // PyTorch gives an empty tensor no memory (NULL), and NULL is how a kiln.Tensor says its array
  // is device memory: an empty array points at a place of its own, where nothing is ever read.
  alignas(std::max_align_t) static std::byte no_elements[1];
  array.data = t.data ? static_cast<char*>(t.data) + t.byte_offset : static_cast<void*>(no_elements);
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    if (managed->version.major != 1) {
      throw nb::value_error(("kiln.from_dlpack: DLPack version " + std::to_string(managed->version.major) +
                             " is not 1")
                                .c_str());
    }
    array.read_only = (managed->flags & kDLPackFlagReadOnly) != 0;
  }
  if (PyCapsule_SetName(capsule.ptr(), CapsuleKind<Managed>::kUsedName) != 0) throw nb::python_error();
  array.keep_alive = std::shared_ptr<void>(managed, [](void* p) {
    auto* m = static_cast<Managed*>(p);
    // Producers' deleters may touch Python objects; the last owner may be any thread.
    if (!m->deleter || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    m->deleter(m);
  });
  return array;
}

}  // namespace

nb::object export_dlpack(const HostArray& array, bool versioned) {
  return export_dlpack(array, versioned, Placement{{kDLCPU, 0}, array.data, 0});
}

nb::object export_dlpack(const HostArray& array, bool versioned, const Placement& where) {
  return versioned ? export_as<DLManagedTensorVersioned>(array, where) : export_as<DLManagedTensor>(array, where);
}

HostArray import_dlpack(nb::handle source) {
  // A producer that cannot export the type itself (bf16 NumPy arrays, bool torch tensors) is
  // imported through a view of its memory as another type, then named by its own.
  if (!PyCapsule_CheckExact(source.ptr())) {
    ReadableArray readable = readable_array(source);
    if (readable.dtype) {
      HostArray array = import_dlpack(readable.array);
      array.dtype = *readable.dtype;
      return array;
    }
  }
  nb::object capsule;
  if (PyCapsule_CheckExact(source.ptr())) {
    capsule = nb::borrow(source);
  } else {
    if (!nb::hasattr(source, "__dlpack__")) {
      throw nb::type_error(("kiln.from_dlpack: a " + std::string(nb::type_name(source.type()).c_str()) +
                            " has no __dlpack__ method")
                               .c_str());
    }
    if (nb::hasattr(source, "__dlpack_device__")) {
      nb::tuple device = nb::cast<nb::tuple>(source.attr("__dlpack_device__")());
      check_host_device(nb::cast<int32_t>(device[0]));
    }
    try {
      try {
        capsule = source.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
      } catch (nb::python_error& e) {
        if (!e.matches(PyExc_TypeError)) throw;  // a producer older than DLPack 1.0
        capsule = source.attr("__dlpack__")();
      }
    } catch (nb::python_error& e) {
      // A producer that cannot export its type (NumPy's float8 arrays of ml_dtypes, say): name it.
      std::optional<std::string> text = e.matches(PyExc_BufferError) ? foreign_array_text(source) : std::nullopt;
      if (!text || dtype_named(text->substr(0, text->find('[')))) throw;  // refused for another reason
      throw nb::value_error(("kiln.from_dlpack: an array of " + *text + ", which its producer cannot export (" +
                             nb::str(e.value()).c_str() + "): its dtype is no kiln element type (" +
                             numpy_dtype_list() + ")")
                                .c_str());
    }
  }
  if (PyCapsule_IsValid(capsule.ptr(), CapsuleKind<DLManagedTensor>::kUsedName) ||
      PyCapsule_IsValid(capsule.ptr(), CapsuleKind<DLManagedTensorVersioned>::kUsedName)) {
    throw nb::value_error("kiln.from_dlpack: this DLPack capsule was consumed already (a capsule "
                          "can be imported once; ask its array for a new one)");
  }
  if (PyCapsule_IsValid(capsule.ptr(), CapsuleKind<DLManagedTensor>::kName)) return import_as<DLManagedTensor>(capsule);
  if (PyCapsule_IsValid(capsule.ptr(), CapsuleKind<DLManagedTensorVersioned>::kName)) {
    return import_as<DLManagedTensorVersioned>(capsule);
  }
  const char* name = PyCapsule_CheckExact(capsule.ptr()) ? PyCapsule_GetName(capsule.ptr()) : nullptr;
  PyErr_Clear();
  throw nb::value_error(("kiln.from_dlpack: expected a DLPack capsule, got " +
                         (name ? "a capsule named \"" + std::string(name) + "\"" : std::string("another object")))
                            .c_str());
}

}  // namespace kiln::python
