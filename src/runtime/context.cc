#include "kiln/runtime/context.h"

#include "kiln/runtime/backend.h"
#include "runtime/device_array.h"
#include "runtime/scheduler.h"

namespace kiln::runtime {

Context::Context(std::shared_ptr<Backend> backend, StreamRef stream, std::shared_ptr<NodeTable> nodes,
                 std::shared_ptr<Context> parent, std::string label)
    : backend_(std::move(backend)),
      stream_(std::move(stream)),
      nodes_(std::move(nodes)),
      parent_(std::move(parent)),
      label_(std::move(label)) {}

void Context::finalize() {
  std::map<std::string, std::shared_ptr<DeviceArray>, std::less<>> arrays;
  std::vector<std::unordered_map<uint64_t, std::shared_ptr<PreparedRun>>> prepared;
  std::vector<ContextRef> descendants;  // released after the lock, like the rest
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    if (finalized_) return;
    finalized_ = true;
    arrays.swap(arrays_);
    // Descendants can no longer run; what they recorded holds this context's arrays.
    std::vector<Context*> pending{this};
    while (!pending.empty()) {
      Context* c = pending.back();
      pending.pop_back();
      prepared.emplace_back().swap(c->prepared_);
      for (const std::weak_ptr<Context>& child : c->children_) {
        if (ContextRef live = child.lock()) {
          pending.push_back(live.get());
          descendants.push_back(std::move(live));
        }
      }
    }
  }
  // The buffers go when the last reference does: queued work holds its own.
}

bool Context::finalized() const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return finalized_;
}

Status Context::check_usable() const {
  for (const Context* c = this; c; c = c->parent_.get()) {
    if (c->finalized_) {
      return failed_precondition_error(
          c == this ? "context '" + label_ + "' has been finalized"
                    : "context '" + label_ + "' descends from '" + c->label_ + "', which has been finalized");
    }
  }
  return Status();
}

bool Context::has_array(std::string_view node) const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return find_array(node).ok();
}

Result<std::shared_ptr<DeviceArray>> Context::find_array(std::string_view node) const {
  KILN_RETURN_IF_ERROR(check_usable());
  for (const Context* c = this; c; c = c->parent_.get()) {
    auto it = c->arrays_.find(node);
    if (it == c->arrays_.end()) continue;
    // An array whose shape names sizes takes the table's current values first.
    if (!it->second->desc.sized_dims.empty()) {
      KILN_RETURN_IF_ERROR(fit_to_sizes_locked(*it->second, nodes_->size_values_locked(), nodes_->size_names()));
    }
    return it->second;
  }
  return not_found_error("node '" + std::string(node) + "' has no array in context '" + label_ +
                         "' or its ancestors (link a routine that uses it into this context tree first)");
}

}  // namespace kiln::runtime
