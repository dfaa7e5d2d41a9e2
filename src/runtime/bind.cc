#include "kiln/runtime/bind.h"

#include <cstdint>

#include "kiln/ir/program.h"
#include "runtime/context_internals.h"
#include "runtime/scheduler.h"

namespace kiln::runtime {

Result<bool> bind_host(const ContextRef& context, std::string_view node, std::span<std::byte> bytes,
                       std::shared_ptr<void> keep_alive) {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  Result<std::shared_ptr<DeviceArray>> found = ContextInternals::find_array(*context, node);
  if (!found.ok()) {
    if (found.status().code() == StatusCode::kNotFound) return false;
    return found.status();
  }
  DeviceArray& array = **found;
  // Made only for an error: this runs on every bound write.
  auto where = [&] { return "binding host memory to node '" + std::string(node) + "'"; };
  if (!array.node) return invalid_argument_error(where() + ": it is internal to compiled code");
  const NodeDesc& desc = array.node->desc();
  if (desc.is_const) {
    return invalid_argument_error(where() + ": it is a const, whose value is compiled into the code that reads it");
  }
  if (bytes.size() != desc.bytes) {
    return invalid_argument_error(where() + ": it holds " + std::to_string(desc.bytes) + " bytes (" +
                                  shape_text(desc.dtype, desc.dims) + "), the memory " + std::to_string(bytes.size()));
  }
  auto* own = static_cast<std::byte*>(array.buffer->storage()->host_pointer());
  if (!own || bytes.empty()) return false;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % ir::dtype_size(desc.dtype) != 0) return false;
  // Its own memory already (a view of it handed back) needs no new buffer; either way the caller
  // may have written the memory, so it is newer than the host copy.
  if (own + array.buffer->byte_offset() != bytes.data()) {
    if (context->nodes()->overlaps_array_locked(bytes, &array)) return false;
    Result<hal::BufferRef> imported = array.home->device()->allocator().import_host(
        {}, bytes.data(), bytes.size(), [keep = std::move(keep_alive)](void*) mutable { keep.reset(); });
    if (!imported.ok()) return imported.status().annotate(where());
    replace_buffer_locked(array, std::move(*imported), true);
  }
  array.stale = false;
  array.newer = true;
  array.node->newer_on_device = *found;
  return true;
}

}  // namespace kiln::runtime
