#include "kiln/ral/context.h"

#include "kiln/ral/execution_context.h"

namespace kiln::ral {

namespace {

using ResourceMap = std::unordered_map<std::string, std::unique_ptr<Resource>>;

// kGlobal resources: one per process, kept until it exits.
struct GlobalResources {
  std::mutex create_mutex;
  std::mutex mutex;
  ResourceMap resources;
};

GlobalResources& global_resources() {
  static GlobalResources* globals = new GlobalResources();  // outlives every static destructor
  return *globals;
}

// The one get-or-create of every lifetime. `create_mutex` serializes factories, so a resource
// is made once; `mutex` guards `resources` (and `order`, `closed`) and is not held while the
// factory runs, so that hooks and the factory itself may take it.
Result<Resource*> get_or_make(std::mutex& create_mutex, std::mutex& mutex, ResourceMap& resources,
                              std::string_view key, const ResourceFactory& create,
                              std::vector<Resource*>* order, const bool* closed, const std::string& owner) {
  std::lock_guard<std::mutex> create_lock(create_mutex);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (closed && *closed) return failed_precondition_error(owner + " has finished");
    auto it = resources.find(std::string(key));
    if (it != resources.end()) return it->second.get();
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Resource> made, create());
  if (!made) return internal_error("RAL resource '" + std::string(key) + "': the factory made nothing");
  std::lock_guard<std::mutex> lock(mutex);
  if (closed && *closed) return failed_precondition_error(owner + " has finished");
  Resource* r = made.get();
  resources.emplace(std::string(key), std::move(made));
  if (order) order->push_back(r);
  return r;
}

}  // namespace

Context::Context(std::string device, Registry& registry) : device_(std::move(device)), registry_(registry) {}

Context::~Context() { finish(); }

void Context::finish() {
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources;
  std::vector<Resource*> order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    finished_ = true;
    resources.swap(resources_);
    order.swap(order_);
  }
  for (Resource* r : order) r->on_context_finish(*this);
  // Destroyed in reverse creation order, like members: a later resource may use an earlier one.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (auto& [key, owned] : resources) {
      if (owned.get() == *it) owned.reset();
    }
  }
}

Result<Resource*> Context::get_or_create(std::string_view key, Lifetime lifetime,
                                         const ResourceFactory& create, ExecutionContext* execution) {
  switch (lifetime) {
    case Lifetime::kGlobal: {
      GlobalResources& g = global_resources();
      return get_or_make(g.create_mutex, g.mutex, g.resources, key, create, nullptr, nullptr, "");
    }
    case Lifetime::kContext:
      return get_or_make(create_mutex_, mutex_, resources_, key, create, &order_, &finished_,
                         "the RAL context for device '" + device_ + "'");
    case Lifetime::kExecution:
      if (!execution) {
        return invalid_argument_error("RAL resource '" + std::string(key) +
                                      "': an execution resource needs an execution context");
      }
      return get_or_make(execution->create_mutex_, execution->mutex_, execution->resources_, key,
                         create, nullptr, nullptr, "");
  }
  return internal_error("unknown RAL resource lifetime");
}

void Context::execution_started(ExecutionContext& execution) {
  std::vector<Resource*> order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    order = order_;
  }
  for (Resource* r : order) r->on_execution_start(execution);
}

Status Context::execution_finished(ExecutionContext& execution) {
  std::vector<Resource*> order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    order = order_;
  }
  Status first;
  for (Resource* r : order) {
    Status s = r->on_execution_finish(execution);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace kiln::ral
