// The element types as Python sees them: each kiln type's NumPy dtype and name, its nanobind
// (DLPack) code, and the arrays whose producers cannot say their type themselves.
//
// bf16 is `ml_dtypes.bfloat16` where the ml_dtypes package can be imported (looked up once per
// process); without it, NumPy has no bfloat16, and a bf16 tensor is exchanged with NumPy as its
// uint16 bit patterns (the form `.npy` files of bf16 also take). DLPack carries bf16 as itself
// (kDLBfloat) either way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "kiln/ir/program.h"

namespace kiln::python {

// NumPy's name of a type: "bool", "int8", ..., "float16", "bfloat16", "float32", "float64".
const char* numpy_dtype_name(ir::DType dtype);
// The type NumPy names `name` ("uint8", "bfloat16"), if any.
std::optional<ir::DType> dtype_named(std::string_view name);
// "bool, int8, uint8, ..., float64": every type by NumPy's name, for messages.
std::string numpy_dtype_list();
// How to convert an array to the type in Python, for messages: "a.astype(numpy.int32)",
// "a.astype(numpy.bool_)", "a.astype(ml_dtypes.bfloat16)" (with ml_dtypes) or
// "a.astype(ml_dtypes.bfloat16).view(numpy.uint16)" (without).
std::string astype_hint(ir::DType dtype);

// Whether ml_dtypes is importable: whether bf16 arrays are ml_dtypes.bfloat16 (else uint16).
bool have_ml_dtypes();
// The numpy.dtype arrays of `dtype` have in Python (uint16 for bf16 without ml_dtypes); kept
// for the process's life.
nanobind::handle numpy_dtype(ir::DType dtype);
// The numpy.dtype of the memory NumPy itself can describe (uint16 for bf16): what kiln makes
// arrays of before viewing them as numpy_dtype (NumPy's buffer protocol has no bfloat16).
nanobind::handle storage_dtype(ir::DType dtype);

// The type as nanobind (DLPack) codes it, and back (nullopt: no kiln type).
nanobind::dlpack::dtype nanobind_dtype(ir::DType dtype);
std::optional<ir::DType> dtype_of(nanobind::dlpack::dtype type);
// "float32", "bfloat16", "complex64", "float8_e4m3fn": a nanobind (DLPack) type by NumPy's name.
std::string nanobind_type_name(nanobind::dlpack::dtype type);

// A value as an array nanobind can read, and the kiln type its memory holds where that differs
// from what the array says. Producers that cannot describe some types themselves: an
// ml_dtypes.bfloat16 NumPy array (NumPy's DLPack export and buffer protocol refuse it) is read
// as its uint16 view, bf16; a bool NumPy array (NumPy before 1.25 exports no bool through
// DLPack) and a bool torch.Tensor (PyTorch 1.x's DLPack export refuses bool) as their uint8
// views, bool. The views share the value's memory. Anything else is itself.
struct ReadableArray {
  nanobind::object array;
  std::optional<ir::DType> dtype;  // the type of array's memory, where array says another
};
ReadableArray readable_array(nanobind::handle value);

// For a value nanobind cannot read as an array but which says it is one (a NumPy array of
// object, float8 or a string type; anything with `dtype` and `shape`): "float8_e4m3fn[2, 3]";
// nullopt for anything else.
std::optional<std::string> foreign_array_text(nanobind::handle value);

}  // namespace kiln::python
