#include "python/host_array.h"

#include <cstddef>
#include <new>

#include "kiln/base/host_memory.h"
#include "python/dtypes.h"

namespace kiln::python {

size_t HostArray::elements() const {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

HostArray allocate_host_array(ir::DType dtype, std::vector<int64_t> dims) {
  HostArray array;
  array.dtype = dtype;
  array.dims = std::move(dims);
  const size_t bytes = array.bytes();
  // Large arrays in huge pages, as NumPy's own: writing a 64 MiB output into 4 KiB pages took
  // 16,384 page faults, four times the kernel's time.
  void* data = allocate_host_memory(bytes, false);
  if (!data) throw std::bad_alloc();
  array.data = data;
  array.keep_alive = std::shared_ptr<void>(data, [bytes](void* p) { free_host_memory(p, bytes); });
  return array;
}

std::string array_type_text(ir::DType dtype, const std::vector<int64_t>& dims) {
  return numpy_dtype_name(dtype) + dims_text(dims);
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace kiln::python
