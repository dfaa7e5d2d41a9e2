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
  KILN_RETURN_IF_ERROR(ir::refuse_sizes(program, "which the runtime does not bind yet"));
  std::vector<bool> written(program.nodes.size(), false);
  for (const ir::Routine& r : program.routines) {
    for (const ir::Assignment& a : r.statements) written[a.target] = true;
    for (const ir::Call& c : r.calls) {
      for (int out : c.outputs) written[out] = true;
    }
  }
  std::shared_ptr<NodeTable> table(new NodeTable());
  table->seed_ = seed;
  for (const ir::TensorNode& n : program.nodes) {
    NodeDesc desc;
    desc.name = n.name;
    desc.dtype = n.dtype;
    desc.dims = n.dims;
    desc.bytes = static_cast<size_t>(n.byte_size());
    desc.written_by_routines = written[n.id];
    desc.is_const = n.role == ir::Role::kConst;
    desc.hosted = n.role == ir::Role::kConst   ? HostedKind::kConstant
                  : n.role == ir::Role::kInput ? HostedKind::kVolatile
                                               : HostedKind::kChangedOnDevices;
    const bool read_only = !desc.written_by_routines &&
                           (desc.hosted == HostedKind::kConstant || n.role == ir::Role::kParam);
    desc.sharing = read_only ? Sharing::kShared : Sharing::kPerStream;
    auto node = std::make_shared<Node>(std::move(desc));
    KILN_RETURN_IF_ERROR(fill_initial_value(n, seed, node->host));
    node->host_zeros = initial_value_is_zero(n);
    table->nodes_.emplace(n.name, std::move(node));
  }
  return table;
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
  for (const auto& a : node.arrays) {
    if (!a.expired()) {
      return failed_precondition_error("cannot change the " + std::string(what) + " of node '" +
                                       node.desc().name +
                                       "': it already has a device array (change it before linking)");
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

void NodeTable::set_automatic_transfers(bool on) { automatic_ = on; }

bool NodeTable::automatic_transfers() const { return automatic_; }

Status HostTensor::read(std::span<std::byte> out, Timeout timeout) const {
  if (out.size() != desc().bytes) {
    return invalid_argument_error("node '" + desc().name + "' holds " + std::to_string(desc().bytes) +
                                  " bytes, asked for " + std::to_string(out.size()));
  }
  std::unique_lock<std::mutex> lock(scheduling_mutex());
  for (;;) {
    if (table_->automatic_) {
      if (std::shared_ptr<DeviceArray> newer = node_->newer_on_device.lock()) {
        KILN_RETURN_IF_ERROR(download_locked(*newer).status());
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
  if (!out.empty()) std::memcpy(out.data(), node_->host.data(), out.size());  // an empty node has no bytes
  return Status();
}

Status NodeTable::check_inputs_given(const std::vector<std::string>& nodes, std::string_view routine) const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  for (const std::string& name : nodes) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) continue;
    const Node& node = *it->second;
    if (node.desc().hosted != HostedKind::kVolatile || !node.host_zeros || !node.newer_on_device.expired()) continue;
    return failed_precondition_error("input '" + name + "' was never given a value, and routine '" + std::string(routine) +
                                     "' reads it: set it before running (run(" + name + "=...) in Python, "
                                     "kiln_tensor_write in C, HostTensor::write in C++)");
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
  std::unique_lock<std::mutex> lock(scheduling_mutex());
  while (node_->host_pending && !point_passed(*node_->host_pending)) {
    const hal::SemaphoreValue pending = node_->host_pending->at;
    lock.unlock();
    // A failed transfer fails its stream; the host copy is the host's again either way.
    (void)pending.semaphore->wait(pending.value, Timeout::infinite());
    lock.lock();
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
