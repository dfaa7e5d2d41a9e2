#include "python/tensor.h"

#include <cstring>

#include "python/arrays.h"
#include "python/compiled_program.h"
#include "python/dlpack.h"

namespace nb = nanobind;

namespace kiln::python {

nb::tuple Tensor::shape() const {
  nb::list dims;
  for (int64_t d : host_.dims) dims.append(d);
  return nb::tuple(dims);
}

nb::object Tensor::dtype() const {
  return nb::module_::import_("numpy").attr("dtype")(numpy_dtype_name(host_.dtype));
}

nb::object Tensor::numpy() const {
  if (host_.data) return numpy_view(host_);
  return program_->get(name_);
}

nb::object Tensor::dlpack(bool versioned, bool copy) const {
  if (!host_.data) {
    throw nb::buffer_error(("tensor '" + name_ + "' is in the device memory of '" + device_ +
                            "', which the host cannot address; use .numpy() for a host copy")
                               .c_str());
  }
  if (!copy) return export_dlpack(host_, versioned);
  HostArray copied = allocate_host_array(host_.dtype, host_.dims);
  std::memcpy(copied.data, host_.data, host_.bytes());
  return export_dlpack(copied, versioned);
}

nb::tuple Tensor::dlpack_device() const {
  if (!host_.data) {
    throw nb::buffer_error(("tensor '" + name_ + "' is not in host memory").c_str());
  }
  return nb::make_tuple(kDLPackCpu, 0);
}

}  // namespace kiln::python
