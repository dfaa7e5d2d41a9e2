#include "kiln/runtime/node_table.h"

#include <cstring>

#include "kiln/ir/sizes.h"
#include "runtime/initial_value.h"
#include "runtime/scheduler.h"
#include "runtime/transfer_internal.h"

namespace kiln::runtime {

std::string_view hosted_kind_name(HostedKind kind) {
  switch (kind) {
    case HostedKind::kConstant: return "constant";
    case HostedKind::kChangedOnDevices: return "changed on devices";
    case HostedKind::kVolatile: return "volatile";
  }
  return "?";
}

std::string_view sharing_name(Sharing sharing) {
  return sharing == Sharing::kShared ? "shared across streams" : "per stream";
}

std::string shape_text(ir::DType dtype, const std::vector<int64_t>& dims) {
  std::string text(ir::dtype_name(dtype));
  text += "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

Result<std::shared_ptr<NodeTable>> NodeTable::create(const ir::Program& program, uint64_t seed) {
  KILN_RETURN_IF_ERROR(ir::validate_program(program));
  std::vector<bool> written(program.nodes.size(), false);
  for (const ir::Routine& r : program.routines) {
    for (const ir::Assignment& a : r.statements) written[a.target] = true;
    for (const ir::Call& c : r.calls) {
      for (int out : c.outputs) written[out] = true;
    }
  }
  std::shared_ptr<NodeTable> table(new NodeTable());
  table->seed_ = seed;
  table->sizes_ = program.sizes;
  table->size_values_.assign(program.sizes.size(), -1);
  table->size_set_run_.assign(program.sizes.size(), 0);
  for (const ir::TensorNode& declared : program.nodes) {
    // A sized node starts at its shape with every size 0 (not bound yet).
    ir::TensorNode n = declared;
    for (size_t d = 0; d < n.sized_dims.size(); ++d) {
      n.dims[d] = std::max<int64_t>(0, ir::evaluate(n.sized_dims[d], std::vector<int64_t>(program.sizes.size(), 0)).value_or(0));
    }
    NodeDesc desc = shape_desc(n);
    desc.written_by_routines = written[n.id];
    desc.is_const = n.role == ir::Role::kConst;
    desc.hosted = n.role == ir::Role::kConst   ? HostedKind::kConstant
                  : n.role == ir::Role::kInput ? HostedKind::kVolatile
                                               : HostedKind::kChangedOnDevices;
    const bool read_only = !desc.written_by_routines &&
                           (desc.hosted == HostedKind::kConstant || n.role == ir::Role::kParam);
    desc.sharing = read_only ? Sharing::kShared : Sharing::kPerStream;
    auto node = std::make_shared<Node>(std::move(desc));
    KILN_RETURN_IF_ERROR(fill_initial_value(n, seed, node->host, /*zeros_reserved=*/true));
    node->host_zeros = initial_value_is_zero(n);
    table->nodes_.emplace(n.name, std::move(node));
  }
  return table;
}

NodeDesc shape_desc(const ir::TensorNode& n) {
  NodeDesc desc;
  desc.name = n.name;
  desc.dtype = n.dtype;
  desc.dims = n.dims;
  desc.sized_dims = n.sized_dims;
  desc.bytes = static_cast<size_t>(n.byte_size());
  return desc;
}

NodeTable::~NodeTable() {
  // Without the scheduling mutex: the last reference to a table may go while it is held (a
  // context released there), and once the table is gone nothing reaches its nodes' newest
  // arrays (every context holds its table).
  for (auto& [name, node] : nodes_) node->newer_on_device.reset();
}

Result<std::shared_ptr<Node>> NodeTable::find(std::string_view name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return not_found_error("the node table has no node named '" + std::string(name) + "'");
  }
  return it->second;
}

Result<HostTensor> NodeTable::tensor(std::string_view name) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, find(name));
  return HostTensor(shared_from_this(), std::move(node));
}

std::vector<std::string> NodeTable::names() const {
  std::vector<std::string> names;
  for (const auto& [name, node] : nodes_) names.push_back(name);
  return names;
}

namespace {

Status check_no_arrays(const Node& node, const char* what) {
  for (const auto& weak : node.arrays) {
    std::shared_ptr<DeviceArray> a = weak.lock();
    // The newest value kept after its context went (Node::newer_on_device), held by nothing
    // else, is no context's array: modes only decide where contexts' arrays live.
    const bool kept_value_only = a && a == node.newer_on_device && a.use_count() == 2;
    if (a && !kept_value_only) {
      return failed_precondition_error("cannot change the " + std::string(what) + " of node '" +
                                       node.desc().name +
                                       "': it already has a device array (change it before linking)");
    }
  }
  return Status();
}

// A bool element is one byte, 0 or 1 (what every device's loads and stores assume): other bytes
// are refused, naming the tensor and the element.
Status check_bool_data(const NodeDesc& desc, std::span<const std::byte> data) {
  if (desc.dtype != ir::DType::kBool) return Status();
  for (size_t i = 0; i < data.size(); ++i) {
    if (static_cast<unsigned>(data[i]) > 1) {
      return invalid_argument_error("tensor '" + desc.name + "' is bool, but element " + std::to_string(i) +
                                    " of the data is " + std::to_string(static_cast<unsigned>(data[i])) +
                                    "; a bool is 0 (false) or 1 (true)");
    }
  }
  return Status();
}

}  // namespace

Status NodeTable::set_hosted_kind(std::string_view name, HostedKind kind) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, find(name));
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_RETURN_IF_ERROR(check_no_arrays(*node, "hosted kind"));
  if (kind == HostedKind::kConstant && node->desc().written_by_routines) {
    return invalid_argument_error("node '" + node->desc().name +
                                  "' cannot be a hosted constant: a routine writes it");
  }
  node->desc_.hosted = kind;
  return Status();
}

Status NodeTable::set_sharing(std::string_view name, Sharing sharing) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, find(name));
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_RETURN_IF_ERROR(check_no_arrays(*node, "sharing"));
  node->desc_.sharing = sharing;
  return Status();
}

std::vector<std::string> NodeTable::size_names() const {
  std::vector<std::string> names;
  for (const ir::SizeDecl& s : sizes_) names.push_back(s.name);
  return names;
}

std::vector<int64_t> NodeTable::size_values() const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return size_values_;
}

void NodeTable::note_run() { ++runs_; }

bool NodeTable::overlaps_array_locked(std::span<const std::byte> bytes, const DeviceArray* except) const {
  // Addresses compared as integers: the ranges belong to unrelated allocations.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t end = begin + bytes.size();
  for (const auto& [name, node] : nodes_) {
    for (const std::weak_ptr<DeviceArray>& weak : node->arrays) {
      std::shared_ptr<DeviceArray> array = weak.lock();
      if (!array || array.get() == except) continue;
      const auto* base = static_cast<const std::byte*>(array->buffer->storage()->host_pointer());
      if (!base) continue;
      const uintptr_t start = reinterpret_cast<uintptr_t>(base + array->buffer->byte_offset());
      if (start < end && begin < start + array->buffer->byte_length()) return true;
    }
  }
  return false;
}

std::string NodeTable::declared_dims_text(const NodeDesc& desc) const {
  std::string text = "[";
  for (size_t d = 0; d < desc.dims.size(); ++d) {
    text += d ? ", " : "";
    text += d < desc.sized_dims.size() ? ir::size_expr_text(desc.sized_dims[d], sizes_) : std::to_string(desc.dims[d]);
  }
  return text + "]";
}

Result<size_t> NodeTable::size_number(std::string_view name) const {
  for (size_t s = 0; s < sizes_.size(); ++s) {
    if (sizes_[s].name == name) return s;
  }
  std::string list;
  for (const ir::SizeDecl& s : sizes_) list += (list.empty() ? "" : ", ") + s.name;
  return not_found_error("size '" + std::string(name) + "': the program declares no such size" +
                         (list.empty() ? std::string(" (it declares none)") : " (its sizes: " + list + ")"));
}

Status NodeTable::set_sizes(const std::map<std::string, int64_t, std::less<>>& values) {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  std::vector<int64_t> bound = size_values_;
  for (const auto& entry : values) {
    const std::string& name = entry.first;
    const int64_t value = entry.second;
    KILN_ASSIGN_OR_RETURN(const size_t s, size_number(name));
    if (value < 0) return invalid_argument_error("size " + name + " = " + std::to_string(value) + ": a size is 0 or more");
    bound[s] = value;
  }
  KILN_RETURN_IF_ERROR(set_sizes_locked(bound));
  for (const auto& [name, value] : values) {
    for (size_t s = 0; s < sizes_.size(); ++s) {
      if (sizes_[s].name == name) size_set_run_[s] = runs_ + 1;
    }
  }
  return Status();
}

Status NodeTable::set_sizes_locked(const std::vector<int64_t>& values) {
  if (values == size_values_) return Status();
  for (size_t s = 0; s < values.size(); ++s) {
    if (values[s] > ir::kMaxSizeValue) {
      return invalid_argument_error("size " + sizes_[s].name + " = " + std::to_string(values[s]) +
                                    ": more than kiln's limit of 2^40");
    }
  }
  // Every new shape first, so that an error changes nothing.
  std::vector<int64_t> zeros(values.size());
  for (size_t s = 0; s < values.size(); ++s) zeros[s] = std::max<int64_t>(values[s], 0);
  struct Reshaped {
    Node* node;
    std::vector<int64_t> dims;
    size_t bytes;
    std::optional<HostBytes> grown;  // a new host copy, where the old one's memory is too small
  };
  std::vector<Reshaped> reshaped;
  for (const auto& [name, node] : nodes_) {
    const NodeDesc& desc = node->desc();
    if (desc.sized_dims.empty()) continue;
    std::vector<int64_t> dims(desc.sized_dims.size());
    int64_t bytes = static_cast<int64_t>(ir::dtype_size(desc.dtype));
    for (size_t d = 0; d < dims.size(); ++d) {
      std::optional<int64_t> v = ir::evaluate(desc.sized_dims[d], zeros);
      if (!v || *v < 0 || (*v > 0 && bytes > ir::kMaxTensorBytes / *v)) {
        return invalid_argument_error("tensor '" + name + "' would be " +
                                      (v && *v < 0 ? "of negative size " + std::to_string(*v) + " in dimension " + std::to_string(d)
                                                   : std::string("larger than kiln's limit of 2^62 bytes")) +
                                      " at these sizes");
      }
      dims[d] = *v;
      bytes *= *v;
    }
    if (dims == desc.dims) continue;
    Reshaped& r = reshaped.emplace_back(Reshaped{node.get(), std::move(dims), static_cast<size_t>(bytes), std::nullopt});
    // Allocated here, before anything changes: a shape the host cannot hold is an error that
    // names the tensor, and leaves every tensor as it was.
    const bool pending = node->host_pending && !point_passed(*node->host_pending);
    if (pending || r.bytes > node->host.capacity()) {
      try {
        // Not zeroed: host_zeros stands for its zeros until it is written.
        r.grown.emplace(r.bytes, HostMemoryAllocator<std::byte>(false));
      } catch (const std::bad_alloc&) {
        return resource_exhausted_error("tensor '" + name + "': its host copy of " + std::to_string(r.bytes) +
                                        " bytes (" + shape_text(desc.dtype, r.dims) +
                                        ") cannot be allocated at these sizes");
      }
    }
  }
  size_values_ = values;
  ++size_generation_;
  for (Reshaped& r : reshaped) {
    Node* node = r.node;
    node->desc_.dims = std::move(r.dims);
    node->desc_.bytes = r.bytes;
    // A device action may still be writing the old host copy (a download): it keeps the old bytes.
    if (node->host_pending && !point_passed(*node->host_pending)) {
      retired_host_copies_.push_back({std::move(node->host), *node->host_pending});
    }
    // The copy's memory is kept where it holds the new shape (resizing within it writes
    // nothing): host_zeros makes it read as zeros until written (HostTensor::read, uploads).
    if (r.grown) {
      node->host = std::move(*r.grown);
    } else {
      node->host.resize(node->desc_.bytes);
    }
    node->host_zeros = true;
    node->host_pending.reset();
    // What a device wrote at the old shape is gone; its arrays take the new one when next used.
    node->newer_on_device.reset();
  }
  std::erase_if(retired_host_copies_, [](const RetiredHostCopy& r) { return point_passed(r.until); });
  return Status();
}

void NodeTable::set_automatic_transfers(bool on) { automatic_ = on; }

bool NodeTable::automatic_transfers() const { return automatic_; }

Status HostTensor::read(std::span<std::byte> out, Timeout timeout) const {
  if (out.size() != desc().bytes) {
    return invalid_argument_error("node '" + desc().name + "' holds " + std::to_string(desc().bytes) +
                                  " bytes, asked for " + std::to_string(out.size()));
  }
  // The arrays downloaded, kept until the downloads are waited for and the lock released: one
  // may be all that holds its stream (its context and backend gone), whose queue must not go
  // while the download runs, nor under the scheduling mutex.
  std::vector<std::shared_ptr<DeviceArray>> downloaded;
  std::unique_lock<std::mutex> lock(scheduling_mutex());
  const DeviceArray* downloaded_bound = nullptr;  // a bound array stays newer: fetched once
  for (;;) {
    if (table_->automatic_) {
      std::shared_ptr<DeviceArray> newer = node_->newer_on_device;
      if (newer && newer.get() != downloaded_bound) {
        KILN_RETURN_IF_ERROR(download_locked(*newer).status());
        if (newer->bound) downloaded_bound = newer.get();
        downloaded.push_back(std::move(newer));
      }
    }
    if (!node_->host_pending) break;
    const hal::SemaphoreValue pending = node_->host_pending->at;
    // A failed download (its writer failed) leaves the host copy stale: say so, never return it.
    Result<uint64_t> reached = pending.semaphore->query();
    if (!reached.ok()) return reached.status().annotate("reading node '" + desc().name + "'");
    if (*reached >= pending.value) {
      node_->host_pending.reset();  // done: a later failure of that stream does not concern it
      break;
    }
    lock.unlock();
    Status status = pending.semaphore->wait(pending.value, timeout);
    if (!status.ok()) return status.annotate("reading node '" + desc().name + "'");
    lock.lock();
  }
  // A host copy that holds "zeros nobody wrote" may hold old bytes of a larger shape (set_sizes).
  if (!out.empty() && node_->host_zeros) std::memset(out.data(), 0, out.size());
  else if (!out.empty()) std::memcpy(out.data(), node_->host.data(), out.size());  // an empty node has no bytes
  return Status();
}

Status NodeTable::check_inputs_given(const std::vector<std::string>& nodes, std::string_view routine) const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  for (const std::string& name : nodes) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) continue;
    const Node& node = *it->second;
    if (node.desc().hosted != HostedKind::kVolatile || !node.host_zeros || node.newer_on_device) continue;
    return failed_precondition_error("input '" + name + "' was never given a value, and routine '" + std::string(routine) +
                                     "' reads it: set it before running (run(" + name + "=...) in Python, "
                                     "kiln_tensor_write in C, HostTensor::write in C++)");
  }
  return Status();
}

Status HostTensor::write(std::span<const std::byte> data, const std::vector<int64_t>& dims) const {
  const NodeTable::ShapedWrite one{desc().name, data, dims};
  return table_->write_shaped({&one, 1});
}

Status NodeTable::write_shaped(std::span<const ShapedWrite> writes, const std::map<std::string, int64_t, std::less<>>& sizes) {
  std::vector<HostTensor> tensors;
  for (const ShapedWrite& w : writes) {
    KILN_ASSIGN_OR_RETURN(HostTensor t, tensor(w.name));
    tensors.push_back(std::move(t));
  }
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    std::vector<int64_t> values = size_values_;
    // The sizes given by name, which the writes' shapes must then agree with.
    std::vector<bool> given(sizes_.size(), false);
    for (const auto& [name, value] : sizes) {
      KILN_ASSIGN_OR_RETURN(const size_t s, size_number(name));
      if (value < 0) return invalid_argument_error("size " + name + " = " + std::to_string(value) + ": a size is 0 or more");
      values[s] = value;
      given[s] = true;
    }
    // Per size: the write (index into `writes`) and dimension that bound it here.
    std::vector<std::optional<std::pair<size_t, size_t>>> bound_by(sizes_.size());
    // Bare sizes first, so that an affine dimension is checked against this binding.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t w = 0; w < writes.size(); ++w) {
        const NodeDesc& d = tensors[w].desc();
        const std::vector<int64_t>& dims = writes[w].dims;
        auto shape = [&] {
          std::string text = "[";
          for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
          return text + "]";
        };
        // The texts are made only for an error: this runs on every write.
        auto where = [&] { return "tensor '" + d.name + "'"; };
        if (dims.size() != d.dims.size()) {
          return invalid_argument_error(where() + " has " + std::to_string(d.dims.size()) +
                                        " dimensions, but the data has " + std::to_string(dims.size()) + " (" +
                                        shape() + ")");
        }
        for (size_t i = 0; i < dims.size(); ++i) {
          auto dim = [&] { return "dimension " + std::to_string(i) + " of " + where(); };
          if (dims[i] < 0) return invalid_argument_error(dim() + " is negative in " + shape());
          if (d.sized_dims.empty() || d.sized_dims[i].is_constant()) {
            if (pass == 0 && dims[i] != d.dims[i]) {
              return invalid_argument_error(dim() + " is " + std::to_string(d.dims[i]) + ", but the data has " +
                                            std::to_string(dims[i]) + " (" + shape() + ")");
            }
            continue;
          }
          const ir::SizeExpr& e = d.sized_dims[i];
          const int s = e.bare_size();
          if (s < 0) {
            if (pass == 0) continue;
            // An affine dimension (N + 1) follows its sizes: they must give it.
            bool all_bound = true;
            for (const auto& [size, coefficient] : e.terms) all_bound = all_bound && values[static_cast<size_t>(size)] >= 0;
            std::optional<int64_t> v = ir::evaluate(e, values);
            if (!all_bound || !v || *v != dims[i]) {
              return invalid_argument_error(dim() + " is " + ir::size_expr_text(e, sizes_) +
                                            (all_bound && v ? " = " + std::to_string(*v) : std::string(", not bound yet")) +
                                            ", but the data has " + std::to_string(dims[i]) + " (" + shape() + ")");
            }
            continue;
          }
          if (pass == 1) continue;
          const size_t size = static_cast<size_t>(s);
          const std::string& name = sizes_[size].name;
          if (given[size] && values[size] != dims[i]) {
            return invalid_argument_error(dim() + " is size " + name + ", which is given as " +
                                          std::to_string(values[size]) + ", but the data has " +
                                          std::to_string(dims[i]) + " (" + shape() + ")");
          }
          if (bound_by[size]) {
            if (values[size] != dims[i]) {
              const auto [other, other_dim] = *bound_by[size];
              return invalid_argument_error(dim() + " is size " + name + ", which is " + std::to_string(values[size]) +
                                            " by dimension " + std::to_string(other_dim) + " of tensor '" +
                                            tensors[other].desc().name + "', but the data has " +
                                            std::to_string(dims[i]) + " (" + shape() + ")");
            }
            continue;
          }
          if (values[size] >= 0 && values[size] != dims[i] && size_set_run_[size] == runs_ + 1) {
            return invalid_argument_error(dim() + " is size " + name + ", which is " + std::to_string(values[size]) +
                                          " for this run (set since the last run), but the data has " +
                                          std::to_string(dims[i]) + " (" + shape() + ")");
          }
          values[size] = dims[i];
          bound_by[size] = {w, i};
        }
      }
    }
    // Each write's bytes at its shape; consts are refused as HostTensor::write refuses them.
    for (size_t w = 0; w < writes.size(); ++w) {
      if (tensors[w].desc().is_const) return tensors[w].write(writes[w].data);
      if (writes[w].shape_only) continue;
      size_t bytes = ir::dtype_size(tensors[w].desc().dtype);
      for (int64_t d : writes[w].dims) bytes *= static_cast<size_t>(d);
      if (writes[w].data.size() != bytes) {
        return invalid_argument_error("tensor '" + writes[w].name + "': " + std::to_string(writes[w].data.size()) +
                                      " bytes for a shape of " + std::to_string(bytes));
      }
      KILN_RETURN_IF_ERROR(check_bool_data(tensors[w].desc(), writes[w].data));
    }
    KILN_RETURN_IF_ERROR(set_sizes_locked(values));
    for (size_t s = 0; s < bound_by.size(); ++s) {
      if (bound_by[s] || given[s]) size_set_run_[s] = runs_ + 1;
    }
  }
  for (size_t w = 0; w < writes.size(); ++w) {
    if (!writes[w].shape_only) KILN_RETURN_IF_ERROR(tensors[w].write(writes[w].data));
  }
  return Status();
}

Status HostTensor::write(std::span<const std::byte> data) const {
  if (desc().is_const) {
    return invalid_argument_error("tensor '" + desc().name + "' is a const: its value is compiled into the code that "
                                  "reads it, so the host cannot set it; declare it as a param to set it from the host");
  }
  if (data.size() != desc().bytes) {
    return invalid_argument_error("node '" + desc().name + "' holds " + std::to_string(desc().bytes) +
                                  " bytes, got " + std::to_string(data.size()));
  }
  KILN_RETURN_IF_ERROR(check_bool_data(desc(), data));
  std::unique_lock<std::mutex> lock(scheduling_mutex());
  while (node_->host_pending && !point_passed(*node_->host_pending)) {
    const hal::SemaphoreValue pending = node_->host_pending->at;
    lock.unlock();
    // A failed transfer fails its stream; the host copy is the host's again either way.
    (void)pending.semaphore->wait(pending.value, Timeout::infinite());
    lock.lock();
  }
  // An array bound to the caller's memory (bind_host) gets its own again: the caller's array
  // keeps what it holds, and the host's value goes to the node's own memory.
  for (const auto& weak : node_->arrays) {
    if (std::shared_ptr<DeviceArray> array = weak.lock()) KILN_RETURN_IF_ERROR(unbind_locked(*array));
  }
  if (!data.empty()) std::memcpy(node_->host.data(), data.data(), data.size());
  node_->host_zeros = false;
  node_->host_pending.reset();  // the host copy is the host's now, whatever a transfer did
  for (const auto& weak : node_->arrays) {
    if (std::shared_ptr<DeviceArray> array = weak.lock()) {
      array->stale = true;
      array->newer = false;  // what the device wrote before is older than this write
    }
  }
  node_->newer_on_device.reset();
  return Status();
}

}  // namespace kiln::runtime
