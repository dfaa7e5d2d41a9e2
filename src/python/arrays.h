// Between Python values and a tensor's bytes: what the Python package accepts for a tensor (and
// the errors it raises), and the NumPy arrays it returns.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "kiln/runtime/node_table.h"
#include "python/host_array.h"

namespace kiln::python {

// The row-major bytes of `value` for tensor `desc`. `value` may be a NumPy array (or any host
// array NanoBind reads: DLPack, the buffer protocol), a kiln.Tensor, or Python numbers and
// lists (converted to the tensor's dtype). ValueError naming the tensor and what it expects for
// another dtype or shape (the shape as declared in `table`'s program: "int32[B, T]"); a
// non-contiguous array is copied in row-major order, never misread. A torch.Tensor that requires
// grad is a ValueError (detach() it): kiln would change its memory behind autograd's back.
class InputBytes {
 public:
  InputBytes(const runtime::NodeDesc& desc, nanobind::handle value, const runtime::NodeTable& table);
  std::span<const std::byte> bytes() const { return bytes_; }
  // The value's shape: the tensor's, or for a tensor whose dimensions name sizes (language
  // version 2) any shape of its rank (HostTensor::write checks it and binds the sizes).
  const std::vector<int64_t>& dims() const { return dims_; }
  // Whether the value is the caller's own writable host array, row-major, that kiln may bind as
  // the tensor's array (runtime::bind_host decides the rest: alignment, overlaps, the device):
  // not a copy kiln made (a strided array gathered, a list converted, a device tensor read back).
  bool bindable() const { return bindable_; }
  // The value's memory and what keeps it alive for the runtime (released by Python: see
  // python_release.h). Only for a bindable value.
  std::span<std::byte> memory() const;
  std::shared_ptr<void> keep_alive() const;

 private:
  void take(const runtime::NodeDesc& desc, nanobind::handle value, bool converted);
  [[noreturn]] void mismatch(const runtime::NodeDesc& desc, const std::string& got,
                             std::optional<ir::DType> got_dtype) const;
  const runtime::NodeTable& table_;
  std::span<const std::byte> bytes_;
  std::vector<std::byte> gathered_;  // a strided array's elements in row-major order
  std::vector<int64_t> dims_;
  nanobind::object keep_;            // what bytes_ points into
  nanobind::ndarray<> writable_;     // the imported array, when bindable
  bool bindable_ = false;
};

// `value` (an array, a kiln.Tensor, a number or a list) into `tensor`'s host copy: its sizes
// bound by the value's shape where the tensor's dimensions name sizes. ValueError naming the
// tensor for a wrong dtype or shape (a size that disagrees included), kiln.Error otherwise.
void write_value(const runtime::HostTensor& tensor, nanobind::handle value, const runtime::NodeTable& table);
// The sizes of a table as a dict: name → value, or None while not bound.
nanobind::dict sizes_dict(const runtime::NodeTable& table);

// A NumPy array over `array`'s memory (no copy); it keeps array.keep_alive.
nanobind::object numpy_view(const HostArray& array);
// The same, keeping `owner` instead (array.keep_alive is not used).
nanobind::object numpy_view(const HostArray& array, nanobind::handle owner);
// A new NumPy array of a tensor's dtype and shape (uninitialized) and the address of its data.
nanobind::object new_numpy(const runtime::NodeDesc& desc, void** data);

}  // namespace kiln::python
