// HostArray: an array in host memory as the Python package hands it around (a kiln tensor's
// view, an imported DLPack tensor). Its types' names and codes are python/dtypes.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::python {

struct HostArray {
  void* data = nullptr;  // row-major, dense
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> dims;
  std::shared_ptr<void> keep_alive;  // the memory lives while this does
  bool read_only = false;

  size_t elements() const;
  size_t bytes() const { return elements() * ir::dtype_size(dtype); }
};

// A new, uninitialized host array of `dtype` and `dims` that owns its memory.
HostArray allocate_host_array(ir::DType dtype, std::vector<int64_t> dims);

// "[4, 10]" ("[]" for a scalar).
std::string dims_text(const std::vector<int64_t>& dims);
// "float32[4, 10]": what a tensor expects, in NumPy's words.
std::string array_type_text(ir::DType dtype, const std::vector<int64_t>& dims);

}  // namespace kiln::python
