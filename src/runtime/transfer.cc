#include "kiln/runtime/transfer.h"

#include <cstring>
#include <optional>
#include <vector>

#include "kiln/runtime/backend.h"
#include "runtime/context_internals.h"
#include "runtime/stream_state.h"
#include "runtime/transfer_internal.h"

namespace kiln::runtime {

bool point_passed(const StreamPoint& point) {
  Result<uint64_t> value = point.at.semaphore->query();
  return !value.ok() || *value >= point.at.value;
}

// Transfers of a few KiB run on the caller's thread when their waits are met and the device
// allows it (DeviceCapabilities::max_caller_stores, counted as 4-byte stores): a copy that size
// is shorter than a hand-off to the queue's thread.
static hal::Placement transfer_placement(const Stream& stream, size_t bytes) {
  const int64_t stores = stream.device()->info().capabilities.max_caller_stores;
  return stores > 0 && bytes <= uint64_t(stores) * 4 ? hal::Placement::kCallerWhenReady : hal::Placement::kQueued;
}

Result<StreamPoint> zero_locked(Stream& stream, DeviceArray& array, const std::string& label) {
  const ArrayAccess access{&array, false, true};
  const uint8_t zero = 0;
  return schedule(stream, {&access, 1}, {}, {label, "transfer"},
                  [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                    return stream.queue()->fill(w, s, array.buffer, 0, array.desc.bytes, &zero, 1,
                                                transfer_placement(stream, array.desc.bytes));
                  });
}

Result<StreamPoint> upload_locked(Stream& stream, DeviceArray& array) {
  Node& node = *array.node;
  const std::string label = "from_host " + array.desc.name;
  const ArrayAccess access{&array, false, true};
  const bool snapshot = !node.host_pending || point_passed(*node.host_pending);
  hal::SemaphoreList waits;
  // A transfer into the host copy is in flight: read the copy when the upload runs, after it.
  if (!snapshot) waits.push_back(node.host_pending->at);
  Result<StreamPoint> done =
      // Zeros nobody wrote: fill the array rather than copy (and snapshot) host pages of zeros.
      node.host_zeros ? zero_locked(stream, array, label)
                      : schedule(stream, {&access, 1}, waits, {label, "transfer"},
                                 [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                   const hal::Placement placement = transfer_placement(stream, array.desc.bytes);
                                   return snapshot ? stream.queue()->update(w, s, node.host.data(), array.buffer, 0,
                                                                            array.desc.bytes, placement)
                                                   : stream.queue()->write(w, s, node.host.data(), array.buffer, 0,
                                                                           array.desc.bytes, placement);
                                 });
  if (!done.ok()) return done.status().annotate("uploading node '" + array.desc.name + "'");
  if (!snapshot && !node.host_zeros) {
    node.host_pending = *done;
    keep_alive_until(stream, *done, array.node);
  }
  array.stale = false;
  array.newer = false;
  if (node.newer_on_device.get() == &array) node.newer_on_device.reset();
  return done;
}

Result<StreamPoint> download_locked(DeviceArray& array) {
  Node& node = *array.node;
  Stream& stream = *array.home;
  const ArrayAccess access{&array, true, false};
  hal::SemaphoreList waits;
  if (node.host_pending) waits.push_back(node.host_pending->at);  // no two writers of the copy
  Result<StreamPoint> done =
      schedule(stream, {&access, 1}, waits, {"to_host " + array.desc.name, "transfer"},
               [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                 return stream.queue()->read(w, s, array.buffer, 0, node.host.data(), array.desc.bytes,
                                             transfer_placement(stream, array.desc.bytes));
               });
  if (!done.ok()) return done.status().annotate("downloading node '" + array.desc.name + "'");
  node.host_zeros = false;
  node.host_pending = *done;
  keep_alive_until(stream, *done, array.node);
  if (array.bound) return done;  // the caller may write its memory again at any time
  array.newer = false;
  if (node.newer_on_device.get() == &array) node.newer_on_device.reset();
  return done;
}

namespace {

Result<std::shared_ptr<DeviceArray>> hosted_array(const ContextRef& context, std::string_view node) {
  KILN_RETURN_IF_ERROR(ContextInternals::check_usable(*context));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> array, ContextInternals::find_array(*context, node));
  if (!array->node) {
    return invalid_argument_error("node '" + std::string(node) +
                                  "' is internal to compiled code and has no host copy (a snapshot, or an "
                                  "intermediate in its routine's shared buffer, where others overwrite it: declare "
                                  "it output, or request @device, to see its value)");
  }
  return array;
}

// Copies src → target on dst's stream; across devices, staged through host memory: a read on
// src's home stream, then a write on dst's stream.
Result<StreamPoint> copy_between(Stream& dst, DeviceArray& src, const hal::BufferRef& target,
                                 std::vector<ArrayAccess> dst_accesses, const std::string& label) {
  const size_t bytes = src.desc.bytes;
  if (src.buffer->device_tag() == target->device_tag()) {
    dst_accesses.push_back({&src, true, false});
    return schedule(dst, dst_accesses, {}, {label, "transfer"},
                    [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                      return dst.queue()->copy(w, s, src.buffer, 0, target, 0, bytes);
                    });
  }
  auto staging = std::make_shared<std::vector<std::byte>>(bytes);
  Stream& from = *src.home;
  const ArrayAccess read{&src, true, false};
  KILN_ASSIGN_OR_RETURN(StreamPoint staged,
                        schedule(from, {&read, 1}, {}, {label + " (stage)", "transfer"},
                                 [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                   return from.queue()->read(w, s, src.buffer, 0, staging->data(), bytes);
                                 }));
  keep_alive_until(from, staged, staging);
  KILN_ASSIGN_OR_RETURN(StreamPoint done,
                        schedule(dst, dst_accesses, {staged.at}, {label, "transfer"},
                                 [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                   return dst.queue()->write(w, s, staging->data(), target, 0, bytes);
                                 }));
  keep_alive_until(dst, done, staging);
  return done;
}

// The merge buffer of `stream`, at least `bytes` long. Growing replaces it; actions already
// scheduled keep the old one alive through their commands.
Result<hal::BufferRef> merge_buffer(Stream& stream, size_t bytes) {
  StreamState& state = StreamInternals::state(stream);
  if (!state.merge_buffer || state.merge_buffer->byte_length() < bytes) {
    Result<hal::BufferRef> buffer = stream.device()->allocator().allocate({}, bytes);
    if (!buffer.ok()) {
      return buffer.status().annotate("growing the merge buffer of stream '" + stream.name() + "'");
    }
    state.merge_buffer = *buffer;
  }
  return state.merge_buffer->subspan(0, bytes);
}

}  // namespace

Result<bool> from_host(const ContextRef& context, std::string_view node) {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> array, hosted_array(context, node));
  if (!array->stale) return false;
  KILN_RETURN_IF_ERROR(upload_locked(*context->stream(), *array).status());
  return true;
}

Result<bool> to_host(const ContextRef& context, std::string_view node) {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> array, hosted_array(context, node));
  if (!array->newer) return false;
  KILN_RETURN_IF_ERROR(download_locked(*array).status());
  return true;
}

namespace {

// device_memory, or with `host_only` host_view's: UNIMPLEMENTED before anything is done where the
// memory is not of that kind.
Result<DeviceMemory> exported_memory(const ContextRef& context, std::string_view node, Timeout timeout,
                                     bool host_only) {
  std::unique_lock<std::mutex> lock(scheduling_mutex());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> array, hosted_array(context, node));
  const hal::NativeMemory::Kind kind = array->buffer->storage()->native_memory().kind;
  if (kind == hal::NativeMemory::Kind::kNone || (host_only && kind != hal::NativeMemory::Kind::kHost)) {
    return unimplemented_error("node '" + array->desc.name + "': the memory of device '" +
                               context->stream()->device()->info().name + "' is not " +
                               (host_only ? "host memory" : "memory its driver can hand out") +
                               "; read a copy of it instead");
  }
  if (array->stale) KILN_RETURN_IF_ERROR(upload_locked(*context->stream(), *array).status());
  for (;;) {
    if (array->writer) {
      Result<uint64_t> reached = array->writer->at.semaphore->query();
      if (!reached.ok()) return reached.status().annotate("viewing node '" + array->desc.name + "'");
    }
    std::optional<StreamPoint> pending;
    if (array->writer && !point_passed(*array->writer)) pending = array->writer;
    for (const StreamPoint& reader : array->readers) {
      if (!pending && !point_passed(reader)) pending = reader;
    }
    if (!pending) break;
    const hal::SemaphoreValue at = pending->at;
    lock.unlock();
    Status status = at.semaphore->wait(at.value, timeout);
    if (!status.ok()) return status.annotate("viewing node '" + array->desc.name + "'");
    lock.lock();
  }
  array->newer = true;
  array->node->newer_on_device = array;
  // The buffer as it is now (sizes or a binding may have given the array another one meanwhile),
  // kept alive by the caller's handle itself: a later change replaces the array's buffer, never
  // the memory handed out.
  hal::BufferRef buffer = array->buffer;
  DeviceMemory memory;
  memory.native = buffer->storage()->native_memory();
  memory.offset = buffer->byte_offset();
  memory.bytes = array->desc.bytes;
  memory.bound = array->bound;
  memory.keep_alive = std::make_shared<std::pair<DeviceArrayRef, hal::BufferRef>>(array, std::move(buffer));
  return memory;
}

}  // namespace

Result<DeviceMemory> device_memory(const ContextRef& context, std::string_view node, Timeout timeout) {
  return exported_memory(context, node, timeout, false);
}

Result<HostView> host_view(const ContextRef& context, std::string_view node, Timeout timeout) {
  KILN_ASSIGN_OR_RETURN(DeviceMemory memory, exported_memory(context, node, timeout, true));
  return HostView{{static_cast<std::byte*>(memory.native.host) + memory.offset, memory.bytes},
                  std::move(memory.keep_alive), memory.bound};
}

Result<bool> device_to_device(std::string_view node, MergeMode mode, const ContextRef& dst,
                              const ContextRef& src) {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_RETURN_IF_ERROR(ContextInternals::check_usable(*dst));
  KILN_RETURN_IF_ERROR(ContextInternals::check_usable(*src));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> from, ContextInternals::find_array(*src, node));
  Stream& stream = *dst->stream();
  StreamState& state = StreamInternals::state(stream);
  const std::string label = "device_to_device " + std::string(node);
  const bool same_device = from->buffer->device_tag() == stream.device()->tag();

  if (mode == MergeMode::kStreaming && same_device) {
    state.merge_node = std::string(node);
    state.merge_streaming_source = from;
    return true;
  }
  if (mode == MergeMode::kNo) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArray> to, ContextInternals::find_array(*dst, node));
    if (to == from) return false;
    if (to->desc.bytes != from->desc.bytes || to->desc.dims != from->desc.dims) {
      // Tables of a program with sizes may bind them to other values: then the shapes say so.
      return invalid_argument_error("node '" + std::string(node) + "' is " + shape_text(from->desc.dtype, from->desc.dims) +
                                    " (" + std::to_string(from->desc.bytes) + " bytes) in the source context and " +
                                    shape_text(to->desc.dtype, to->desc.dims) + " (" + std::to_string(to->desc.bytes) +
                                    " bytes) in the destination" +
                                    (from->desc.sized_dims.empty() ? std::string()
                                                                    : ": their tables bind its sizes to other values"));
    }
    KILN_ASSIGN_OR_RETURN(StreamPoint done,
                          copy_between(stream, *from, to->buffer, {{to.get(), false, true}}, label));
    to->stale = false;
    to->newer = true;
    if (to->node) to->node->newer_on_device = to;
    (void)done;
    return true;
  }
  // Into the merge buffer (kCopy, or kStreaming across devices).
  KILN_ASSIGN_OR_RETURN(hal::BufferRef target, merge_buffer(stream, from->desc.bytes));
  KILN_RETURN_IF_ERROR(copy_between(stream, *from, target, {}, label + " → merge").status());
  state.merge_node = std::string(node);
  state.merge_streaming_source.reset();
  return true;
}

}  // namespace kiln::runtime
