#include "runtime/device_array.h"

#include <algorithm>

#include "kiln/ir/sizes.h"

namespace kiln::runtime {

void replace_buffer_locked(DeviceArray& array, hal::BufferRef buffer, bool bound) {
  array.buffer = std::move(buffer);
  array.bound = bound;
  for (const std::weak_ptr<PreparedRun>& weak : array.recorded_by) {
    if (std::shared_ptr<PreparedRun> run = weak.lock()) forget_recorded_steps_locked(*run);
  }
  array.recorded_by.clear();
}

Status unbind_locked(DeviceArray& array) {
  if (!array.bound) return Status();
  Result<hal::BufferRef> own = array.home->device()->allocator().allocate({}, array.desc.bytes);
  if (!own.ok()) return own.status().annotate("giving node '" + array.desc.name + "' memory of its own again");
  replace_buffer_locked(array, std::move(*own), false);
  array.stale = array.node != nullptr;
  array.newer = false;
  if (array.node && array.node->newer_on_device.get() == &array) array.node->newer_on_device.reset();
  return Status();
}

Status fit_to_sizes_locked(DeviceArray& array, const std::vector<int64_t>& values,
                           const std::vector<std::string>& size_names) {
  NodeDesc& desc = array.desc;
  if (desc.sized_dims.empty()) return Status();
  std::vector<int64_t> dims(desc.sized_dims.size());
  size_t bytes = ir::dtype_size(desc.dtype);
  for (size_t d = 0; d < dims.size(); ++d) {
    for (const auto& [size, coefficient] : desc.sized_dims[d].terms) {
      if (static_cast<size_t>(size) >= values.size() || values[static_cast<size_t>(size)] < 0) {
        const std::string name = static_cast<size_t>(size) < size_names.size() ? size_names[static_cast<size_t>(size)] : "?";
        return failed_precondition_error("size " + name + " of tensor '" + desc.name +
                                         "' is not bound: give an input that names it, or set it first");
      }
    }
    dims[d] = std::max<int64_t>(0, ir::evaluate(desc.sized_dims[d], values).value_or(0));
    bytes *= static_cast<size_t>(dims[d]);  // NodeTable::set_sizes bounded every tensor
  }
  if (dims == desc.dims && bytes == desc.bytes) return Status();
  // The caller's memory of a bound array holds the old shape: the array gets its own.
  if (!array.shared_whole && (array.bound || bytes > array.buffer->byte_length())) {
    KILN_ASSIGN_OR_RETURN(hal::BufferRef grown, array.home->device()->allocator().allocate({}, bytes));
    replace_buffer_locked(array, std::move(grown), false);
  }
  desc.dims = std::move(dims);
  desc.bytes = bytes;
  array.stale = array.node != nullptr;
  array.newer = false;
  return Status();
}

Result<std::vector<hal::BufferRef>> shared_views(hal::Allocator& allocator, const std::vector<ir::SharedNode>& nodes,
                                                 const std::vector<int64_t>& bytes, hal::BufferRef& whole) {
  const ir::SharedLayout layout = ir::layout_shared_buffer(nodes, bytes);
  if (!whole || whole->byte_length() < static_cast<size_t>(layout.bytes)) {
    KILN_ASSIGN_OR_RETURN(whole, allocator.allocate({}, std::max<size_t>(static_cast<size_t>(layout.bytes), 1)));
  }
  std::vector<hal::BufferRef> views;
  for (size_t i = 0; i < nodes.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(hal::BufferRef view,
                          whole->subspan(static_cast<size_t>(layout.offsets[i]), static_cast<size_t>(bytes[i])));
    views.push_back(std::move(view));
  }
  return views;
}

Status lay_out_shared_locked(std::span<DeviceArray* const> arrays, const std::vector<ir::SharedNode>& nodes) {
  if (arrays.empty()) return Status();
  std::vector<int64_t> bytes;
  for (const DeviceArray* a : arrays) bytes.push_back(static_cast<int64_t>(a->desc.bytes));
  hal::BufferRef whole = arrays.front()->shared_whole;
  KILN_ASSIGN_OR_RETURN(std::vector<hal::BufferRef> views,
                        shared_views(arrays.front()->home->device()->allocator(), nodes, bytes, whole));
  for (size_t i = 0; i < arrays.size(); ++i) {
    DeviceArray& a = *arrays[i];
    if (a.shared_whole == whole && a.buffer && a.buffer->byte_offset() == views[i]->byte_offset() &&
        a.buffer->byte_length() == views[i]->byte_length()) {
      continue;
    }
    // The old buffer lives on in work already queued (replace_buffer_locked).
    a.shared_whole = whole;
    replace_buffer_locked(a, std::move(views[i]), false);
  }
  return Status();
}

}  // namespace kiln::runtime
